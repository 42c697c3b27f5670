"""Bindings keep chat's ids, not foreign keys: deleting a workspace or a thread (service,
queryset, admin) still deletes its bindings, approvals and allowances."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

pytestmark = pytest.mark.django_db


@pytest.fixture
def scoped(personas):
    from bindings.models import Allowance, ApprovalRequest
    from bindings.services.bindings import binding_create
    from mcp_bridge.models import McpServer

    server = McpServer.objects.create(name="Board", slug="board", command="true")
    other = McpServer.objects.create(name="Other", slug="other", command="true")
    ws_binding = binding_create(server=server, workspace=personas.workspace)
    thread_binding = binding_create(
        server=other, workspace=personas.workspace, thread=personas.thread
    )
    elsewhere = binding_create(server=server, workspace=personas.other_workspace)
    approval = ApprovalRequest.objects.create(
        thread_id=personas.thread.pk,
        binding=ws_binding,
        server=server,
        tool_name="move",
        arguments_digest="d",
        risk="write",
        requested_by_kind="user",
        expires_at=timezone.now() + timedelta(hours=1),
    )
    Allowance.objects.create(
        binding=ws_binding,
        workspace_id=personas.workspace.pk,
        thread_id=personas.thread.pk,
        tool_name="move",
        approval=approval,
    )
    return ws_binding, thread_binding, elsewhere, approval


def _left(personas):
    from bindings.models import Allowance, AppBinding, ApprovalRequest

    return (
        set(AppBinding.objects.values_list("workspace_id", "thread_id")),
        ApprovalRequest.objects.count(),
        Allowance.objects.count(),
    )


def test_deleting_a_thread_deletes_its_bindings_approvals_and_allowances(personas, scoped):
    ws_binding, _thread_binding, elsewhere, _approval = scoped
    personas.thread.delete()
    bindings, approvals, allowances = _left(personas)
    assert bindings == {(personas.workspace.pk, None), (personas.other_workspace.pk, None)}
    assert (approvals, allowances) == (0, 0)


def test_deleting_a_workspace_deletes_everything_bound_in_it(personas, scoped):
    from chat.models import Workspace

    Workspace.objects.filter(pk=personas.workspace.pk).delete()  # a queryset, as the admin
    bindings, approvals, allowances = _left(personas)
    assert bindings == {(personas.other_workspace.pk, None)}
    assert (approvals, allowances) == (0, 0)


def test_deleting_a_workspace_in_the_admin_deletes_its_bindings(personas, scoped, admin_client):
    response = admin_client.post(
        f"/admin/chat/workspace/{personas.workspace.pk}/delete/", {"post": "yes"}
    )
    assert response.status_code == 302
    bindings, approvals, allowances = _left(personas)
    assert bindings == {(personas.other_workspace.pk, None)}
    assert (approvals, allowances) == (0, 0)
