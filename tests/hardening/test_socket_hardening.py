"""Security review findings 2-6, 8, 9 and the ReDoS check, through the real websocket path
(the ASGI application with its auth middleware, real MCP servers over stdio).

Each test names its finding (issue 13); docs/security.md maps them to DESIGN §8.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

import pytest
from channels.db import database_sync_to_async

from tests.conftest import ROOT_DIR, next_frame, open_socket, reply_frame, toolcall_event

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

HARDENING = ROOT_DIR / "tests" / "fixtures" / "mcp_servers" / "hardening.py"


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


@pytest.fixture
def hardening_server(personas):
    from bindings.services.bindings import binding_create
    from mcp_bridge.services.servers import server_add

    server = server_add(
        name="Hardening", slug="hardening", transport="stdio", command=sys.executable,
        args=[str(HARDENING)],
    )  # fmt: skip
    binding = binding_create(server=server, workspace=personas.workspace)
    return server, binding


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


async def _board_view(communicator):
    await communicator.send_json_to({"type": "message.post", "text": "/call board.list_items"})
    done = await next_frame(communicator, toolcall_event("success", "list_items"))
    await communicator.send_json_to(
        {"type": "view.open", "toolCallId": done["data"]["id"], "rid": "open"}
    )
    opened = await reply_frame(communicator, "open")
    assert opened["ok"], opened
    return done["data"], opened["result"]


async def _view_request(communicator, view, method, params, rid):
    await communicator.send_json_to(
        {"type": "view.request", "rid": rid, "token": view["token"], "method": method,
         "params": params}
    )  # fmt: skip
    return await reply_frame(communicator, rid)


# ---- finding 2: a disabled server runs nothing, whatever is open ----------------------------


async def test_disabling_a_server_stops_its_open_views_and_pending_approvals(
    personas, board_server, ws_connect
):
    from mcp_bridge.models import McpServer

    server, _ = board_server
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    call, view = await _board_view(owner)
    # A pending approval from the view (delete_item asks), then the server is disabled.
    await owner.send_json_to(
        {"type": "view.request", "rid": "del", "token": view["token"], "method": "tools/call",
         "params": {"name": "delete_item", "arguments": {"id": "ATR-101"}}}
    )  # fmt: skip
    pending = await next_frame(owner, toolcall_event("awaiting_approval", "delete_item"))
    await _db(lambda: McpServer.objects.filter(pk=server.pk).update(enabled=False))

    for method, params in (
        ("tools/call", {"name": "list_items", "arguments": {}}),
        ("resources/read", {"uri": "ui://board/app"}),
        ("ui/update-model-context", {"content": [{"type": "text", "text": "x"}]}),
    ):
        reply = await _view_request(owner, view, method, params, method)
        assert reply["ok"] is False and reply["error"]["code"] == "server_disabled", reply

    approval_id = pending["data"]["approval"]["id"]
    await owner.send_json_to(
        {"type": "approval.decide", "rid": "ok", "approvalId": approval_id, "decision": "approve"}
    )
    rejected = await next_frame(owner, toolcall_event("rejected", "delete_item"))
    assert rejected["data"]["error"]["code"] == "server_disabled"
    denied = await _rows(decision="denied", reason="server_disabled")
    assert len(denied) >= 4, denied
    await owner.disconnect()


# ---- finding 3: view traffic is bounded --------------------------------------------------------


async def test_a_viewers_view_call_is_refused_before_any_catalogue_refresh_or_stored_call(
    personas, board_server, ws_connect
):
    from chat.models import ThreadEvent, ToolCall

    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    call, _ = await _board_view(owner)
    viewer = await open_socket(ws_connect, personas.viewer, personas.thread)
    await viewer.send_json_to({"type": "view.open", "toolCallId": call["id"], "rid": "o"})
    view = (await reply_frame(viewer, "o"))["result"]
    refreshes = len(await _rows(event_type=210))

    reply = await _view_request(
        viewer, view, "tools/call",
        {"name": "no_such_tool", "arguments": {"blob": "x" * 100_000}}, "v",
    )  # fmt: skip

    assert reply["ok"] is False and reply["error"]["code"] == "viewer_cannot_act"
    assert len(await _rows(event_type=210)) == refreshes  # no tools/list round trip
    assert not await _db(lambda: ToolCall.objects.filter(tool_name="no_such_tool").exists())
    events = await _db(lambda: list(ThreadEvent.objects.values_list("payload", flat=True)))
    assert not [e for e in events if isinstance(e, dict) and e.get("tool") == "no_such_tool"]
    denied = await _rows(
        decision="denied", reason="viewer_cannot_act", actor_user_id=personas.viewer.pk
    )
    assert len(denied) == 1 and denied[0]["extra"]["refused_before_call"] is True
    await owner.disconnect()
    await viewer.disconnect()


async def test_view_requests_widget_state_and_tool_calls_are_rate_limited(
    personas, board_server, ws_connect, settings
):
    settings.ATRIUM_RATE_LIMITS = {
        **settings.ATRIUM_RATE_LIMITS,
        "view_widget_state": (3, 0.01),
        "tool_call": (4, 0.01),
    }
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    call, view = await _board_view(owner)  # one tool call (/call) taken

    states = [
        await _view_request(owner, view, "atrium/setWidgetState", {"state": {"n": n}}, f"s{n}")
        for n in range(5)
    ]
    assert [s["ok"] for s in states] == [True, True, True, False, False]
    refused = states[3]["error"]
    assert refused["code"] == "rate_limited" and refused["jsonrpcCode"] == -32029
    assert refused["details"]["retryAfter"] > 0

    calls = [
        await _view_request(owner, view, "tools/call", {"name": "list_items", "arguments": {}}, f"c{n}")
        for n in range(4)
    ]  # fmt: skip
    assert [c["ok"] for c in calls] == [True, True, True, False]
    assert calls[3]["error"]["code"] == "rate_limited"
    limited = await _rows(event_type=132)
    # One row per flooded bucket (not one per refused request).
    assert sorted(r["extra"]["bucket"] for r in limited) == ["tool_call", "view_widget_state"]
    await owner.disconnect()


# ---- finding 4: an oversized request is answered, the socket stays ----------------------------


async def test_an_oversized_message_is_refused_and_audited_and_the_socket_stays(
    personas, board_server, ws_connect
):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    call, view = await _board_view(owner)
    big = "x" * (2 * 1024 * 1024)
    await owner.send_json_to(
        {"type": "view.request", "rid": "big", "token": view["token"],
         "method": "ui/update-model-context", "params": {"content": [{"type": "text", "text": big}]}}
    )  # fmt: skip
    reply = await next_frame(owner, lambda f: f.get("type") == "reply" and not f["ok"])
    assert reply["error"]["code"] == "message_too_large"
    ok = await _view_request(owner, view, "ping", {}, "alive")
    assert ok["ok"] is True
    assert await _rows(event_type=131, reason="message_too_large")
    await owner.disconnect()


# ---- finding 5: every refusal is audited -----------------------------------------------------


async def test_refusals_that_no_policy_decided_are_audited(personas, board_server, ws_connect):
    viewer = await open_socket(ws_connect, personas.viewer, personas.thread)
    member = await open_socket(ws_connect, personas.member, personas.thread)
    attempts = [
        (viewer, {"type": "message.post", "text": "hello"}, "forbidden"),
        # Existence first (a viewer sees the thread's approvals anyway); a viewer's decision
        # of a real approval is refused and audited by the service (tests/bindings/test_consent_matrix.py).
        (viewer, {"type": "approval.decide", "approvalId": 1, "decision": "approve"}, "not_found"),
        (viewer, {"type": "tool.cancel", "toolCallId": 1}, "forbidden"),
        (member, {"type": "approval.decide", "approvalId": 999999, "decision": "approve"}, "not_found"),
        (member, {"type": "view.open", "toolCallId": 999999}, "not_found"),
        (member, {"type": "tool.call", "server": "nope", "tool": "x", "arguments": {}}, "server_not_found"),
    ]  # fmt: skip
    for n, (sock, msg, code) in enumerate(attempts):
        await sock.send_json_to({**msg, "rid": f"r{n}"})
        reply = await reply_frame(sock, f"r{n}")
        assert reply["ok"] is False and reply["error"]["code"] == code, reply
    rows = await _rows(event_type=131)
    assert [(r["action"], r["reason"]) for r in rows] == [
        (msg["type"], code) for _, msg, code in attempts
    ]
    await viewer.disconnect()
    await member.disconnect()


async def test_a_handshake_from_a_foreign_origin_is_refused_and_audited(personas, ws_connect):
    _, connected, _ = await ws_connect(
        personas.owner, personas.thread.pk, origin="https://evil.example"
    )
    assert not connected
    rows = await _rows(event_type=120, reason="origin_not_allowed")
    assert len(rows) == 1 and rows[0]["extra"]["origin"] == "https://evil.example"


# ---- finding 6: sockets end with the session -------------------------------------------------


async def _socket_with_client(personas, ws_connect_raw, user):
    """A socket opened with a real login session (the test keeps the Client to log out)."""
    from channels.testing import WebsocketCommunicator
    from django.test import Client

    from config.asgi import application

    client = Client()
    await _db(lambda: client.force_login(user))
    headers = [
        (b"origin", b"http://localhost:8000"),
        (b"host", b"localhost:8000"),
        (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()),
    ]
    communicator = WebsocketCommunicator(
        application, f"/ws/threads/{personas.thread.pk}/?caps=interactiveToolUi", headers=headers
    )
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    await next_frame(communicator, lambda f: f.get("type") == "hello")
    return communicator, client


async def _closed_after_notice(communicator) -> dict:
    notice = await next_frame(communicator, lambda f: f.get("type") == "reply")
    closed = await communicator.receive_output(timeout=10)
    assert closed["type"] == "websocket.close" and closed["code"] == 4403
    return notice


@pytest.mark.parametrize("change", ["logout", "password", "deactivate"])
async def test_logout_password_change_and_deactivation_close_open_sockets(
    personas, ws_connect, change
):
    communicator, client = await _socket_with_client(personas, ws_connect, personas.member)
    user = personas.member

    def act():
        if change == "logout":
            client.logout()
        elif change == "password":
            user.set_password("a-new-password-123")
            user.save()
        else:
            user.is_active = False
            user.save()

    await _db(act)
    notice = await _closed_after_notice(communicator)
    assert notice["error"]["code"] == "session_ended"
    assert await _rows(event_type=130, actor_user_id=user.pk)


async def test_a_session_deleted_behind_the_sockets_back_ends_it_at_the_next_action(
    personas, ws_connect
):
    from django.contrib.sessions.models import Session

    communicator, client = await _socket_with_client(personas, ws_connect, personas.member)
    key = client.cookies["sessionid"].value
    await _db(lambda: Session.objects.filter(session_key=key).delete())  # no signal
    await communicator.send_json_to({"type": "message.post", "rid": "m", "text": "still here?"})
    notice = await _closed_after_notice(communicator)
    assert notice["rid"] == "m" and notice["error"]["code"] == "forbidden"
    from chat.models import Message

    assert not await _db(lambda: Message.objects.filter(text="still here?").exists())


# ---- finding 8: requestModal is decided on the server --------------------------------------


async def test_request_modal_is_decided_audited_and_names_the_app(
    personas, board_server, ws_connect
):
    from bindings.models import AppBinding

    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    call, view = await _board_view(owner)
    title = "Session expired — sign in again"
    reply = await _view_request(owner, view, "openai/requestModal", {"title": title}, "m1")
    assert reply["ok"] and reply["result"] == {"appName": "Board", "title": title}
    await _db(lambda: AppBinding.objects.update(enabled=False))
    refused = await _view_request(owner, view, "openai/requestModal", {"title": title}, "m2")
    assert refused["ok"] is False and refused["error"]["code"] == "binding_disabled"
    rows = await _rows(event_type=430)
    assert [r["decision"] for r in rows] == ["allowed", "denied"]
    assert rows[0]["extra"]["title"] == title
    await owner.disconnect()


# ---- finding 9: /tools shows server text as text ------------------------------------------------


async def test_tools_listing_escapes_server_supplied_names_and_descriptions(
    personas, hardening_server, ws_connect
):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "message.post", "rid": "t", "text": "/tools"})
    listing = await next_frame(
        owner,
        lambda f: f.get("kind") == "message" and f["data"].get("authorLabel") == "Atrium",
        timeout=30,
    )
    html = listing["data"]["html"]  # what every member's browser renders
    phish = next(line for line in html.splitlines() if "hardening.phish" in line)
    assert "<a " not in html and "<strong>" not in phish and "<b>" not in html
    assert "<code>hardening.tick`tock</code>" in html
    assert "[Session expired, sign in](https://evil.example/login)" in html
    await owner.disconnect()


# ---- dynamic check: a ReDoS pattern does not stall other sockets ----------------------------


async def test_a_backtracking_schema_pattern_does_not_stall_other_sockets(
    personas, hardening_server, ws_connect
):
    from tests.resilience.support import ping_latency

    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    other = await open_socket(ws_connect, personas.member, personas.thread)
    await owner.send_json_to(
        {"type": "tool.call", "rid": "warm", "server": "hardening", "tool": "pattern_echo",
         "arguments": {"text": "aaa"}}
    )  # fmt: skip
    await next_frame(owner, toolcall_event("success", "pattern_echo"), timeout=30)
    await ping_latency(other, rid="drain")  # past `other`'s copies of those events
    # 26 a's and a b: ~2^26 steps of a backtracking engine (seconds of a held GIL).
    await owner.send_json_to(
        {"type": "tool.call", "rid": "redos", "server": "hardening", "tool": "pattern_echo",
         "arguments": {"text": "a" * 26 + "b"}}
    )  # fmt: skip
    latencies: list[float] = []

    async def keep_pinging() -> None:
        # Always inside a measured ping: any stall of the event loop lands in one of them.
        while True:
            latencies.append(await ping_latency(other, rid=f"p{len(latencies)}", timeout=60))

    pinger = asyncio.ensure_future(keep_pinging())
    finished = await next_frame(
        owner,
        lambda f: (
            f.get("kind") == "toolcall"
            and f["data"]["tool"] == "pattern_echo"
            and f["data"]["status"] in ("error", "success")
        ),
        timeout=60,
    )
    pinger.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await pinger
    latencies.append(await ping_latency(other, rid="after"))
    assert finished["data"]["status"] == "error"
    assert "does not match" in str(finished["data"]["error"])
    assert max(latencies) < 0.1, latencies
    await owner.disconnect()
    await other.disconnect()
