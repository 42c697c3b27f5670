"""Signal receivers of attached files: a message's files go when it goes (audited)."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import pre_delete

from ..models import Message
from .attachments import attachments_delete_for_message


def delete_files_of_message(*, instance: Message, **_: Any) -> None:
    """Runs in the deleting transaction: each file's deletion is audited there, and its
    stored content is removed once that commits (unless another file shares it)."""
    attachments_delete_for_message(message_id=instance.pk)


def connect() -> None:
    pre_delete.connect(
        delete_files_of_message, sender=Message, dispatch_uid="chat.media.delete_message_files"
    )
