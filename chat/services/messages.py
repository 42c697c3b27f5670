"""Deleting a message (issue 26): its author, or an owner of its workspace, removes a
person's message for everyone; its files go with it. Audited in the same transaction
(``MESSAGE_DELETED``, plus ``ATTACHMENT_DELETED`` per file), broadcast on commit as a
``message.deleted`` event. See docs/files.md "Deleting a message"."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from audit.models import AuditEvent
from audit.types import AuditEventType, Decision
from audit.writer import record
from chat.media.attachments import attachments_delete_for_message
from chat.media.models import MediaAsset
from chat.models import Membership, Message, MessageRole, Role, Thread, ThreadEvent, ToolCall
from chat.realtime.events import emit
from chat.services.workspaces import ChatError

# Stored events that carry a message's text or its files' names: once it is deleted they
# are rewritten to ``message.deleted`` (a replay from before it must not bring it back).
_EVENTS_OF_A_MESSAGE = ("message", "message.delta")


def message_in_thread(*, thread: Thread, message_id: Any) -> Message:
    """The message ``message_id`` of ``thread`` for deleting, or a ChatError saying why not:
    ``not_in_thread`` (no such message here, including another thread's: nothing tells
    them apart) or ``already_deleted`` (it was deleted from this thread)."""
    if (
        isinstance(message_id, bool)
        or not isinstance(message_id, int)
        or not 0 < message_id < 2**63
    ):
        raise ChatError("invalid_message", "'messageId' must be a message id.")
    message = Message.objects.select_related("thread").filter(pk=message_id, thread=thread).first()
    if message is not None:
        return message
    deleted = AuditEvent.objects.filter(
        event_type=int(AuditEventType.MESSAGE_DELETED),
        thread_id=thread.pk,
        extra__message_id=message_id,
    ).exists()
    if deleted:
        raise ChatError("already_deleted", "This message has already been deleted.")
    raise ChatError("not_in_thread", "There is no such message in this thread.")


def _refusal(*, message: Message, actor: Any) -> ChatError | None:
    """Why ``actor`` may not delete ``message`` (None: they may)."""
    role = (
        Membership.objects.filter(workspace_id=message.thread.workspace_id, user=actor)
        .values_list("role", flat=True)
        .first()
    )
    if role is None:
        return ChatError("forbidden", "You are not a member of this workspace.")
    if role == Role.VIEWER:
        return ChatError("viewer", "Viewers can read this thread but not delete messages.")
    if message.role != MessageRole.USER or message.author_id is None:
        return ChatError(
            "not_deletable", "Only messages people wrote can be deleted, not the assistant's."
        )
    if message.author_id != actor.pk and role != Role.OWNER:
        return ChatError(
            "not_yours", "You can delete only your own messages (owners can delete any)."
        )
    if ToolCall.objects.filter(message_id=message.pk).exists():
        return ChatError(
            "has_tool_calls",
            "This message started a tool call; it stays with the call's record.",
        )
    return None


def message_delete(*, message: Message, actor: Any) -> int:
    """Delete a person's message for everyone, with its files; returns how many files went.

    Allowed for its author (an owner or member) and for the workspace's owners. Refused
    (ChatError): viewers, someone else's message for a member, the assistant's and tool
    messages, and a message that started a tool call (the call's card, approval and app view
    belong to it). Audited in the same transaction (111: who, which message, its author, how
    many files — never the text; 705 per file, naming the actor); the members' pages remove
    it on commit (``message.deleted`` ``{id}``); stored events that carried its text or its
    files are rewritten to that event, so a replay or a reload no longer has it."""
    with transaction.atomic():
        # The row lock: of two people deleting it at once, the second is told it is gone.
        locked = (
            Message.objects.select_for_update(of=("self",))
            .select_related("thread")
            .filter(pk=message.pk)
            .first()
        )
        if locked is None:
            raise ChatError("already_deleted", "This message has already been deleted.")
        refusal = _refusal(message=locked, actor=actor)
        if refusal is not None:
            raise refusal
        thread = locked.thread
        asset_ids = list(
            MediaAsset.objects.filter(message_id=locked.pk).values_list("pk", flat=True)
        )
        files = attachments_delete_for_message(message_id=locked.pk, actor=actor)
        Message.objects.filter(pk=locked.pk).delete()  # the pre_delete receiver finds no file
        gone = {"id": locked.pk}
        ThreadEvent.objects.filter(
            thread_id=thread.pk, kind__in=_EVENTS_OF_A_MESSAGE, payload__id=locked.pk
        ).update(kind="message.deleted", payload=gone)
        if asset_ids:
            ThreadEvent.objects.filter(
                thread_id=thread.pk, kind="media", payload__id__in=asset_ids
            ).update(kind="message.deleted", payload=gone)
        record(
            event_type=AuditEventType.MESSAGE_DELETED,
            decision=Decision.ALLOWED,
            actor_kind="user",
            actor_user_id=actor.pk,
            workspace_id=thread.workspace_id,
            thread_id=thread.pk,
            action="message.delete",
            extra={
                "message_id": locked.pk,
                "author_id": locked.author_id,
                "own": locked.author_id == actor.pk,
                "files": files,
                "created_at": locked.created_at.isoformat(),
            },
        )
        emit(thread_id=thread.pk, kind="message.deleted", payload=gone)
    return files
