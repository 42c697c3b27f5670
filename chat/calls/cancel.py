"""Cancelling a call: a member's stop, a turn cancelled, an answer that ended mid-input.

``tool_call_stop`` stops an open call wherever it runs — its task in this process, or in
another process over the channel layer (``chat.calls.stops``) — and ``tool_call_cancel``
records the end (audited, emitted). A call's own task records it as it unwinds
(``chat.calls.run``), with who asked (``cancel_request_take``).
"""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from audit.types import AuditEventType, Decision
from audit.writer import record
from chat.calls import runtime
from chat.calls.emit import call_emit
from chat.calls.requests import OPEN_STATUSES, task_key
from chat.models import ToolCall, ToolCallStatus
from chat.realtime.events import layer_is_process_local
from chat.realtime.groups import CALL_RUNNERS, call_stop_message

CANCEL_MESSAGES = {
    "cancelled_by_member": "{who} cancelled this call.",
    "turn_cancelled": "{who} stopped the assistant's answer; this call was cancelled.",
    "input_abandoned": "The assistant's answer ended before this call was complete.",
}


def tool_call_cancel(
    *,
    call_id: int,
    actor_user_id: int | None = None,
    reason: str = "cancelled",
    latency_ms: float | None = None,
) -> ToolCall:
    """End an open call as cancelled (audited, emitted): its view gets tool-cancelled.
    A call that has already ended is returned unchanged."""
    with transaction.atomic():
        call = (
            ToolCall.objects.select_related("thread")
            .select_for_update(of=("self",))
            .get(pk=call_id)
        )
        if call.status not in OPEN_STATUSES:
            return call
        who = "Someone"
        if actor_user_id is not None:
            person = get_user_model().objects.filter(pk=actor_user_id).first()
            if person is not None:
                who = person.get_full_name() or person.get_username()
        was = call.status
        call.status = ToolCallStatus.CANCELLED
        call.error = {
            "code": "cancelled",
            "message": CANCEL_MESSAGES.get(reason, "The tool call was cancelled.").format(who=who),
        }
        call.finished_at = timezone.now()
        if latency_ms is not None:
            call.latency_ms = latency_ms
        call.save(update_fields=["status", "error", "finished_at", "latency_ms"])
        record(
            event_type=AuditEventType.TOOL_CALL_CANCELLED,
            decision=Decision.ALLOWED,
            actor_kind="user" if actor_user_id is not None else "system",
            actor_user_id=actor_user_id,
            workspace_id=call.thread.workspace_id,
            thread_id=call.thread_id,
            binding_id=call.binding_id,
            server_id=call.server_id,
            tool_name=call.tool_name,
            action="tool_cancel",
            reason=reason,
            arguments=call.arguments,
            latency_ms=latency_ms,
            extra={"tool_call_id": call.pk, "was": was},
        )
        call_emit(call, reread=True)
    return call


# Who asked to cancel a call running in this process, and why (read as its task unwinds).
_cancel_requests: dict[int, tuple[int | None, str]] = {}


def cancel_request_take(call_id: int) -> tuple[int | None, str]:
    """Who asked to cancel a call that ran in this process, and why (read once, as its
    task unwinds); nobody asked: the task was cancelled as the process stops."""
    return _cancel_requests.pop(call_id, (None, "cancelled"))


async def tool_call_stop(*, call: ToolCall, user_id: int | None, reason: str) -> None:
    """Cancel an open call. A call running in this process is stopped (the SDK sends
    `notifications/cancelled` to its server) and recorded as it unwinds; any other open
    call (streaming, or running in another process) is recorded at once — its late
    result, if any, is then dropped by `tool_call_finish`."""
    if call.status == ToolCallStatus.RUNNING:
        _cancel_requests[call.pk] = (user_id, reason)
        if runtime.cancel(task_key(call.pk)):
            return
        _cancel_requests.pop(call.pk, None)
    await database_sync_to_async(tool_call_cancel)(
        call_id=call.pk, actor_user_id=user_id, reason=reason
    )
    if call.status == ToolCallStatus.RUNNING and not layer_is_process_local():
        # Running in another process (chat.calls.stops): its task is stopped there, which
        # tells the server; the late result, if any, is dropped.
        layer = get_channel_layer()
        await layer.group_send(CALL_RUNNERS, call_stop_message(call.pk))
