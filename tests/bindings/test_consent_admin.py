"""Consent in the admin: approving can remember consent with the chat's rules, every
allowance is listed, and revoking one is audited and decides the very next call."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _client(user) -> Client:
    user.is_staff = user.is_superuser = True
    user.save()
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def decide_call(personas, board_server):
    """The model's call of the board's write tool ``add_item`` (no standing policy)."""
    from bindings.models import ToolPolicy
    from chat.calls.decide import tool_call_decide
    from chat.calls.requests import CallRequest
    from mcp_bridge import gateway
    from mcp_bridge.services.catalogue import catalogue_apply
    from mcp_bridge.services.servers import spec_for

    server, binding = board_server
    ToolPolicy.objects.filter(binding=binding).delete()  # the fixture's standing approvals
    with gateway.blocking_bridge() as bridge:
        catalogue_apply(server=server, tools=bridge.list_tools(spec_for(server)))

    def decide(title: str):
        call, outcome = tool_call_decide(
            request=CallRequest(
                thread=personas.thread,
                server=server,
                tool_name="add_item",
                arguments={"title": title},
                origin="model",
                user=personas.member,
                role="member",
            ),
        )
        return call, outcome

    return decide


def _act(client, url, action, pk):
    response = client.post(url, {"action": action, "_selected_action": [pk]}, follow=True)
    return [(m.level_tag, str(m)) for m in response.context["messages"]]


APPROVALS = "/admin/bindings/approvalrequest/"
ALLOWANCES = "/admin/bindings/allowance/"


def test_owner_allows_in_the_workspace_from_the_admin_then_revokes(personas, decide_call):
    from audit.models import AuditEvent
    from bindings.models import Allowance

    call, outcome = decide_call("First")
    assert outcome == "ask"
    owner = _client(personas.owner)
    messages = _act(owner, APPROVALS, "allow_in_workspace_selected", call.approval.pk)
    assert messages[0][0] == "success", messages
    assert "allowed it in the workspace" in messages[0][1]
    call.refresh_from_db()
    assert call.status == "success", call.error
    allowance = Allowance.objects.get()
    assert (allowance.scope, allowance.granted_by, allowance.approval_id) == (
        "workspace",
        personas.owner,
        call.approval.pk,
    )
    created = AuditEvent.objects.get(event_type=520)
    assert (created.actor_label, created.actor_user_id) == ("admin", personas.owner.pk)

    # The next call runs on it…
    _, outcome = decide_call("Second")
    assert outcome == "allow"
    page = owner.get(ALLOWANCES).content.decode()
    assert "add_item" in page and "whole workspace" in page and "active" in page

    # …until it is revoked here; then the very next call asks again.
    messages = _act(owner, ALLOWANCES, "revoke_selected", allowance.pk)
    assert "Revoked 1 allowance" in messages[0][1], messages
    allowance.refresh_from_db()
    assert allowance.revoked_at is not None and allowance.revoked_by == personas.owner
    assert AuditEvent.objects.filter(event_type=521, actor_label="admin").count() == 1
    _, outcome = decide_call("Third")
    assert outcome == "ask"
    page = owner.get(ALLOWANCES + "?state=revoked").content.decode()
    assert "revoked by olivia" in page


def test_a_member_cannot_allow_in_the_workspace_from_the_admin(personas, decide_call):
    from audit.models import AuditEvent
    from bindings.models import Allowance

    call, _ = decide_call("First")
    member = _client(personas.member)
    messages = _act(member, APPROVALS, "allow_in_workspace_selected", call.approval.pk)
    assert messages[0][0] == "error" and "Only owners" in messages[0][1], messages
    call.approval.refresh_from_db()
    assert call.approval.status == "pending"
    assert not Allowance.objects.exists()
    refused = AuditEvent.objects.get(event_type=522)
    assert (refused.decision, refused.reason, refused.actor_user_id) == (
        "denied",
        "forbidden",
        personas.member.pk,
    )
    # In the thread, a member may.
    messages = _act(member, APPROVALS, "allow_in_thread_selected", call.approval.pk)
    assert messages[0][0] == "success", messages
    assert Allowance.objects.get().thread_id == personas.thread.pk
