"""`lean_rows`' lean statements read and write exactly what the ORM would."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.django_db]


def _values(instance) -> dict:
    return {f.attname: getattr(instance, f.attname) for f in instance._meta.concrete_fields}


def test_select_rows_converts_like_the_orm(personas):
    from bindings.models import AppBinding
    from bindings.services.bindings import binding_create
    from lean_rows import select_rows
    from mcp_bridge.models import McpServer
    from mcp_bridge.services.servers import server_add

    server = server_add(
        name="Board",
        transport="stdio",
        command="python",
        args=["-c", "x"],
        env={"A": "${ATRIUM_MCP_B}"},
    )
    binding = binding_create(
        server=server,
        workspace=personas.workspace,
        thread=personas.thread,
        enabled_tools=["a", "b"],
        allowed_domains={"connectDomains": ["https://api.example.com"]},
        enabled=False,
    )
    for model, pk in ((McpServer, server.pk), (AppBinding, binding.pk)):
        (lean,) = select_rows(model, id=pk)
        assert _values(lean) == _values(model.objects.get(pk=pk))
        assert not lean._state.adding
    (lean,) = select_rows(AppBinding, id=binding.pk)
    assert lean.enabled is False  # a bool, not SQLite's 0
    assert select_rows(AppBinding, id=binding.pk + 1000) == []


def test_select_rows_only_defers_the_other_fields(personas):
    from chat.models import Membership
    from lean_rows import select_rows

    membership = Membership.objects.get(user=personas.member, workspace=personas.workspace)
    (lean,) = select_rows(Membership, id=membership.pk, only=("id", "role"))
    assert lean.role == "member"
    assert lean.get_deferred_fields() == {"workspace_id", "user_id", "created_at"}
    assert lean.user_id == personas.member.pk  # loaded on access


def test_insert_and_update_rows_store_what_save_would(personas):
    from chat.models import ToolCall
    from lean_rows import insert_row, update_row
    from mcp_bridge.services.servers import server_add

    server = server_add(name="Board", transport="stdio", command="python")
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
    assert update_row(call, ["status"], only_if={"status": "running"}) == 0
    call.status = "error"
    assert update_row(call, ["status"], only_if={"status": "success"}) == 1
    assert ToolCall.objects.get(pk=call.pk).status == "error"


def test_audit_rows_stay_append_only():
    from audit.types import AuditEventType, Decision
    from audit.writer import record

    event = record(event_type=AuditEventType.TOOL_CALL_COMPLETED, decision=Decision.ALLOWED)
    assert event.pk is not None
    with pytest.raises(PermissionError):
        event.save()


def test_conditions_by_field_name_match_the_orm(personas):
    from bindings.models import AppBinding
    from bindings.services.bindings import binding_create
    from lean_rows import OrNull, select_rows
    from mcp_bridge.services.servers import server_add

    server = server_add(name="Board", transport="stdio", command="python")
    other = server_add(name="Other", transport="stdio", command="python")
    workspace_wide = binding_create(server=server, workspace=personas.workspace)
    own = binding_create(server=server, workspace=personas.workspace, thread=personas.thread)
    binding_create(server=other, workspace=personas.workspace)

    def ids(rows) -> set[int]:
        return {row.pk for row in rows}

    either = select_rows(
        AppBinding,
        server_id=server.pk,
        workspace_id=personas.workspace.pk,
        thread_id=OrNull(personas.thread.pk),
    )
    assert ids(either) == {workspace_wide.pk, own.pk}
    assert ids(select_rows(AppBinding, server_id=server.pk, thread_id=None)) == {workspace_wide.pk}
    assert ids(select_rows(AppBinding, thread_id=personas.thread.pk)) == {own.pk}
    assert ids(select_rows(AppBinding, workspace_id=personas.workspace.pk)) == ids(
        AppBinding.objects.filter(workspace_id=personas.workspace.pk)
    )


def test_a_condition_on_something_that_is_not_a_column_is_refused(personas):
    from bindings.models import AppBinding
    from lean_rows import select_rows

    with pytest.raises(TypeError):
        select_rows(AppBinding, policies=1)


def test_exists_and_above_conditions(personas):
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from chat.models import Membership
    from lean_rows import Above, RowExists, select_rows

    membership = Membership.objects.get(user=personas.member, workspace=personas.workspace)
    user = get_user_model().objects.get(pk=personas.member.pk)
    active = RowExists(get_user_model(), id=user.pk, is_active=True, password=user.password)
    assert select_rows(Membership, active, id=membership.pk) == [membership]
    changed = RowExists(get_user_model(), id=user.pk, password=user.password + "x")
    assert select_rows(Membership, active, changed, id=membership.pk) == []
    joined = membership.created_at
    assert select_rows(Membership, id=membership.pk, created_at=Above(joined)) == []
    earlier = joined - timedelta(seconds=1)
    assert select_rows(Membership, id=membership.pk, created_at=Above(earlier)) == [membership]
    assert timezone.is_aware(joined)


# ------------------------------------------------------------------- reads in one statement


def test_select_together_reads_what_each_select_rows_reads_in_one_statement(personas, statements):
    from bindings.models import AppBinding, ToolPolicy
    from bindings.services.bindings import binding_create
    from lean_rows import OrNull, Part, Same, select_rows, select_together
    from mcp_bridge.models import McpServer, Tool
    from mcp_bridge.services.servers import server_add

    server = server_add(name="Board", transport="stdio", command="python", env={"A": "b"})
    workspace_wide = binding_create(server=server, workspace=personas.workspace)
    own = binding_create(server=server, workspace=personas.workspace, thread=personas.thread)
    ToolPolicy.objects.create(binding=workspace_wide, tool_name="t", approval="deny")
    ToolPolicy.objects.create(binding=own, tool_name="t", risk="destructive")
    ToolPolicy.objects.create(binding=own, tool_name="other", risk="read")
    Tool.objects.create(server=server, name="t", input_schema={"type": "object"})
    parts = (
        Part(McpServer, id=server.pk),
        Part(
            AppBinding,
            server_id=Same(McpServer, "id"),
            workspace_id=personas.workspace.pk,
            thread_id=OrNull(personas.thread.pk),
        ),
        Part(ToolPolicy, binding_id=Same(AppBinding, "id"), tool_name="t"),
        Part(Tool, server_id=server.pk, name="t", only=("name", "input_schema")),
    )
    statements.clear()
    servers, bindings, rules, tools = select_together(*parts)
    assert len(statements) == 1, statements
    # Two bindings × their policy each: two rows, each part's rows once, as select_rows reads.
    assert [_values(s) for s in servers] == [_values(McpServer.objects.get(pk=server.pk))]
    assert sorted(b.pk for b in bindings) == sorted([workspace_wide.pk, own.pk])
    for binding in bindings:
        assert _values(binding) == _values(select_rows(AppBinding, id=binding.pk)[0])
    assert sorted((r.binding_id, r.risk, r.approval) for r in rules) == sorted(
        [(workspace_wide.pk, "", "deny"), (own.pk, "destructive", "")]
    )
    (tool,) = tools
    assert tool.input_schema == {"type": "object"} and tool.get_deferred_fields()


def test_select_together_a_part_without_rows_hides_nothing(personas):
    from bindings.models import AppBinding, ToolPolicy
    from chat.models import Membership
    from lean_rows import Part, Same, select_together
    from mcp_bridge.models import McpServer

    membership = Membership.objects.get(user=personas.member, workspace=personas.workspace)
    members, bindings, rules, servers = select_together(
        Part(Membership, id=membership.pk),
        Part(AppBinding, id=-1),
        Part(ToolPolicy, binding_id=Same(AppBinding, "id")),
        Part(McpServer, id=-1),
    )
    assert (members, bindings, rules, servers) == ([membership], [], [], [])
    members, servers = select_together(Part(Membership, id=-1), Part(McpServer, id=-1))
    assert (members, servers) == ([], [])


def test_select_together_reads_a_table_once(personas):
    from chat.models import Membership
    from lean_rows import Part, select_together

    with pytest.raises(ValueError):
        select_together(Part(Membership, id=1), Part(Membership, id=2))


def test_a_call_is_decided_with_the_policy_of_the_binding_that_applies(personas):
    """The authority's one statement reads both bindings' policies; the thread's binding
    applies, so only its policy does (not the workspace binding's)."""
    from bindings.models import ToolPolicy
    from bindings.selectors import call_authority
    from bindings.services.bindings import binding_create
    from mcp_bridge.models import Tool
    from mcp_bridge.services.servers import server_add

    server = server_add(name="Board", transport="stdio", command="python")
    Tool.objects.create(server=server, name="t", input_schema={"type": "object"})
    workspace_wide = binding_create(server=server, workspace=personas.workspace)
    ToolPolicy.objects.create(binding=workspace_wide, tool_name="t", approval="deny")
    authority = call_authority(thread=personas.thread, server_id=server.pk, tool_name="t")
    assert authority.binding == workspace_wide
    assert authority.policy is not None and authority.policy.approval == "deny"
    own = binding_create(server=server, workspace=personas.workspace, thread=personas.thread)
    authority = call_authority(thread=personas.thread, server_id=server.pk, tool_name="t")
    assert authority.binding == own and authority.policy is None
    assert authority.tool is not None and authority.tool.name == "t"
    ToolPolicy.objects.create(binding=own, tool_name="t", risk="destructive")
    authority = call_authority(thread=personas.thread, server_id=server.pk, tool_name="t")
    assert authority.policy is not None and authority.policy.risk == "destructive"
    assert authority.policy.approval is None
    from tests.factories import ThreadFactory

    sibling = ThreadFactory(workspace=personas.workspace)
    other = call_authority(thread=sibling, server_id=server.pk, tool_name="t")
    assert other.binding == workspace_wide and other.policy.approval == "deny"
