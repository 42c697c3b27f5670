"""Every state change of chat: typed, keyword-only, audited in the same transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction

from audit.types import AuditEventType, Decision
from audit.writer import record
from chat.media.attachments import AttachmentRefused, attachments_claim
from chat.models import Membership, Message, MessageRole, MessageStatus, Role, Thread, Workspace
from chat.presenters import serialize_message
from chat.realtime.events import emit
from chat.realtime.frames import UNSTORABLE_REFUSED
from chat.selectors import thread_allowances
from mcp_bridge.uimeta import unstorable

MAX_MESSAGE_CHARS = 20_000


class ChatError(Exception):
    """A refused chat action, with a message meant for the person who tried it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


def _actor(actor: Any) -> dict[str, Any]:
    """Who made a change, for its audit row: a person, or the system (no actor)."""
    return {
        "actor_kind": "user" if actor else "system",
        "actor_user_id": getattr(actor, "pk", None),
    }


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
    """Add ``user`` to ``workspace`` or change their role (audited; their open sockets are
    re-roled on commit: chat.receivers)."""
    if role not in Role.values:
        raise ChatError("invalid_role", f"Unknown role '{role}'.")
    with transaction.atomic():
        previous = (
            Membership.objects.filter(workspace=workspace, user=user)
            .values_list("role", flat=True)
            .first()
        )
        membership, _ = Membership.objects.update_or_create(
            workspace=workspace, user=user, defaults={"role": role}
        )
        record(
            event_type=AuditEventType.MEMBERSHIP_CHANGED,
            decision=Decision.ALLOWED,
            **_actor(actor),
            workspace_id=workspace.pk,
            extra={"user_id": user.pk, "role": role, "previous_role": previous},
        )
    return membership


def membership_remove(*, membership: Membership, actor: Any = None) -> None:
    """Remove a member from a workspace (audited). On commit their open sockets on the
    workspace's threads end (chat.receivers → ``ThreadConsumer.membership_changed``)."""
    with transaction.atomic():
        record(
            event_type=AuditEventType.MEMBERSHIP_REMOVED,
            decision=Decision.ALLOWED,
            **_actor(actor),
            workspace_id=membership.workspace_id,
            extra={"user_id": membership.user_id, "role": membership.role},
        )
        membership.delete()


# Where a workspace's thread text is sent, and with which key: changing any is audited.
PROVIDER_FIELDS = ("provider", "model", "provider_base_url", "provider_api_key")


def _provider_summary(workspace: Workspace) -> dict[str, Any]:
    """What an audit row may say about a workspace's provider: never the key's value."""
    return {
        "provider": workspace.provider,
        "model": workspace.model,
        "provider_base_url": workspace.provider_base_url,
        "key_set": bool(workspace.provider_api_key),
    }


def workspace_add(*, workspace: Workspace, actor: Any) -> Workspace:
    """Store a workspace built elsewhere (the admin's add form), audited with its provider
    settings (not the key). ``workspace_create`` is the path that also makes an owner."""
    with transaction.atomic():
        workspace.save()
        record(
            event_type=AuditEventType.WORKSPACE_CREATED,
            decision=Decision.ALLOWED,
            **_actor(actor),
            workspace_id=workspace.pk,
            extra={"name": workspace.name, **_provider_summary(workspace)},
        )
    return workspace


WORKSPACE_SETTING_FIELDS = ("name", "slug", "system_prompt")


def workspace_settings_set(*, workspace: Workspace, actor: Any, fields: list[str]) -> list[str]:
    """Store the workspace's own settings among ``fields`` (name, slug, system prompt) as
    they are on ``workspace``, audited naming what changed (the name before and after;
    the system prompt's fields, not its text). Returns the changed field names."""
    with transaction.atomic():
        stored = Workspace.objects.select_for_update().get(pk=workspace.pk)
        changed = [
            f
            for f in WORKSPACE_SETTING_FIELDS
            if f in fields and getattr(stored, f) != getattr(workspace, f)
        ]
        if not changed:
            return []
        Workspace.objects.filter(pk=workspace.pk).update(
            **{f: getattr(workspace, f) for f in changed}
        )
        record(
            event_type=AuditEventType.WORKSPACE_CHANGED,
            decision=Decision.ALLOWED,
            **_actor(actor),
            workspace_id=workspace.pk,
            extra={
                "fields": changed,
                "name": [stored.name, workspace.name],
                "slug": [stored.slug, workspace.slug],
            },
        )
    return changed


def workspace_provider_set(
    *,
    workspace: Workspace,
    actor: Any,
    provider: str,
    model: str,
    provider_base_url: str,
    provider_api_key: str,
) -> list[str]:
    """Set where the workspace's threads are sent (provider, model, base URL) and the key
    they are sent with. A change is audited naming the fields that changed, the base URL
    before and after, and whether a key is set: never the key's value. Returns the changed
    field names (nothing changed: no row, no audit)."""
    values = {
        "provider": provider,
        "model": model,
        "provider_base_url": provider_base_url,
        "provider_api_key": provider_api_key,
    }
    with transaction.atomic():
        stored = Workspace.objects.select_for_update().get(pk=workspace.pk)
        changed = [f for f in PROVIDER_FIELDS if getattr(stored, f) != values[f]]
        for name, value in values.items():
            setattr(workspace, name, value)
        if not changed:
            return []
        Workspace.objects.filter(pk=workspace.pk).update(**{f: values[f] for f in changed})
        record(
            event_type=AuditEventType.WORKSPACE_PROVIDER_CHANGED,
            decision=Decision.ALLOWED,
            **_actor(actor),
            workspace_id=workspace.pk,
            extra={
                "fields": changed,
                "previous_base_url": stored.provider_base_url,
                **_provider_summary(workspace),
            },
        )
    return changed


def workspace_delete(*, workspace: Workspace, actor: Any) -> None:
    """Delete a workspace with its threads and memberships (audited in the same
    transaction; its bindings go too: chat.receivers, and its members' sockets end)."""
    with transaction.atomic():
        record(
            event_type=AuditEventType.WORKSPACE_DELETED,
            decision=Decision.ALLOWED,
            **_actor(actor),
            workspace_id=workspace.pk,
            extra={
                "name": workspace.name,
                "slug": workspace.slug,
                "threads": Thread.objects.filter(workspace_id=workspace.pk).count(),
                "members": Membership.objects.filter(workspace_id=workspace.pk).count(),
            },
        )
        workspace.delete()


def thread_delete(*, thread: Thread, actor: Any) -> None:
    """Delete a thread with its messages, calls and events (audited in the same
    transaction; its own bindings go too: chat.receivers)."""
    with transaction.atomic():
        record(
            event_type=AuditEventType.THREAD_DELETED,
            decision=Decision.ALLOWED,
            **_actor(actor),
            workspace_id=thread.workspace_id,
            thread_id=thread.pk,
            extra={
                "title": thread.title,
                "messages": Message.objects.filter(thread_id=thread.pk).count(),
                "last_seq": thread.last_seq,
            },
        )
        thread.delete()


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


def message_post(
    *, thread: Thread, author: Any, text: str, attachment_ids: Sequence[Any] = ()
) -> Message:
    text = (text or "").strip()
    if not text and not attachment_ids:
        raise ChatError("empty_message", "A message needs some text.")
    if len(text) > MAX_MESSAGE_CHARS:
        raise ChatError(
            "message_too_long", f"Messages are limited to {MAX_MESSAGE_CHARS:,} characters."
        )
    if unstorable(text):  # a socket refuses such frames; the text channel reaches here
        raise ChatError("invalid_text", UNSTORABLE_REFUSED)
    with transaction.atomic():
        message = message_create_for_member(
            thread=thread, author=author, text=text, attachment_ids=attachment_ids
        )
        emit(thread_id=thread.pk, kind="message", payload=serialize_message(message))
    return message


def message_create_for_member(
    *, thread: Thread, author: Any, text: str, attachment_ids: Sequence[Any] = ()
) -> Message:
    """A member's message and the files they uploaded for it, audited (``MESSAGE_POSTED``),
    inside the caller's transaction; the caller adds to it and emits it. Viewers and
    non-members are refused."""
    membership = Membership.objects.filter(workspace_id=thread.workspace_id, user=author).first()
    if membership is None or not membership.can_act:
        raise ChatError("forbidden", "Viewers can read this thread but not post in it.")
    message = Message.objects.create(thread=thread, role=MessageRole.USER, author=author, text=text)
    try:  # files the member uploaded for it (chat.media.attachments, issue 26)
        files = attachments_claim(message=message, actor=author, ids=attachment_ids)
    except AttachmentRefused as exc:
        raise ChatError(exc.code, exc.message) from exc
    Thread.objects.filter(pk=thread.pk).update(updated_at=message.created_at)
    record(
        event_type=AuditEventType.MESSAGE_POSTED,
        decision=Decision.ALLOWED,
        actor_kind="user",
        actor_user_id=author.pk,
        workspace_id=thread.workspace_id,
        thread_id=thread.pk,
        extra={"message_id": message.pk, "chars": len(text), "files": len(files)},
    )
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
