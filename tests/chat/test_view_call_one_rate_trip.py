"""A view's deferred request takes its rate buckets in one trip to the store (issue 28).

`tools/call` and `sampling/createMessage` take the person's view requests, the view's, then
the row's own bucket (the person's tool calls; the view's sampling) in one
`ratelimit.take_all_async` — one `EVALSHA` in production — in that order, with take_all's
refusal rules: the buckets before a refusal keep their token, the refusing one counts and
audits it, the ones after it are untouched. The view is answered at once, as any refusal of
`view.request`, naming what the refusing bucket limits.
"""

from __future__ import annotations

import uuid

import pytest
from channels.db import database_sync_to_async
from django.conf import settings as django_settings

from bindings import ratelimit
from tests.conftest import next_frame, open_socket, reply_frame, toolcall_event

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

TOOL = "refresh"  # board: read-only, app-only


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


@pytest.fixture
def trips(monkeypatch) -> list[list[tuple[str, str]]]:
    """Every `take_all_async` call (one trip to the store each): the buckets it took."""
    taken: list[list[tuple[str, str]]] = []
    original = ratelimit.take_all_async

    async def recording(buckets, **kwargs):
        taken.append([tuple(b) for b in buckets])
        return await original(buckets, **kwargs)

    monkeypatch.setattr(ratelimit, "take_all_async", recording)
    return taken


def _limits(settings, **limits: tuple[int, float]) -> None:
    settings.ATRIUM_RATE_LIMITS = {**settings.ATRIUM_RATE_LIMITS, **limits}


def _tokens(kind: str, key: object) -> float | None:
    """The tokens a bucket holds in the profile's store (None: never taken, i.e. full)."""
    name = f"{ratelimit._key_prefix}{kind}:{key}"
    if django_settings.REDIS_URL:
        import redis

        raw = redis.Redis.from_url(django_settings.REDIS_URL).hget(name, "tokens")
        return None if raw is None else float(raw)
    found = ratelimit._local.buckets.get(name)
    return None if found is None else found[0]


def _db(func):
    return database_sync_to_async(func)()


async def _rate_limited_rows() -> list[dict]:
    """Every audit row of a rate-limited request (by the bucket's gate, or a refusal the
    consumer would audit again: both carry reason rate_limited)."""
    from audit.models import AuditEvent

    return await _db(
        lambda: list(AuditEvent.objects.filter(reason="rate_limited").values("event_type", "extra"))
    )


async def _tool_calls(name: str) -> int:
    from chat.models import ToolCall

    return await _db(lambda: ToolCall.objects.filter(tool_name=name).count())


async def _open_view(ws_connect, personas):
    """A board view on the owner's socket (the /call that made it took a tool call)."""
    communicator = await open_socket(ws_connect, personas.owner, personas.thread)
    await communicator.send_json_to({"type": "message.post", "text": "/call board.list_items"})
    done = await next_frame(communicator, toolcall_event("success", "list_items"))
    view_id = done["data"]["id"]
    await communicator.send_json_to({"type": "view.open", "toolCallId": view_id, "rid": "open"})
    opened = await reply_frame(communicator, "open")
    assert opened["ok"], opened
    return communicator, opened["result"]["token"], view_id


async def _request(communicator, token: str, method: str, params: dict, rid: str) -> dict:
    await communicator.send_json_to(
        {"type": "view.request", "rid": rid, "token": token, "method": method, "params": params}
    )
    return await reply_frame(communicator, rid)


def _call(name: str = TOOL) -> dict:
    return {"name": name, "arguments": {}}


def _buckets(personas, view_id: int, own: tuple[str, str]) -> list[tuple[str, str]]:
    user = str(personas.owner.pk)
    return [("user_view_request", user), ("view_request", str(view_id)), own]


def _refusal(reply: dict, rid: str, what: str) -> dict:
    """The reply is a rate-limit refusal of `view.request`, in its exact shape."""
    error = reply.get("error") or {}
    assert reply == {
        "type": "reply",
        "rid": rid,
        "ok": False,
        "error": {
            "code": "rate_limited",
            "message": error.get("message"),
            "details": {"retryAfter": error.get("details", {}).get("retryAfter")},
            "jsonrpcCode": -32029,
        },
    }, reply
    assert error["message"].startswith(f"Too many {what}; try again in "), error
    assert error["details"]["retryAfter"] > 0
    return error


# --------------------------------------------------------------------------- one trip


async def test_a_view_tool_call_takes_its_three_buckets_in_one_trip(
    personas, board_server, ws_connect, trips
):
    communicator, token, view_id = await _open_view(ws_connect, personas)
    trips.clear()
    reply = await _request(communicator, token, "tools/call", _call(), "c1")
    assert reply["ok"], reply
    # The person's view requests, the view's, then the person's tool calls: one trip.
    assert trips == [_buckets(personas, view_id, ("tool_call", str(personas.owner.pk)))]
    await communicator.disconnect()


async def test_a_person_out_of_tool_calls_is_refused_with_the_view_buckets_taken(
    personas, board_server, ws_connect, trips, settings
):
    # One tool call (the /call that opens the view), and buckets that hardly refill: their
    # tokens can be read before and after.
    _limits(
        settings,
        tool_call=(1, 0.001),
        user_view_request=(50, 0.001),
        view_request=(50, 0.001),
    )
    communicator, token, view_id = await _open_view(ws_connect, personas)
    user = personas.owner.pk
    before = [
        _tokens(kind, key) or 50.0
        for kind, key in (("user_view_request", user), ("view_request", view_id))
    ]
    trips.clear()

    reply = await _request(communicator, token, "tools/call", _call(), "c1")

    _refusal(reply, "c1", "tool calls")
    assert trips == [_buckets(personas, view_id, ("tool_call", str(user)))]
    # The view's buckets before the refusal keep their token taken.
    after = (_tokens("user_view_request", user), _tokens("view_request", view_id))
    assert after == (
        pytest.approx(before[0] - 1, abs=0.05),
        pytest.approx(before[1] - 1, abs=0.05),
    )
    rows = await _rate_limited_rows()
    assert [r["extra"]["bucket"] for r in rows] == ["tool_call"]  # audited once
    assert await _tool_calls(TOOL) == 0  # nothing decided, no call row
    await communicator.disconnect()


async def test_a_refused_view_bucket_leaves_the_tool_call_bucket_untouched(
    personas, board_server, ws_connect, trips, settings
):
    _limits(settings, view_request=(1, 0.001), tool_call=(10, 0.001))
    communicator, token, view_id = await _open_view(ws_connect, personas)
    user = personas.owner.pk
    assert (await _request(communicator, token, "tools/call", _call(), "c1"))["ok"]
    tool_tokens = _tokens("tool_call", user)
    assert tool_tokens == pytest.approx(8, abs=0.05)  # the /call's and this call's
    trips.clear()

    reply = await _request(communicator, token, "tools/call", _call(), "c2")

    _refusal(reply, "c2", "requests from this view")
    assert trips == [_buckets(personas, view_id, ("tool_call", str(user)))]
    assert _tokens("tool_call", user) == tool_tokens  # after the refusal: not touched
    rows = await _rate_limited_rows()
    assert [r["extra"]["bucket"] for r in rows] == ["view_request"]
    assert await _tool_calls(TOOL) == 1
    await communicator.disconnect()


async def test_a_views_sampling_takes_its_bucket_in_the_same_trip(
    personas, board_server, ws_connect, trips, settings
):
    _limits(settings, view_sampling=(0, 0.001))  # no sampling at all: refused at once
    communicator, token, view_id = await _open_view(ws_connect, personas)
    trips.clear()
    params = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}]}

    reply = await _request(
        communicator, token, "sampling/createMessage", {**params, "maxTokens": 10}, "s1"
    )

    _refusal(reply, "s1", "sampling requests")
    # Keyed by the view (the row's bucket is per view), after the view's two.
    assert trips == [_buckets(personas, view_id, ("view_sampling", str(view_id)))]
    rows = await _rate_limited_rows()
    assert [r["extra"]["bucket"] for r in rows] == ["view_sampling"]
    await communicator.disconnect()


# ------------------------------------------------------------ production: one EVALSHA


async def test_a_view_tool_call_is_one_evalsha(personas, board_server, ws_connect):
    """Through real Redis (production profile), counted with MONITOR: the commands on this
    test's bucket keys while a view's tools/call is answered."""
    if not django_settings.REDIS_URL:
        pytest.skip("needs Redis: the production profile (make test-production)")
    import redis

    communicator, token, _view_id = await _open_view(ws_connect, personas)
    # Warm: the script is loaded (SCRIPT LOAD after a NOSCRIPT, once per Redis server).
    assert (await _request(communicator, token, "tools/call", _call(), "warm"))["ok"]
    client = redis.Redis.from_url(django_settings.REDIS_URL)
    with client.monitor() as monitor:
        reply = await _request(communicator, token, "tools/call", _call(), "c1")
        sentinel = f"sentinel-{uuid.uuid4().hex}"
        client.echo(sentinel)
        commands = []
        while sentinel not in (entry := monitor.next_command())["command"]:
            if entry.get("client_type") != "lua" and ratelimit._key_prefix in entry["command"]:
                commands.append(entry["command"].split()[0].upper())
    assert reply["ok"], reply
    assert commands == ["EVALSHA"]
    await communicator.disconnect()
