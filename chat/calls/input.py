"""Before the decision: the row of a call whose arguments a model is still streaming.

Its view mounts at once and receives the partial arguments (``toolcall.input-partial``);
``chat.calls.decide`` then fills the same row in (or finds it cancelled).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from audit.types import AuditEventType, Decision
from audit.writer import record
from chat.calls.emit import call_emit
from chat.models import ToolCall, ToolCallStatus
from chat.realtime.events import emit
from chat.selectors import tool_calls_queryset
from chat.services.turn_lease import check_fence
from mcp_bridge.models import McpServer, UiResource


def tool_call_open_input(
    *,
    thread_id: int,
    server: McpServer,
    tool_name: str,
    message_id: int | None,
    provider_call_id: str,
    user_id: int | None,
    ui_resource: UiResource | None,
    binding_id: int | None,
) -> ToolCall:
    """The row of a call whose arguments a model has started to stream: not decided (and
    not runnable) yet, but its view mounts now and receives the partial arguments."""
    with transaction.atomic():
        check_fence()
        call = ToolCall.objects.create(
            thread_id=thread_id,
            message_id=message_id,
            server=server,
            tool_name=tool_name,
            arguments={},
            status=ToolCallStatus.STREAMING,
            origin="model",
            requested_by_id=user_id,
            provider_call_id=provider_call_id[:200],
            ui_resource=ui_resource,
            # The binding that offered the tool: the view's CSP and permissions from the
            # start (the decision re-reads it, and a disabled binding still runs nothing).
            binding_id=binding_id,
        )
        call = tool_calls_queryset().get(pk=call.pk)
        record(
            event_type=AuditEventType.TOOL_CALL_INPUT_STARTED,
            decision=Decision.PENDING,
            actor_kind="model",
            actor_user_id=user_id,
            workspace_id=call.thread.workspace_id,
            thread_id=thread_id,
            binding_id=binding_id,
            server_id=server.pk,
            tool_name=tool_name,
            action="tool_input",
            reason="streaming",
            extra={"tool_call_id": call.pk, "provider_call_id": provider_call_id[:200]},
        )
        call_emit(call)
    return call


def tool_call_record_input(
    *, call_id: int, thread_id: int, arguments: dict[str, Any], payload: dict[str, Any]
) -> None:
    """Store the best-effort arguments so far (a reload shows them) and emit them."""
    with transaction.atomic():
        check_fence()
        changed = ToolCall.objects.filter(pk=call_id, status=ToolCallStatus.STREAMING).update(
            arguments=arguments
        )
        if changed:
            emit(thread_id=thread_id, kind="toolcall.input-partial", payload=payload)
