"""Attachments of a message as clients render them (name, server, type, "updated")."""

from __future__ import annotations

from typing import Any


def message_resources(message: Any) -> list[dict[str, Any]]:
    """The message's server resources; only people's messages carry them (no query for
    the others). Uses a ``prefetch_related("server_resources__server")`` when present."""
    if message.role != "user" or message.pk is None:
        return []
    rows = message.server_resources.all()
    if "server_resources" not in getattr(message, "_prefetched_objects_cache", {}):
        rows = rows.select_related("server")
    return [
        {
            "id": row.pk,
            "uri": row.uri,
            "name": row.name,
            "mimeType": row.mime_type,
            "server": {"slug": row.server.slug, "name": row.server.name},
            "origin": row.origin,
            "chars": row.text_chars,
            "binarySize": row.binary_size,
            "subscribed": row.subscribed,
            "updatedAt": row.updated_at.isoformat() if row.updated_at else None,
            "updates": row.update_count,
        }
        for row in rows
    ]
