"""Every state change of chat: typed, keyword-only, audited in the same transaction."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from audit.types import AuditEventType, Decision
from audit.writer import record
from chat.models import Membership, Message, MessageRole, MessageStatus, Role, Thread, Workspace
from chat.presenters import serialize_message
from chat.selectors import thread_allowances
from chat.thread_events import emit

MAX_MESSAGE_CHARS = 20_000


class ChatError(Exception):
    """A refused chat action, with a message meant for the person who tried it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


def workspace_create(*, name: str, owner: Any, slug: str = "") -> Workspace:
    with transaction.atomic():
        workspace = Workspace.objects.create(name=name, slug=slug)
        Membership.objects.create(workspace=workspace, user=owner, role=Role.OWNER)
        record(
            event_type=AuditEventType.WORKSPACE_CREATED,
            decision=Decision.ALLOWED,
            actor_kind="user",
            actor_user_id=owner.pk,
            workspace_id=workspace.pk,
            extra={"name": name},
        )
    return workspace


def membership_set(*, workspace: Workspace, user: Any, role: str, actor: Any = None) -> Membership:
    if role not in Role.values:
        raise ChatError("invalid_role", f"Unknown role '{role}'.")
    with transaction.atomic():
        membership, _ = Membership.objects.update_or_create(
            workspace=workspace, user=user, defaults={"role": role}
        )
        record(
            event_type=AuditEventType.MEMBERSHIP_CHANGED,
            decision=Decision.ALLOWED,
            actor_kind="user" if actor else "system",
            actor_user_id=getattr(actor, "pk", None),
            workspace_id=workspace.pk,
            extra={"user_id": user.pk, "role": role},
        )
    return membership


def thread_create(*, workspace: Workspace, title: str, actor: Any) -> Thread:
    title = (title or "").strip()[:200] or "New thread"
    membership = Membership.objects.filter(workspace=workspace, user=actor).first()
    if membership is None or not membership.can_act:
        raise ChatError("forbidden", "Only owners and members can start threads.")
    with transaction.atomic():
        thread = Thread.objects.create(workspace=workspace, title=title, created_by=actor)
        record(
            event_type=AuditEventType.THREAD_CREATED,
            decision=Decision.ALLOWED,
            actor_kind="user",
            actor_user_id=actor.pk,
            workspace_id=workspace.pk,
            thread_id=thread.pk,
            extra={"title": title},
        )
    return thread


def message_post(*, thread: Thread, author: Any, text: str) -> Message:
    text = (text or "").strip()
    if not text:
        raise ChatError("empty_message", "A message needs some text.")
    if len(text) > MAX_MESSAGE_CHARS:
        raise ChatError(
            "message_too_long", f"Messages are limited to {MAX_MESSAGE_CHARS:,} characters."
        )
    membership = Membership.objects.filter(workspace_id=thread.workspace_id, user=author).first()
    if membership is None or not membership.can_act:
        raise ChatError("forbidden", "Viewers can read this thread but not post in it.")
    with transaction.atomic():
        message = Message.objects.create(
            thread=thread, role=MessageRole.USER, author=author, text=text
        )
        Thread.objects.filter(pk=thread.pk).update(updated_at=message.created_at)
        record(
            event_type=AuditEventType.MESSAGE_POSTED,
            decision=Decision.ALLOWED,
            actor_kind="user",
            actor_user_id=author.pk,
            workspace_id=thread.workspace_id,
            thread_id=thread.pk,
            extra={"message_id": message.pk, "chars": len(text)},
        )
        emit(thread_id=thread.pk, kind="message", payload=serialize_message(message))
    return message


def message_post_system(
    *, thread: Thread, text: str, author_label: str = "Atrium", role: str = MessageRole.ASSISTANT
) -> Message:
    """A message from Atrium itself (command help, notices)."""
    with transaction.atomic():
        message = Message.objects.create(
            thread=thread,
            role=role,
            author_label=author_label,
            text=text,
            status=MessageStatus.COMPLETE,
        )
        emit(thread_id=thread.pk, kind="message", payload=serialize_message(message))
    return message


def thread_allowances_announce(*, workspace_id: int, thread_id: int | None) -> None:
    """Tell the members of a thread (``None``: of every thread of the workspace) its current
    allowances: an ``allowances`` event, stored like every event so a reconnecting client
    catches up, broadcast on commit."""
    if thread_id is not None:
        thread_ids = [thread_id]
    else:
        thread_ids = list(
            Thread.objects.filter(workspace_id=workspace_id).values_list("pk", flat=True)
        )
    with transaction.atomic():
        for pk in thread_ids:
            thread = Thread(pk=pk, workspace_id=workspace_id)
            emit(
                thread_id=pk,
                kind="allowances",
                payload={"allowances": thread_allowances(thread=thread)},
            )
