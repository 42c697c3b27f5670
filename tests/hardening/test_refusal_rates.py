"""Security issue 23, F4 and F9: refusals are audited at a bounded rate, per person or per
client address, and the next row written says how many were skipped; CSP drops are audited
once per resource content and binding; `tools.list` and `approval.decide` are rate limited.

Through the real ASGI application (WebsocketCommunicator). The rate-limit clock is a fake
one the tests move forward (``bindings.ratelimit._now``): no test waits for time to pass.
"""

from __future__ import annotations

import sys

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from bindings import ratelimit
from tests.conftest import ROOT_DIR, next_frame, open_socket, reply_frame, toolcall_event

pytestmark = [pytest.mark.django_db(transaction=True)]

HOSTILE = ROOT_DIR / "tests" / "fixtures" / "mcp_servers" / "hostile.py"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    """The buckets' clock, moved by the test (every test's buckets start full:
    tests/conftest.py, ``ratelimit.reset_for_tests``)."""
    fake = Clock()
    monkeypatch.setattr(ratelimit, "_now", fake)
    return fake


def _db(fn):
    return database_sync_to_async(fn)()


async def _rows(**filters) -> list[dict]:
    from audit.models import AuditEvent

    return await _db(
        lambda: list(
            AuditEvent.objects.filter(**filters)
            .order_by("pk")
            .values("event_type", "decision", "action", "reason", "actor_user_id", "extra")
        )
    )


def _burst(settings) -> int:
    return int(settings.ATRIUM_RATE_LIMITS["refusal_audit"][0])


# ---- the rule itself (the embedded store; production runs the same through Redis) ------------


def test_the_audit_gate_writes_a_burst_then_counts_and_the_next_row_carries_the_count(
    clock, settings
):
    settings.ATRIUM_RATE_LIMITS = {**settings.ATRIUM_RATE_LIMITS, "refusal_audit": (3, 0.1)}
    gates = [ratelimit.audit_gate("refusal_audit", "user:1") for _ in range(10)]
    assert [g.write for g in gates] == [True] * 3 + [False] * 7
    assert [g.skipped for g in gates[:3]] == [0, 0, 0]
    assert ratelimit.audit_gate("refusal_audit", "user:2").write  # another key: its own
    clock.now += 10  # one token back
    later = ratelimit.audit_gate("refusal_audit", "user:1")
    assert later.write and later.skipped == 7
    assert not ratelimit.audit_gate("refusal_audit", "user:1").write  # and counting again


# ---- a member's refused frames --------------------------------------------------------------


async def test_a_burst_of_viewer_tool_calls_writes_bounded_rows_and_a_later_row_counts_the_rest(
    personas, ws_connect, clock, settings
):
    viewer = await open_socket(ws_connect, personas.viewer, personas.thread)
    for n in range(50):
        await viewer.send_json_to(
            {"type": "tool.call", "rid": n, "server": "board", "tool": "list_items"}
        )
        reply = await reply_frame(viewer, n)
        assert reply["error"]["code"] == "forbidden"  # refused, answered, socket stays

    rows = await _rows(decision="denied", actor_user_id=personas.viewer.pk)
    assert len(rows) == _burst(settings)  # not 50 (nor 2 per refusal)
    assert all(r["reason"] == "viewer_cannot_act" for r in rows)
    assert not any("skipped" in r["extra"] for r in rows)

    clock.now += 10
    await viewer.send_json_to({"type": "tool.call", "rid": "late", "server": "b", "tool": "t"})
    await reply_frame(viewer, "late")
    rows = await _rows(decision="denied", actor_user_id=personas.viewer.pk)
    assert len(rows) == _burst(settings) + 1
    assert rows[-1]["extra"]["skipped"] == 50 - _burst(settings)
    await viewer.disconnect()


# ---- anonymous handshakes: per client address -----------------------------------------------


async def _forged_handshake(thread_id: int, address: str) -> None:
    from config.asgi import application

    communicator = WebsocketCommunicator(
        application,
        f"/ws/threads/{thread_id}/",
        headers=[(b"origin", b"https://evil.example"), (b"host", b"localhost:8000")],
    )
    communicator.scope["client"] = (address, 40000)
    connected, code = await communicator.connect(timeout=5)
    assert not connected and code == 4403


async def test_forged_origin_handshakes_are_audited_at_a_bounded_rate_per_client_address(
    personas, clock, settings
):
    flooder, other = "203.0.113.7", "198.51.100.9"
    for _ in range(30):
        await _forged_handshake(personas.thread.pk, flooder)
    rows = await _rows(event_type=120, reason="origin_not_allowed")
    assert len(rows) == _burst(settings)

    # Another address is not silenced by the flood (its own key)...
    await _forged_handshake(personas.thread.pk, other)
    rows = await _rows(event_type=120, reason="origin_not_allowed")
    assert len(rows) == _burst(settings) + 1 and "skipped" not in rows[-1]["extra"]

    # ...and the flooder's next row says how many of its refusals went unwritten.
    clock.now += 10
    await _forged_handshake(personas.thread.pk, flooder)
    rows = await _rows(event_type=120, reason="origin_not_allowed")
    assert len(rows) == _burst(settings) + 2
    assert rows[-1]["extra"]["skipped"] == 30 - _burst(settings)


# ---- CSP drops: once per resource content and binding, not per opening ------------------------


@pytest.fixture
def hostile_server(personas):
    from bindings.services.bindings import binding_create
    from mcp_bridge.services.servers import server_add

    server = server_add(
        name="Hostile", slug="hostile", transport="stdio", command=sys.executable,
        args=[str(HOSTILE)],
    )  # fmt: skip
    binding = binding_create(server=server, workspace=personas.workspace)
    return server, binding


@pytest.fixture
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


async def test_opening_the_same_view_again_does_not_audit_its_csp_drops_again(
    personas, hostile_server, ws_connect, close_connections
):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "/call hostile.hostile_view"})
    done = await next_frame(owner, toolcall_event("success", "hostile_view"))
    member = await open_socket(ws_connect, personas.member, personas.thread)
    for n, socket in enumerate([owner] * 5 + [member] * 2):
        await socket.send_json_to(
            {"type": "view.open", "toolCallId": done["data"]["id"], "rid": f"o{n}"}
        )
        opened = await reply_frame(socket, f"o{n}")
        assert opened["ok"], opened
    drops = await _rows(event_type=221)
    # The wildcard connect-src the app asks for is dropped (and audited) once.
    assert len(drops) == 1, drops
    assert drops[0]["extra"]["value"] == "*" and drops[0]["extra"]["content_hash"]
    await owner.disconnect()
    await member.disconnect()


# ---- F9: tools.list and approval.decide are rate limited --------------------------------------


async def test_tools_list_and_approval_decide_are_rate_limited_and_the_socket_stays(
    personas, ws_connect, settings, clock
):
    settings.ATRIUM_RATE_LIMITS = {
        **settings.ATRIUM_RATE_LIMITS,
        "tools_list": (2, 0.001),
        "approval_decide": (3, 0.001),
    }
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    lists = []
    for n in range(3):
        await owner.send_json_to({"type": "tools.list", "rid": f"l{n}"})
        lists.append(await reply_frame(owner, f"l{n}"))
    assert [r["ok"] for r in lists] == [True, True, False]
    assert lists[2]["error"]["code"] == "rate_limited"
    assert "Too many tool list requests" in lists[2]["error"]["message"]
    assert lists[2]["error"]["details"]["retryAfter"] > 0

    decides = []
    for n in range(4):
        await owner.send_json_to(
            {"type": "approval.decide", "rid": f"d{n}", "approvalId": 999_999,
             "decision": "approve"}
        )  # fmt: skip
        decides.append(await reply_frame(owner, f"d{n}"))
    assert [r["error"]["code"] for r in decides] == ["not_found"] * 3 + ["rate_limited"]

    await owner.send_json_to({"type": "ping", "rid": "alive"})
    assert (await next_frame(owner, lambda f: f.get("type") == "pong"))["rid"] == "alive"
    limited = await _rows(event_type=132)
    assert sorted(r["extra"]["bucket"] for r in limited) == ["approval_decide", "tools_list"]
    await owner.disconnect()


async def test_a_viewers_burst_of_approval_decisions_is_audited_at_a_bounded_rate(
    personas, board_server, ws_connect, settings, clock, close_connections
):
    settings.ATRIUM_RATE_LIMITS = {**settings.ATRIUM_RATE_LIMITS, "refusal_audit": (5, 0.1)}
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    # A pending approval: the board view asks to delete an item (deleting always asks).
    await owner.send_json_to({"type": "message.post", "text": "/call board.list_items"})
    done = await next_frame(owner, toolcall_event("success", "list_items"))
    await owner.send_json_to({"type": "view.open", "toolCallId": done["data"]["id"], "rid": "o"})
    view = (await reply_frame(owner, "o"))["result"]
    await owner.send_json_to(
        {"type": "view.request", "rid": "del", "token": view["token"], "method": "tools/call",
         "params": {"name": "delete_item", "arguments": {"id": "ATR-101"}}}
    )  # fmt: skip
    pending = await next_frame(owner, toolcall_event("awaiting_approval", "delete_item"))
    approval_id = pending["data"]["approval"]["id"]
    viewer = await open_socket(ws_connect, personas.viewer, personas.thread)
    codes = []
    for n in range(30):
        await viewer.send_json_to(
            {"type": "approval.decide", "rid": n, "approvalId": approval_id, "decision": "approve"}
        )
        codes.append((await reply_frame(viewer, n))["error"]["code"])
    assert set(codes) <= {"forbidden", "rate_limited"} and codes[0] == "forbidden"
    # Every refusal row of the viewer together (the service's APPROVAL_DECISION_REFUSED,
    # the action's own) is bounded, not one or two per frame; the rate limit's own row
    # (RATE_LIMITED, 132) is paced separately, once per flooded bucket.
    refused = await _rows(decision="denied", actor_user_id=personas.viewer.pk)
    assert len([r for r in refused if r["event_type"] != 132]) == 5, refused
    assert len([r for r in refused if r["event_type"] == 132]) <= 1, refused
    assert refused[0]["event_type"] == 523 and refused[0]["reason"] == "viewer_cannot_act"
    await owner.disconnect()
    await viewer.disconnect()
