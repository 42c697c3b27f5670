"""Every refused view action leaves its audit row (DESIGN §8), through the real socket path.

A denial raised inside the transaction that wrote its audit row would roll the row back
with it: these tests look for the row after each kind of refusal, and check that nothing
the action would have changed was changed.
"""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from tests.conftest import next_frame, open_socket, reply_frame, toolcall_event

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


async def _board_view(communicator):
    await communicator.send_json_to({"type": "message.post", "text": "/call board.list_items"})
    done = await next_frame(communicator, toolcall_event("success", "list_items"))
    await communicator.send_json_to(
        {"type": "view.open", "toolCallId": done["data"]["id"], "rid": "open"}
    )
    opened = await reply_frame(communicator, "open")
    assert opened["ok"], opened
    return done["data"], opened["result"]


def _board_binding_id() -> int:
    from bindings.models import AppBinding

    return AppBinding.objects.get(server__slug="board", thread_id__isnull=True).pk


async def _disable_board(personas) -> None:
    from bindings.services.bindings import binding_set_enabled

    changed = await database_sync_to_async(
        lambda: binding_set_enabled(
            binding_ids=[_board_binding_id()], enabled=False, actor=personas.owner
        )
    )()
    assert changed == 1


async def _denied_rows(**filters) -> list[dict]:
    from audit.models import AuditEvent

    return await database_sync_to_async(
        lambda: list(
            AuditEvent.objects.filter(decision="denied", **filters).values(
                "event_type", "action", "reason", "actor_kind", "extra", "thread_id"
            )
        )
    )()


def _view_state(call_id: int) -> dict:
    from chat.models import Message, ToolCall

    call = ToolCall.objects.get(pk=call_id)
    return {
        "model_context": call.model_context,
        "widget_state": call.widget_state,
        "view_messages": Message.objects.filter(via_tool_call_id=call_id).count(),
    }


DENIABLE = [
    ("ui/message", {"role": "user", "content": [{"type": "text", "text": "hi"}]}, "ui_message"),
    (
        "ui/update-model-context",
        {"content": [{"type": "text", "text": "secret plan"}]},
        "ui_update_model_context",
    ),
    ("atrium/setWidgetState", {"state": {"tab": 2}}, "widget_state"),
]


@pytest.mark.parametrize(("method", "params", "action"), DENIABLE)
async def test_a_disabled_binding_refuses_and_audits_each_view_action(
    personas, board_server, ws_connect, method, params, action
):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    call, view = await _board_view(owner)
    before = await database_sync_to_async(_view_state)(call["id"])
    await _disable_board(personas)

    await owner.send_json_to(
        {"type": "view.request", "rid": "x", "token": view["token"], "method": method,
         "params": params}
    )  # fmt: skip
    reply = await reply_frame(owner, "x")

    assert reply["ok"] is False and reply["error"]["code"] == "binding_disabled"
    rows = await _denied_rows(action=action, reason="binding_disabled")
    assert len(rows) == 1, rows
    assert rows[0]["actor_kind"] == "app_view" and rows[0]["extra"]["view"] == call["id"]
    assert rows[0]["thread_id"] == personas.thread.pk
    assert await database_sync_to_async(_view_state)(call["id"]) == before
    await owner.disconnect()


@pytest.mark.parametrize(("method", "params", "action"), DENIABLE)
async def test_a_viewers_view_is_refused_and_audited(
    personas, board_server, ws_connect, method, params, action
):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    call, _ = await _board_view(owner)
    viewer = await open_socket(ws_connect, personas.viewer, personas.thread)
    await viewer.send_json_to({"type": "view.open", "toolCallId": call["id"], "rid": "o"})
    opened = await reply_frame(viewer, "o")
    assert opened["ok"], opened
    before = await database_sync_to_async(_view_state)(call["id"])

    await viewer.send_json_to(
        {"type": "view.request", "rid": "v", "token": opened["result"]["token"],
         "method": method, "params": params}
    )  # fmt: skip
    reply = await reply_frame(viewer, "v")

    assert reply["ok"] is False and reply["error"]["code"] == "viewer_cannot_act"
    rows = await _denied_rows(action=action, reason="viewer_cannot_act")
    assert len(rows) == 1, rows
    assert await database_sync_to_async(_view_state)(call["id"]) == before
    await owner.disconnect()
    await viewer.disconnect()


async def test_opening_a_view_of_a_disabled_binding_is_refused_and_audited(
    personas, board_server, ws_connect
):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    call, _ = await _board_view(owner)
    await _disable_board(personas)

    await owner.send_json_to({"type": "view.open", "toolCallId": call["id"], "rid": "again"})
    reply = await reply_frame(owner, "again")

    assert reply["ok"] is False and reply["error"]["code"] == "binding_disabled"
    rows = await _denied_rows(action="resource_read", reason="binding_disabled")
    assert len(rows) == 1 and rows[0]["extra"]["opened"] is True, rows
    await owner.disconnect()


@pytest.mark.parametrize(
    ("method", "params", "code", "action"),
    [
        ("atrium/setWidgetState", {"state": "x" * 70_000}, "too_large", "widget_state"),
        (
            "ui/update-model-context",
            {"content": [{"type": "text", "text": "y" * 70_000}]},
            "too_large",
            "ui_update_model_context",
        ),
        ("ui/message", {"content": []}, "invalid_params", "ui_message"),
        ("ui/message", {"content": "z" * 9000}, "message_too_long", "ui_message"),
        ("tools/call", {"name": 7}, "invalid_params", "app_tool_call"),
        ("ui/download-file", {"contents": "nope"}, "invalid_params", "view_file_save"),
    ],
)
async def test_malformed_view_requests_are_refused_with_a_reason_and_audited(
    personas, board_server, ws_connect, method, params, code, action
):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    call, view = await _board_view(owner)
    before = await database_sync_to_async(_view_state)(call["id"])

    await owner.send_json_to(
        {"type": "view.request", "rid": "m", "token": view["token"], "method": method,
         "params": params}
    )  # fmt: skip
    reply = await reply_frame(owner, "m")

    assert reply["ok"] is False and reply["error"]["code"] == code
    assert reply["error"]["message"]
    rows = await _denied_rows(action=action, reason=code)
    assert len(rows) == 1, rows
    assert rows[0]["extra"]["view"] == call["id"] and rows[0]["actor_kind"] == "app_view"
    assert await database_sync_to_async(_view_state)(call["id"]) == before
    await owner.disconnect()


async def test_removing_a_binding_cancels_its_pending_approvals_and_tells_the_view(
    personas, board_server, ws_connect
):
    from audit.models import AuditEvent
    from audit.types import AuditEventType
    from bindings.models import ApprovalRequest
    from bindings.services.bindings import binding_remove

    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    member = await open_socket(ws_connect, personas.member, personas.thread)
    call, view = await _board_view(owner)
    item_id = call["result"]["structured"]["columns"][0]["items"][0]["id"]
    await owner.send_json_to(
        {"type": "view.request", "rid": "d", "token": view["token"], "method": "tools/call",
         "params": {"name": "delete_item", "arguments": {"id": item_id}}}
    )  # fmt: skip
    waiting = await next_frame(member, toolcall_event("awaiting_approval", "delete_item"))
    approval_id = waiting["data"]["approval"]["id"]
    binding_id = await database_sync_to_async(_board_binding_id)()

    removed = await database_sync_to_async(
        lambda: binding_remove(binding_id=binding_id, actor=personas.owner, actor_label="admin")
    )()
    assert removed is True

    reply = await reply_frame(owner, "d")
    assert reply["ok"] is False and reply["error"]["code"] == "binding_removed"
    closed = await next_frame(member, toolcall_event("rejected", "delete_item"))
    assert closed["data"]["error"]["code"] == "binding_removed"
    rows = await database_sync_to_async(
        lambda: list(
            AuditEvent.objects.filter(binding_id=binding_id)
            .order_by("pk")
            .values_list("event_type", "reason", "extra")
        )
    )()
    cancelled = [r for r in rows if r[0] == AuditEventType.APPROVAL_CANCELLED]
    assert [(r[1], r[2]["approval_id"]) for r in cancelled] == [("binding_removed", approval_id)]
    (removal,) = [r for r in rows if r[0] == AuditEventType.BINDING_REMOVED]
    assert removal[2]["cancelled_approvals"] == [approval_id]
    assert removal[2]["settings"]["enabled"] is True
    # The approval row went with its binding; deciding it now is a clear "not found".
    assert not await database_sync_to_async(ApprovalRequest.objects.filter(pk=approval_id).exists)()
    await member.send_json_to(
        {"type": "approval.decide", "approvalId": approval_id, "decision": "approve", "rid": "late"}
    )
    late = await reply_frame(member, "late")
    assert late["ok"] is False and late["error"]["code"] == "not_found"
    await owner.disconnect()
    await member.disconnect()


async def test_update_binding_audits_only_what_changed_and_refuses_scope_changes(personas):
    from audit.models import AuditEvent
    from audit.types import AuditEventType
    from bindings.services.bindings import binding_create, binding_update
    from bindings.services.errors import BindingError
    from mcp_bridge.services.servers import server_add

    def run():
        server = server_add(name="Echo", slug="echo", transport="stdio",
                                            command="true")  # fmt: skip
        binding = binding_create(server=server, workspace=personas.workspace)
        binding_update(
            binding_id=binding.pk,
            changes={"enabled": True, "ui_message_rate_limit": 2},
            actor=personas.owner,
        )
        binding_update(binding_id=binding.pk, changes={"enabled": True})
        with pytest.raises(BindingError) as refused:
            binding_update(binding_id=binding.pk, changes={"thread": None})
        changes = list(
            AuditEvent.objects.filter(
                binding_id=binding.pk, event_type=AuditEventType.BINDING_CHANGED
            ).values_list("extra", flat=True)
        )
        return refused.value.code, changes

    code, changes = await database_sync_to_async(run)()
    assert code == "invalid_change"
    assert [c["changes"] for c in changes] == [{"ui_message_rate_limit": [6, 2]}]
