"""Media assets as clients render them: the ``asset`` object of a result part, and a
message's attached files (``serialize_message``'s ``attachments``). Imports no presenter
of chat, so ``chat.presenters`` may import it."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.urls import reverse

from mcp_bridge.normalize.limits import human_size

from .models import MediaAsset, MediaStatus


def asset_descriptor(asset: MediaAsset) -> dict[str, Any]:
    """The ``asset`` object of a stored result part (and the body of a ``media`` event)."""
    ready = asset.status == MediaStatus.READY

    def url(name: str, present: bool) -> str | None:
        return reverse(name, kwargs={"asset_id": asset.pk}) if ready and present else None

    return {
        "id": asset.pk,
        "status": asset.status,
        "url": url("media-asset", bool(asset.storage_path)),
        "thumbnailUrl": url("media-thumbnail", bool(asset.thumbnail_path)),
        "posterUrl": url("media-poster", bool(asset.poster_path)),
        "width": asset.width,
        "height": asset.height,
        "duration": asset.duration,
        "size": asset.size,
        "reason": asset.reason or None,
    }


def attachment_part(asset: MediaAsset) -> dict[str, Any]:
    """One attached file in the shape of a result's media part (static/chat/render/parts.js
    renders both), plus a download URL (``?download=1``: always ``attachment``)."""
    descriptor = asset_descriptor(asset)
    if descriptor["url"]:
        descriptor["downloadUrl"] = descriptor["url"] + "?download=1"
    link = descriptor.get("downloadUrl")
    size = human_size(asset.size)
    return {
        # What a text client shows (no interactive UI): the name, type, size and link.
        "text": f"[file: {asset.filename} ({asset.mime_type}, {size})"
        + (f" {settings.ATRIUM_APP_ORIGIN}{link}]" if link else f", {asset.status}]"),
        "type": "image" if asset.kind == "image" else "file",
        "mediaKind": asset.kind,
        "mimeType": asset.mime_type,
        "filename": asset.filename,
        "size": asset.size,
        "pages": asset.pages,
        "asset": descriptor,
    }


def message_attachments(message: Any) -> list[dict[str, Any]]:
    """A person's message's files, in upload order; no query for other messages, and
    none with a ``prefetch_related("attachments")``."""
    if message.role != "user" or message.pk is None:
        return []
    return [attachment_part(asset) for asset in message.attachments.all()]
