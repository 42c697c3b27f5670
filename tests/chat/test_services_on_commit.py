"""Services write their audit row in the same transaction and broadcast only on commit.

Each test runs a service with its on-commit callbacks held back
(``django_capture_on_commit_callbacks(execute=False)``), then proves the order on a
listener of the thread's channel-layer group: a marker sent after the service returned
arrives first (nothing was broadcast before commit), and the service's event arrives once
the callbacks run (the commit).
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.utils import timezone

from audit.models import AuditEvent
from audit.types import AuditEventType
from bindings.models import ApprovalRequest, ApprovalStatus, ToolPolicy
from bindings.policy import ActionKind
from bindings.services.approvals import approval_create, approval_expire_due
from bindings.services.bindings import binding_create
from bindings.services.policies import tool_policy_remove, tool_policy_set
from chat.calls.finish import tool_call_reject
from chat.models import Message, ToolCall, ToolCallStatus
from chat.realtime.groups import thread_group
from chat.services import app_views
from chat.services.workspaces import thread_allowances_announce
from mcp_bridge.models import McpServer
from mcp_bridge.services.servers import server_add, server_remove, server_save

ROOT = Path(__file__).resolve().parents[2]
MARKER = {"type": "test.marker"}


@pytest.fixture
def in_memory_layer(settings):
    """The order proof reads one channel from several sync calls: the in-memory layer
    serves that on either profile (what is tested is when the service broadcasts)."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    return get_channel_layer()


class Listener:
    def __init__(self, layer, thread_id: int) -> None:
        self.layer = layer
        self.group = thread_group(thread_id)
        self.channel = async_to_sync(layer.new_channel)()
        async_to_sync(layer.group_add)(self.group, self.channel)

    def mark(self) -> None:
        async_to_sync(self.layer.group_send)(self.group, MARKER)

    def next(self) -> dict:
        async def receive() -> dict:
            return await asyncio.wait_for(self.layer.receive(self.channel), timeout=10)

        return async_to_sync(receive)()


def assert_broadcast_on_commit(listener: Listener, callbacks, *, kind: str) -> dict:
    """Nothing reached the group before the commit; the event does after it."""
    listener.mark()
    assert listener.next() == MARKER, "an event was broadcast before the commit"
    assert callbacks, "the service registered nothing to run on commit"
    for callback in callbacks:
        callback()
    message = listener.next()
    assert message["type"] == "thread.event" and message["kind"] == kind
    return message


@pytest.fixture
def bound(personas):
    server = server_add(
        name="Board",
        slug="board",
        transport="stdio",
        command=sys.executable,
        args=[str(ROOT / "examples" / "board" / "server.py")],
    )
    binding = binding_create(server=server, workspace=personas.workspace)
    return server, binding


def _waiting_call(personas, server, binding) -> tuple[ToolCall, ApprovalRequest]:
    call = ToolCall.objects.create(
        thread=personas.thread,
        server=server,
        binding=binding,
        tool_name="delete_item",
        arguments={"id": 1},
        status=ToolCallStatus.AWAITING_APPROVAL,
        origin="model",
        requested_by=personas.member,
    )
    approval = approval_create(
        thread=personas.thread,
        binding=binding,
        tool_call=call,
        server_id=server.pk,
        tool_name="delete_item",
        arguments={"id": 1},
        risk="destructive",
        requested_by_kind="model",
        requested_by=personas.member,
    )
    return call, approval


def test_tool_call_reject_broadcasts_on_commit(
    personas, bound, in_memory_layer, django_capture_on_commit_callbacks
):
    call, _ = _waiting_call(personas, *bound)
    listener = Listener(in_memory_layer, personas.thread.pk)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        rejected = tool_call_reject(call_id=call.pk, code="approval_rejected", message="No.")
    assert rejected is not None and rejected.status == ToolCallStatus.REJECTED
    message = assert_broadcast_on_commit(listener, callbacks, kind="toolcall")
    assert message["call"] == {"id": call.pk, "status": "rejected"}
    # A call that no longer waits is left as it is, and nothing is broadcast.
    with django_capture_on_commit_callbacks(execute=False) as again:
        assert tool_call_reject(call_id=call.pk, code="x", message="y") is None
    assert again == []


def test_expiring_an_approval_audits_it_and_rejects_its_call_on_commit(
    personas, bound, in_memory_layer, django_capture_on_commit_callbacks
):
    call, approval = _waiting_call(personas, *bound)
    ApprovalRequest.objects.filter(pk=approval.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    listener = Listener(in_memory_layer, personas.thread.pk)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        expired = approval_expire_due(thread_id=personas.thread.pk)
    assert [a.pk for a in expired] == [approval.pk]
    assert ApprovalRequest.objects.get(pk=approval.pk).status == ApprovalStatus.EXPIRED
    assert AuditEvent.objects.filter(event_type=AuditEventType.APPROVAL_EXPIRED).count() == 1
    call.refresh_from_db()
    assert call.status == ToolCallStatus.REJECTED
    assert call.error["code"] == "approval_expired"
    message = assert_broadcast_on_commit(listener, callbacks, kind="toolcall")
    assert message["call"] == {"id": call.pk, "status": "rejected"}


def test_allowances_announce_broadcasts_on_commit(
    personas, in_memory_layer, django_capture_on_commit_callbacks
):
    listener = Listener(in_memory_layer, personas.thread.pk)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        thread_allowances_announce(workspace_id=personas.workspace.pk, thread_id=None)
    assert_broadcast_on_commit(listener, callbacks, kind="allowances")


def test_app_view_message_is_audited_and_broadcast_on_commit(
    personas, bound, in_memory_layer, django_capture_on_commit_callbacks
):
    server, binding = bound
    view = ToolCall.objects.create(
        thread=personas.thread,
        server=server,
        binding=binding,
        tool_name="show_board",
        status=ToolCallStatus.SUCCESS,
        origin="user",
        requested_by=personas.member,
    )
    view = ToolCall.objects.select_related("server").get(pk=view.pk)
    before = AuditEvent.objects.count()
    listener = Listener(in_memory_layer, personas.thread.pk)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        auth, message = app_views.app_view_message_post(
            view=view,
            user=personas.member,
            role="member",
            thread=personas.thread,
            text="Hello from the board",
            kind=ActionKind.UI_MESSAGE,
        )
    assert auth.allowed and message is not None
    assert Message.objects.filter(pk=message.pk, via_tool_call=view).exists()
    assert AuditEvent.objects.count() == before + 1  # the decision, with the write
    assert_broadcast_on_commit(listener, callbacks, kind="message")


def test_tool_policy_remove_is_audited_with_its_change(personas, bound):
    _, binding = bound
    tool_policy_set(binding=binding, tool_name="delete_item", approval="auto")
    assert tool_policy_remove(
        binding=binding, tool_name="delete_item", actor=personas.owner, actor_label="admin"
    )
    assert not ToolPolicy.objects.filter(binding=binding).exists()
    removed = AuditEvent.objects.filter(event_type=AuditEventType.POLICY_CHANGED).latest("pk")
    assert removed.reason == "policy_removed" and removed.actor_user_id == personas.owner.pk
    # Nothing to remove: nothing written, nothing audited.
    count = AuditEvent.objects.count()
    assert not tool_policy_remove(binding=binding, tool_name="delete_item")
    assert AuditEvent.objects.count() == count


def test_server_save_and_remove_audit_in_the_same_transaction(personas):
    server = McpServer(name="Files", slug="files", transport="stdio", command="files-server")
    server_save(server=server, actor=personas.owner, actor_label="admin")
    added = AuditEvent.objects.get(event_type=AuditEventType.SERVER_ADDED)
    assert added.server_id == server.pk and added.extra["via"] == "admin"
    server.call_timeout = 5.0
    server_save(server=server, actor=personas.owner, actor_label="admin")
    changed = AuditEvent.objects.get(event_type=AuditEventType.SERVER_CHANGED)
    assert changed.extra["changed"] == ["call_timeout"]
    # Saving again with no change writes no row.
    server_save(server=server, actor=personas.owner, actor_label="admin")
    assert AuditEvent.objects.filter(event_type=AuditEventType.SERVER_CHANGED).count() == 1
    pk = server.pk
    server_remove(server=server, actor=personas.owner, actor_label="admin")
    assert not McpServer.objects.filter(pk=pk).exists()
    removed = AuditEvent.objects.get(event_type=AuditEventType.SERVER_REMOVED)
    assert removed.server_id == pk and removed.extra["slug"] == "files"
