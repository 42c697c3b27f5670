"""Every factory builds a valid row with its defaults, the way its docstring says."""

from __future__ import annotations

import pytest

from audit.models import AuditEvent
from chat.models import Thread
from tests import factories

pytestmark = pytest.mark.django_db


def test_service_built_rows_come_with_their_audit_trail():
    thread = factories.ThreadFactory()
    owner = thread.workspace.memberships.get(role="owner").user
    assert thread.created_by == owner
    policy = factories.ToolPolicyFactory(binding__workspace=thread.workspace)
    assert policy.binding.workspace_id == thread.workspace_id and policy.approval == "auto"
    # Workspace, thread, server, binding and policy: each audited by its service.
    assert AuditEvent.objects.count() >= 5


def test_traffic_rows_are_plain_and_consistent():
    call = factories.ToolCallFactory()
    assert call.status == "success" and call.origin == "user"
    approval = factories.ApprovalRequestFactory()
    thread = Thread.objects.get(pk=approval.thread_id)
    assert thread.workspace_id == approval.binding.workspace_id
    assert approval.server == approval.binding.server and approval.status == "pending"
    assert factories.MessageFactory(thread=call.thread).thread == call.thread
    assert factories.ToolFactory().visible_to_model
    assert factories.UiResourceFactory().size > 0
    assert factories.MediaAssetFactory(thread=call.thread, tool_call=call).status == "staged"


def test_users_share_one_real_password_hash_and_staff_is_a_trait():
    amy, ben = factories.UserFactory(), factories.UserFactory(staff=True)
    assert amy.check_password(factories.PASSWORD) and amy.password == ben.password
    assert not amy.is_staff and ben.is_staff and ben.is_superuser
