"""`bindings.audit`'s lean row helpers read and write exactly what the ORM would."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.django_db]


def _values(instance) -> dict:
    return {f.attname: getattr(instance, f.attname) for f in instance._meta.concrete_fields}


def test_select_rows_converts_like_the_orm(personas):
    from bindings import services
    from bindings.audit import select_rows
    from bindings.models import AppBinding
    from mcp_bridge import services as bridge
    from mcp_bridge.models import McpServer

    server = bridge.add_server(
        name="Board",
        transport="stdio",
        command="python",
        args=["-c", "x"],
        env={"A": "${ATRIUM_MCP_B}"},
    )
    binding = services.create_binding(
        server=server,
        workspace=personas.workspace,
        thread=personas.thread,
        enabled_tools=["a", "b"],
        allowed_domains={"connectDomains": ["https://api.example.com"]},
        enabled=False,
    )
    for model, pk in ((McpServer, server.pk), (AppBinding, binding.pk)):
        (lean,) = select_rows(model, "id = %s", [pk])
        assert _values(lean) == _values(model.objects.get(pk=pk))
        assert not lean._state.adding
    (lean,) = select_rows(AppBinding, "id = %s", [binding.pk])
    assert lean.enabled is False  # a bool, not SQLite's 0
    assert select_rows(AppBinding, "id = %s", [binding.pk + 1000]) == []


def test_select_rows_only_defers_the_other_fields(personas):
    from bindings.audit import select_rows
    from chat.models import Membership

    membership = Membership.objects.get(user=personas.member, workspace=personas.workspace)
    (lean,) = select_rows(Membership, "id = %s", [membership.pk], only=("id", "role"))
    assert lean.role == "member"
    assert lean.get_deferred_fields() == {"workspace_id", "user_id", "created_at"}
    assert lean.user_id == personas.member.pk  # loaded on access


def test_insert_and_update_rows_store_what_save_would(personas):
    from bindings.audit import insert_row, update_row
    from chat.models import ToolCall
    from mcp_bridge import services as bridge

    server = bridge.add_server(name="Board", transport="stdio", command="python")
    call = ToolCall(
        thread=personas.thread,
        server=server,
        tool_name="t",
        arguments={"nested": [1, "two", None]},
        origin="app_view",
        requested_by=personas.owner,
    )
    insert_row(call)
    assert call.pk is not None and call.created_at is not None
    stored = ToolCall.objects.get(pk=call.pk)
    assert _values(stored) == _values(call)
    call.status = "success"
    call.result = {"parts": [{"type": "text", "text": "é"}]}
    call.widget_state = {"not": "saved"}
    assert update_row(call, ["status", "result"]) == 1
    stored = ToolCall.objects.get(pk=call.pk)
    assert (stored.status, stored.result, stored.widget_state) == ("success", call.result, None)
    assert update_row(call, ["status"], where="status = %s", params=["running"]) == 0


def test_audit_rows_stay_append_only():
    from bindings.audit import record
    from bindings.events import AuditEventType, Decision

    event = record(event_type=AuditEventType.TOOL_CALL_COMPLETED, decision=Decision.ALLOWED)
    assert event.pk is not None
    with pytest.raises(PermissionError):
        event.save()
