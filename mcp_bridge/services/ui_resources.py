"""State changes of UI resources: the versions of an app view's document, by content hash."""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

from django.db import transaction

from audit.types import AuditEventType, Decision
from audit.writer import record

from ..errors import InvalidResource
from ..models import McpServer, UiResource
from ..uimeta import normalize_mime, parse_resource_ui, ui_flavor

MAX_UI_DOCUMENT_BYTES = 5 * 1024 * 1024


def document_hash(text: str) -> str:
    """The same key the normalizer gives embedded documents: sha256 of the UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def ui_resource_store(
    *,
    server: McpServer,
    uri: str,
    read_result: dict[str, Any],
    listing_meta: dict[str, Any] | None = None,
) -> UiResource:
    """Validate a `resources/read` answer and keep it as a version keyed by content hash."""
    contents = read_result.get("contents") if isinstance(read_result, dict) else None
    if not isinstance(contents, list) or not contents:
        raise InvalidResource(uri, user_message=f"The server returned no content for {uri}.")
    item = next((c for c in contents if isinstance(c, dict) and c.get("uri") == uri), contents[0])
    if not isinstance(item, dict):
        raise InvalidResource(uri, user_message=f"The content for {uri} is malformed.")
    mime = normalize_mime(item.get("mimeType"), default="")
    text = item.get("text")
    if text is None and isinstance(item.get("blob"), str):
        try:
            text = base64.b64decode(item["blob"], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise InvalidResource(
                uri, user_message=f"The UI resource {uri} is not valid base64 UTF-8."
            ) from exc
    if not isinstance(text, str):
        raise InvalidResource(uri, user_message=f"The UI resource {uri} has no HTML text.")
    size = len(text.encode())
    if size > MAX_UI_DOCUMENT_BYTES:
        raise InvalidResource(uri, user_message=f"The UI resource {uri} is larger than 5 MB.")
    flavor = ui_flavor(mime, text)
    if flavor is None:
        raise InvalidResource(
            uri,
            user_message=(
                f"The UI resource {uri} has mime type '{mime or 'none'}', not an HTML app type."
            ),
        )
    meta = parse_resource_ui(item.get("_meta"), listing_meta).to_dict()
    with transaction.atomic():
        resource, created = _ui_resource_keep(
            server=server, uri=uri, mime_type=mime, flavor=flavor, text=text, meta=meta
        )
        if created:
            record(
                event_type=AuditEventType.UI_RESOURCE_FETCHED,
                decision=Decision.ALLOWED,
                server_id=server.pk,
                extra={
                    "uri": uri,
                    "hash": resource.content_hash,
                    "flavor": flavor,
                    "size": resource.size,
                    "csp": meta.get("csp"),
                    "problems": meta.get("problems", []),
                },
            )
    return resource


def ui_resource_store_document(
    *, server: McpServer, uri: str, mime_type: str, text: str, meta: dict[str, Any] | None
) -> UiResource:
    """Keep a UI document that arrived embedded in a tool result (legacy MCP-UI forms)."""
    flavor = ui_flavor(mime_type, text) or "html"
    resource, _ = _ui_resource_keep(
        server=server, uri=uri, mime_type=mime_type, flavor=flavor, text=text, meta=meta or {}
    )
    return resource


def _ui_resource_keep(
    *, server: McpServer, uri: str, mime_type: str, flavor: str, text: str, meta: dict[str, Any]
) -> tuple[UiResource, bool]:
    """The version of ``uri`` with this text (by content hash), stored when new."""
    return UiResource.objects.get_or_create(
        server=server,
        uri=uri,
        content_hash=document_hash(text),
        defaults={
            "mime_type": mime_type,
            "flavor": flavor,
            "text": text,
            "meta": meta,
            "size": len(text.encode()),
        },
    )
