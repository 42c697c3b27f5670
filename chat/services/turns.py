"""State changes of model turns: assistant messages as they stream, partial tool input.

Every function is a keyword-only sync service (called from the agent loop through
``database_sync_to_async``); each stores its change and its thread event in one transaction
(events broadcast on commit, see :func:`chat.realtime.events.emit`). Finished assistant messages and
provider failures are written to the audit log with the model as the actor.

Event shapes added here (see the agent's module docstring for the whole flow):

- ``message`` — the assistant message, upserted by id (``status`` ``streaming`` →
  ``complete`` | ``error``; the final one carries the rendered HTML);
- ``message.delta`` — ``{id, delta}`` coalesced text to append to message ``id``;
- ``toolcall.input-partial`` — ``{id: null, messageId, providerCallId, index, server, tool,
  arguments}`` best-effort arguments of a tool call the model is still streaming (no
  ``ToolCall`` row exists yet: clients key it by ``messageId`` + ``providerCallId`` and drop
  it when a ``toolcall`` with the same ``messageId`` and tool arrives).
"""

from __future__ import annotations

from typing import Any, TypedDict, Unpack

from django.db import transaction
from django.utils import timezone

from audit.models import AuditEvent
from audit.types import AuditEventType, Decision
from audit.writer import record
from chat.models import Message, MessageRole, MessageStatus, Thread
from chat.presenters import serialize_message
from chat.realtime.events import emit
from chat.services.turn_lease import check_fence, check_not_superseded

ASSISTANT_LABEL = "Assistant"


class _Posting(TypedDict, total=False):
    """How a whole assistant message is audited (see :func:`_audit_and_emit`)."""

    # The person whose message started the turn.
    actor_user_id: int | None
    # The audit reason; empty: ``ok``, or ``provider_error`` for a message in error.
    reason: str
    extra: dict[str, Any] | None


def message_create_assistant(
    *,
    thread_id: int,
    text: str = "",
    status: str = MessageStatus.STREAMING,
    supersede_after: int | None = None,
) -> Message:
    """An assistant message that is about to stream (emitted at once, empty).

    ``supersede_after``: the turn's first output, built from user messages up to this id;
    a newer one raises :class:`~chat.turn_lease.Superseded` and nothing is written."""
    with transaction.atomic():
        check_fence()
        check_not_superseded(thread_id=thread_id, seen=supersede_after)
        message = _create(thread_id=thread_id, text=text, status=status)
        Thread.objects.filter(pk=thread_id).update(updated_at=timezone.now())
        emit(thread_id=thread_id, kind="message", payload=serialize_message(message))
    return message


def message_append_text(*, message_id: int, thread_id: int, text: str, delta: str) -> None:
    """Store the text so far (``text``) and emit the newly streamed ``delta``."""
    with transaction.atomic():
        check_fence()
        Message.objects.filter(pk=message_id).update(text=text)
        emit(thread_id=thread_id, kind="message.delta", payload={"id": message_id, "delta": delta})


def tool_call_emit_input_partial(*, thread_id: int, payload: dict[str, Any]) -> None:
    with transaction.atomic():
        check_fence()
        emit(thread_id=thread_id, kind="toolcall.input-partial", payload=payload)


def message_finish_assistant(
    *, message_id: int, text: str, status: str = MessageStatus.COMPLETE, **posting: Unpack[_Posting]
) -> Message:
    """The final text and status of a streamed message; audited as posted by the model."""
    with transaction.atomic():
        check_fence()
        message = Message.objects.select_related("thread").select_for_update().get(pk=message_id)
        message.text = text
        message.status = status
        message.save(update_fields=["text", "status"])
        _audit_and_emit(message, **posting)
    return message


def message_post_notice(
    *, thread_id: int, text: str, status: str = MessageStatus.COMPLETE, **posting: Unpack[_Posting]
) -> Message:
    """A whole assistant message at once: a provider error, the step limit, an empty answer."""
    with transaction.atomic():
        check_fence()
        message = _create(thread_id=thread_id, text=text, status=status)
        Thread.objects.filter(pk=thread_id).update(updated_at=message.created_at)
        message = Message.objects.select_related("thread").get(pk=message.pk)
        _audit_and_emit(message, **posting)
    return message


def _create(*, thread_id: int, text: str, status: str) -> Message:
    return Message.objects.create(
        thread_id=thread_id,
        role=MessageRole.ASSISTANT,
        author_label=ASSISTANT_LABEL,
        text=text,
        status=status,
    )


def _audit_and_emit(
    message: Message,
    *,
    actor_user_id: int | None = None,
    reason: str = "",
    extra: dict[str, Any] | None = None,
) -> None:
    """Audit a finished assistant message as posted by the model, and emit it."""
    failed = message.status == MessageStatus.ERROR
    record(
        event_type=AuditEventType.MESSAGE_POSTED,
        decision=Decision.FAILED if failed else Decision.ALLOWED,
        actor_kind="model",
        actor_user_id=actor_user_id,
        actor_label=ASSISTANT_LABEL,
        workspace_id=message.thread.workspace_id,
        thread_id=message.thread_id,
        action="assistant_message",
        reason=reason or ("provider_error" if failed else "ok"),
        extra={
            "message_id": message.pk,
            "chars": len(message.text),
            **(extra or {}),
        },
    )
    emit(thread_id=message.thread_id, kind="message", payload=serialize_message(message))


def turn_record_cancelled(*, thread_id: int, user_id: int | None) -> None:
    """A member stopped the assistant's answer (its open calls are cancelled as it unwinds,
    each audited on its own)."""
    with transaction.atomic():
        thread = Thread.objects.only("workspace_id").get(pk=thread_id)
        record(
            event_type=AuditEventType.TURN_CANCELLED,
            decision=Decision.ALLOWED,
            actor_kind="user",
            actor_user_id=user_id,
            workspace_id=thread.workspace_id,
            thread_id=thread_id,
            action="turn_cancel",
            reason="cancelled_by_member",
        )


def turn_record_tools_offered(
    *, thread: Thread, user_id: int | None, provider: str, model: str, tools: list[str]
) -> None:
    """One audit row per turn: exactly which tools the model was offered."""
    with transaction.atomic():
        record(
            event_type=AuditEventType.TOOLS_OFFERED_TO_MODEL,
            decision=Decision.ALLOWED,
            actor_kind="model",
            actor_user_id=user_id,
            workspace_id=thread.workspace_id,
            thread_id=thread.pk,
            action="model_tool_list",
            reason="turn",
            extra={"provider": provider, "model": model, "tools": tools},
        )


MODEL_MISSING_LABEL = "Atrium"


def thread_note_model_missing(*, thread_id: int, actor_user_id: int | None) -> Message | None:
    """Once per thread: a note that the workspace has no model (so plain messages get no
    reply) and where an admin sets one. Audited (``MODEL_MISSING_NOTED``); the audit row is
    also how a later call knows the thread was told. ``None`` when it was already told."""
    with transaction.atomic():
        thread = Thread.objects.select_for_update().only("workspace_id").get(pk=thread_id)
        told = AuditEvent.objects.filter(
            workspace_id=thread.workspace_id,
            thread_id=thread_id,
            event_type=int(AuditEventType.MODEL_MISSING_NOTED),
        )
        if told.exists():
            return None
        text = (
            "This workspace has no model, so messages here get no reply from an assistant. "
            "Slash commands and the tool picker work as usual (`/help` lists the commands). "
            "An admin chooses the workspace's model provider and model in "
            f"[Atrium's admin](/admin/chat/workspace/{thread.workspace_id}/change/), or for "
            "every workspace with `ATRIUM_PROVIDER` and `ATRIUM_MODEL`."
        )
        message = Message.objects.create(
            thread_id=thread_id,
            role=MessageRole.SYSTEM,
            author_label=MODEL_MISSING_LABEL,
            text=text,
            status=MessageStatus.COMPLETE,
        )
        record(
            event_type=AuditEventType.MODEL_MISSING_NOTED,
            decision=Decision.ALLOWED,
            actor_kind="system",
            actor_user_id=actor_user_id,
            actor_label=MODEL_MISSING_LABEL,
            workspace_id=thread.workspace_id,
            thread_id=thread_id,
            action="model_missing_note",
            reason="no_model",
            extra={"message_id": message.pk},
        )
        emit(thread_id=thread_id, kind="message", payload=serialize_message(message))
    return message


__all__ = [
    "ASSISTANT_LABEL",
    "thread_note_model_missing",
    "message_append_text",
    "message_create_assistant",
    "tool_call_emit_input_partial",
    "message_finish_assistant",
    "message_post_notice",
    "turn_record_tools_offered",
    "turn_record_cancelled",
]
