"""Tool calls through the real websocket path against the real `board` example server."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from tests.chat.test_app_view_bridge import _board_view
from tests.conftest import next_frame, open_socket, reply_frame, toolcall_event

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


async def test_call_command_runs_the_tool_and_every_member_sees_the_result(
    personas, board_server, ws_connect
):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    member = await open_socket(ws_connect, personas.member, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "/call board.list_items {}"})

    running = await next_frame(member, toolcall_event("running", "list_items"))
    assert running["data"]["origin"] == "user"
    done = await next_frame(member, toolcall_event("success", "list_items"))
    result = done["data"]["result"]
    texts = [p["text"] for p in result["parts"] if p["type"] == "text"]
    assert texts and "ATR-101" in texts[0]
    assert isinstance(result["structured"], dict)
    assert result["uiMeta"]["board/version"] >= 1
    assert done["data"]["view"]["uri"] == "ui://board/app"
    assert done["data"]["latencyMs"] > 0

    # Reload: the snapshot holds the very same canonical object.
    from chat.selectors import thread_snapshot

    snapshot = await database_sync_to_async(thread_snapshot)(thread=personas.thread)
    stored = next(c for c in snapshot["toolCalls"] if c["id"] == done["data"]["id"])
    assert stored == done["data"]
    await owner.disconnect()
    await member.disconnect()


async def test_text_only_client_gets_the_fallback(personas, board_server, ws_connect):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    text_client = await open_socket(ws_connect, personas.member, personas.thread, caps="")
    await owner.send_json_to({"type": "message.post", "text": "/call board.list_items"})
    done = await next_frame(text_client, toolcall_event("success", "list_items"))
    data = done["data"]
    assert data["view"] is None
    assert [p["type"] for p in data["result"]["parts"]] == ["text"]
    assert data["result"]["structured"] is None and data["result"]["uiMeta"] is None
    await owner.disconnect()
    await text_client.disconnect()


async def test_a_persons_own_call_of_a_destructive_tool_runs_without_a_card(
    personas, board_server, ws_connect
):
    """Issue 11: a person's own /call is consent, whatever the tool's risk."""
    from audit.models import AuditEvent
    from bindings.models import ApprovalRequest

    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    member = await open_socket(ws_connect, personas.member, personas.thread)
    await owner.send_json_to(
        {"type": "message.post", "text": '/call board.delete_item {"id": "ATR-101"}'}
    )
    done = await next_frame(member, toolcall_event(None, "delete_item"))
    while done["data"]["status"] == "running":
        assert done["data"]["approval"] is None
        done = await next_frame(member, toolcall_event(None, "delete_item"))
    assert done["data"]["status"] == "success", done["data"]
    assert done["data"]["approval"] is None
    assert not await database_sync_to_async(ApprovalRequest.objects.exists)()
    decision = await database_sync_to_async(
        lambda: AuditEvent.objects.get(tool_name="delete_item", action="user_tool_call")
    )()
    assert (decision.decision, decision.reason) == ("approved", "user_initiated")
    assert decision.actor_user_id == personas.owner.pk
    assert decision.extra["risk"] == "destructive"
    await owner.disconnect()
    await member.disconnect()


async def test_a_viewers_call_is_refused(personas, board_server, ws_connect):
    from audit.models import AuditEvent

    viewer = await open_socket(ws_connect, personas.viewer, personas.thread)
    await viewer.send_json_to(
        {"type": "tool.call", "server": "board", "tool": "delete_item", "rid": 1,
         "arguments": {"id": "ATR-101"}}
    )  # fmt: skip
    reply = await reply_frame(viewer, 1)
    assert reply["ok"] is False and reply["error"]["code"] == "forbidden"
    rows = await database_sync_to_async(
        lambda: list(AuditEvent.objects.filter(action="user_tool_call").values_list(
            "decision", "reason", "actor_user_id"))
    )()  # fmt: skip
    assert rows == [("denied", "viewer_cannot_act", personas.viewer.pk)]
    await viewer.disconnect()


async def test_a_views_destructive_call_waits_for_a_member_not_a_viewer(
    personas, board_server, ws_connect
):
    from audit.models import AuditEvent

    owner, call, view = await _board_view(ws_connect, personas)
    member = await open_socket(ws_connect, personas.member, personas.thread)
    viewer = await open_socket(ws_connect, personas.viewer, personas.thread)
    await owner.send_json_to(
        {"type": "view.request", "rid": "v", "token": view["token"], "method": "tools/call",
         "params": {"name": "delete_item", "arguments": {"id": "ATR-101"}}}
    )  # fmt: skip
    waiting = await next_frame(member, toolcall_event("awaiting_approval", "delete_item"))
    approval = waiting["data"]["approval"]
    assert approval["status"] == "pending" and approval["risk"] == "destructive"
    assert approval["offers"] == []  # declared destructive: Approve once only

    await viewer.send_json_to(
        {"type": "approval.decide", "approvalId": approval["id"], "decision": "approve", "rid": 1}
    )
    refused = await next_frame(viewer, lambda f: f.get("type") == "reply" and f.get("rid") == 1)
    assert refused["ok"] is False and refused["error"]["code"] == "forbidden"

    await member.send_json_to(
        {"type": "approval.decide", "approvalId": approval["id"], "decision": "approve", "rid": 2}
    )
    reply = await reply_frame(owner, "v", timeout=30)
    assert reply["ok"], reply
    done = await next_frame(member, toolcall_event("success", "delete_item"))
    assert done["data"]["approval"]["status"] == "approved"
    assert done["data"]["approval"]["decidedBy"]["name"] == "marco"

    decisions = await database_sync_to_async(
        lambda: list(
            AuditEvent.objects.filter(tool_name="delete_item")
            .order_by("id")
            .values_list("decision", "action")
        )
    )()
    assert ("pending", "app_tool_call") in decisions
    assert ("approved", "approval") in decisions
    assert ("approved", "app_tool_call") in decisions
    for c in (owner, member, viewer):
        await c.disconnect()


async def test_app_only_tool_cannot_be_called_by_a_person(personas, board_server, ws_connect):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to(
        {"type": "message.post", "text": '/call board.move_item {"id": "ATR-101", "to": "done"}'}
    )
    refused = await next_frame(owner, toolcall_event("rejected", "move_item"))
    assert refused["data"]["error"]["code"] == "tool_not_visible_to_model"
    await owner.disconnect()


async def test_unbound_server_is_refused(personas, board_server, ws_connect):
    # The other workspace has no binding for the board server.
    outsider = await open_socket(ws_connect, personas.outsider, personas.other_thread)
    await outsider.send_json_to({"type": "message.post", "text": "/call board.list_items"})
    refused = await next_frame(outsider, toolcall_event("rejected", "list_items"))
    assert refused["data"]["error"]["code"] == "no_binding"
    await outsider.disconnect()


async def test_invalid_call_syntax_gets_a_helpful_answer(personas, board_server, ws_connect):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "/call board.list_items {nope"})
    answer = await next_frame(
        owner,
        lambda f: f.get("kind") == "message" and f["data"]["role"] == "assistant",
    )
    assert "not valid JSON" in answer["data"]["text"]
    # Typed as an escape, U+0000 is valid JSON but no database stores it: refused alike.
    await owner.send_json_to(
        {"type": "message.post", "text": '/call board.list_items {"q": "\\u0000"}'}
    )
    answer = await next_frame(
        owner,
        lambda f: (
            f.get("kind") == "message"
            and f["data"]["role"] == "assistant"
            and "U+0000" in f["data"]["text"]
        ),
    )
    assert "may not contain U+0000" in answer["data"]["text"]
    await owner.disconnect()


async def test_tool_list_loads_the_catalogue_and_hides_app_only_tools(
    personas, board_server, ws_connect
):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "tools.list", "rid": "t"})
    reply = await next_frame(owner, lambda f: f.get("type") == "reply" and f.get("rid") == "t")
    names = {t["name"] for t in reply["result"]["tools"]}
    assert {"list_items", "add_item", "delete_item"} <= names
    assert not names & {"move_item", "refresh"}
    delete = next(t for t in reply["result"]["tools"] if t["name"] == "delete_item")
    assert delete["risk"] == "destructive" and delete["server"]["slug"] == "board"
    await owner.disconnect()


async def test_overdue_approval_expires_and_its_call_is_closed(personas, board_server, ws_connect):
    from datetime import timedelta

    from django.utils import timezone

    from audit.models import AuditEvent
    from bindings.models import ApprovalRequest

    owner, _, view = await _board_view(ws_connect, personas)
    await owner.send_json_to(
        {"type": "view.request", "rid": "v", "token": view["token"], "method": "tools/call",
         "params": {"name": "delete_item", "arguments": {"id": "ATR-101"}}}
    )  # fmt: skip
    waiting = await next_frame(owner, toolcall_event("awaiting_approval", "delete_item"))
    await database_sync_to_async(
        lambda: ApprovalRequest.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    )()
    # Anyone opening the thread closes overdue approvals.
    member = await open_socket(ws_connect, personas.member, personas.thread)
    closed = await next_frame(owner, toolcall_event("rejected", "delete_item"))
    assert closed["data"]["id"] == waiting["data"]["id"]
    assert closed["data"]["error"]["code"] == "approval_expired"
    assert closed["data"]["approval"]["status"] == "expired"
    await member.send_json_to(
        {
            "type": "approval.decide",
            "approvalId": waiting["data"]["approval"]["id"],
            "decision": "approve",
            "rid": "late",
        }
    )
    late = await next_frame(member, lambda f: f.get("type") == "reply" and f.get("rid") == "late")
    assert late["ok"] is False and late["error"]["code"] == "already_decided"
    assert await database_sync_to_async(
        AuditEvent.objects.filter(event_type=503, tool_name="delete_item").exists
    )()
    await owner.disconnect()
    await member.disconnect()
