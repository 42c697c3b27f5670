"""State changes of server context in a thread: a prompt posted, resources attached, an
attached copy refreshed. Each writes its audit row in its transaction and emits the
messages on commit (``chat.realtime.events.emit``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from audit.types import AuditEventType, Decision
from audit.writer import record
from mcp_bridge.models import McpServer

from ..models import Membership, Message, MessageRole, Thread
from ..presenters import serialize_message
from ..realtime.events import emit
from ..services import ChatError, message_create_for_member
from .content import MAX_PROMPT_TEXT, PromptItem, ResourceCopy
from .models import MessageResource, ResourceOrigin

MAX_ATTACHMENTS = 5  # per message


def _require_member(thread: Thread, user: Any) -> None:
    membership = Membership.objects.filter(workspace_id=thread.workspace_id, user=user).first()
    if membership is None or not membership.can_act:
        raise ChatError("forbidden", "Viewers can read this thread but not post in it.")


def _add_resources(
    message: Message,
    server: McpServer,
    copies: Sequence[ResourceCopy],
    origin: str,
    subscribed: Sequence[bool] = (),
) -> list[MessageResource]:
    rows = [
        MessageResource(
            message=message,
            thread_id=message.thread_id,
            server=server,
            origin=origin,
            uri=copy.uri,
            name=copy.name,
            mime_type=copy.mime_type,
            text=copy.text,
            text_chars=copy.text_chars,
            binary_size=copy.binary_size,
            subscribed=bool(subscribed[i]) if i < len(subscribed) else False,
        )
        for i, copy in enumerate(copies)
    ]
    return MessageResource.objects.bulk_create(rows)


def prompt_messages_post(
    *,
    thread: Thread,
    author: Any,
    server: McpServer,
    prompt_name: str,
    argument_names: Sequence[str],
    items: Sequence[PromptItem],
) -> list[Message]:
    """Post a prompt's messages as the member's own, each labelled with the prompt; its
    embedded resources become the messages' attachments. Audited as ``PROMPT_USED``
    (argument names only: their values are in the posted text when the server put them
    there)."""
    _require_member(thread, author)
    if not items:
        raise ChatError("empty_prompt", "The prompt returned no messages.")
    label = f"prompt {server.slug}.{prompt_name}"[:200]
    with transaction.atomic():
        posted: list[Message] = []
        for item in items:
            text = item.text or "(resources from the prompt)"
            if item.role == "assistant":
                text = "(as the assistant's part of the prompt) " + text
            message = Message.objects.create(
                thread=thread,
                role=MessageRole.USER,
                author=author,
                author_label=label,
                text=text[:MAX_PROMPT_TEXT],
            )
            _add_resources(message, server, item.resources, ResourceOrigin.PROMPT)
            posted.append(message)
        Thread.objects.filter(pk=thread.pk).update(updated_at=posted[-1].created_at)
        record(
            event_type=AuditEventType.PROMPT_USED,
            decision=Decision.ALLOWED,
            actor_kind="user",
            actor_user_id=author.pk,
            workspace_id=thread.workspace_id,
            thread_id=thread.pk,
            server_id=server.pk,
            extra={
                "prompt": prompt_name[:200],
                "arguments": [str(n)[:100] for n in argument_names][:50],
                "message_ids": [m.pk for m in posted],
                "resources": sum(len(i.resources) for i in items),
            },
        )
        for message in posted:
            emit(thread_id=thread.pk, kind="message", payload=serialize_message(message))
    return posted


def message_resources_post(
    *,
    thread: Thread,
    author: Any,
    text: str,
    attachments: Sequence[tuple[McpServer, ResourceCopy, bool]],
    attachment_ids: Sequence[Any] = (),
) -> Message:
    """A member's message with server resources attached (``(server, copy, subscribed)``)
    and the files they uploaded for it (``attachment_ids``, as ``message_post`` claims them).
    Audited as ``MESSAGE_POSTED`` and one ``RESOURCE_ATTACHED`` per resource."""
    _require_member(thread, author)
    if not attachments:
        raise ChatError("no_resources", "Choose a resource to attach.")
    if len(attachments) > MAX_ATTACHMENTS:
        raise ChatError("too_many_resources", f"Attach at most {MAX_ATTACHMENTS} resources.")
    text = (text or "").strip()[:MAX_PROMPT_TEXT] or "Attached " + ", ".join(
        copy.name for _, copy, _ in attachments
    )
    with transaction.atomic():
        message = message_create_for_member(
            thread=thread, author=author, text=text[:MAX_PROMPT_TEXT], attachment_ids=attachment_ids
        )
        for server, copy, subscribed in attachments:
            _add_resources(message, server, [copy], ResourceOrigin.ATTACHED, [subscribed])
            record(
                event_type=AuditEventType.RESOURCE_ATTACHED,
                decision=Decision.ALLOWED,
                actor_kind="user",
                actor_user_id=author.pk,
                workspace_id=thread.workspace_id,
                thread_id=thread.pk,
                server_id=server.pk,
                extra={
                    "message_id": message.pk,
                    "uri": copy.uri[:500],
                    "mime_type": copy.mime_type,
                    "chars": copy.text_chars,
                    "subscribed": subscribed,
                },
            )
        emit(thread_id=thread.pk, kind="message", payload=serialize_message(message))
    return message


def message_resources_refresh(*, server_id: int, uri: str, copy: ResourceCopy) -> list[int]:
    """A subscribed resource changed on its server: every attached copy of it takes the new
    content and its message is sent again (it shows "updated"). Not audited: the server's
    content changed, nobody decided anything (docs/mcp-client.md). Returns message ids."""
    with transaction.atomic():
        rows = list(
            MessageResource.objects.select_for_update()
            .filter(server_id=server_id, uri=uri, subscribed=True)
            .only("pk", "message_id", "thread_id")
        )
        if not rows:
            return []
        MessageResource.objects.filter(pk__in=[r.pk for r in rows]).update(
            text=copy.text,
            text_chars=copy.text_chars,
            binary_size=copy.binary_size,
            updated_at=timezone.now(),
            update_count=F("update_count") + 1,
        )
        message_ids = sorted({r.message_id for r in rows})
        for message in Message.objects.filter(pk__in=message_ids).select_related("author"):
            emit(thread_id=message.thread_id, kind="message", payload=serialize_message(message))
    return message_ids


def subscribed_uris(*, server_id: int) -> set[str]:
    return set(
        MessageResource.objects.filter(server_id=server_id, subscribed=True).values_list(
            "uri", flat=True
        )
    )
