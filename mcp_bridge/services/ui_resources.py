"""State changes of UI resources: the versions of an app view's document, by content hash."""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction

from audit.types import AuditEventType, Decision
from audit.writer import record

from ..errors import InvalidResource
from ..models import McpServer, UiResource
from ..uimeta import normalize_mime, parse_resource_ui, ui_flavor

# The largest app document Atrium accepts: real single-file apps reach several MB (an
# offline FastMCP Prefab renderer is ~7 MB). Larger ones are refused, and the refusal is
# shown in the view's row and to the admin (a ``too_large`` version of the resource).
MAX_UI_DOCUMENT_BYTES = 16 * 1024 * 1024
# Documents up to this size also stay in the row (``text``); every document is in storage
# once, by content hash (``ui_document_name``), and served from there in chunks.
INLINE_UI_DOCUMENT_BYTES = 512 * 1024
TOO_LARGE = "too_large"
MB = 1024 * 1024


def ui_document_name(content_hash: str) -> str:
    """Where a document is kept in the default storage: one file per content hash."""
    return f"ui-documents/{content_hash[:2]}/{content_hash}.html"


def too_large_message(size: int) -> str:
    """What the person and the admin read about a document over the limit."""
    return (
        f"This app's page is larger than Atrium accepts "
        f"({size / MB:.1f} MB > {MAX_UI_DOCUMENT_BYTES // MB} MB)."
    )


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
    data = text.encode()
    if len(data) > MAX_UI_DOCUMENT_BYTES:
        return _too_large(server=server, uri=uri, mime_type=mime, data=data)
    del data
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


def _too_large(*, server: McpServer, uri: str, mime_type: str, data: bytes) -> UiResource:
    """A document over ``MAX_UI_DOCUMENT_BYTES``: kept as a ``too_large`` version without
    its text (so its call's row says why there is no view, and the admin lists it), and
    audited once per version."""
    size = len(data)
    content_hash = hashlib.sha256(data).hexdigest()
    message = too_large_message(size)
    with transaction.atomic():
        resource, created = UiResource.objects.get_or_create(
            server=server,
            uri=uri,
            content_hash=content_hash,
            defaults={
                "mime_type": mime_type,
                "flavor": TOO_LARGE,
                "text": "",
                "meta": {"refused": {"reason": TOO_LARGE, "message": message}},
                "size": min(size, 2**31 - 1),
            },
        )
        if created:
            record(
                event_type=AuditEventType.UI_DOCUMENT_REFUSED,
                decision=Decision.DENIED,
                server_id=server.pk,
                reason=TOO_LARGE,
                extra={
                    "uri": uri,
                    "hash": content_hash,
                    "size": size,
                    "limit": MAX_UI_DOCUMENT_BYTES,
                    "message": message,
                },
            )
    return resource


def _ui_document_put(content_hash: str, data: bytes) -> None:
    """Store a document once by content hash (a second writer of the same bytes finds it
    there; a racing duplicate is removed)."""
    name = ui_document_name(content_hash)
    if default_storage.exists(name):
        return
    saved = default_storage.save(name, ContentFile(data))
    if saved != name:  # another process stored the same bytes meanwhile
        default_storage.delete(saved)


def _ui_resource_keep(
    *, server: McpServer, uri: str, mime_type: str, flavor: str, text: str, meta: dict[str, Any]
) -> tuple[UiResource, bool]:
    """The version of ``uri`` with this text (by content hash), stored when new: the
    document in storage once by its hash (``ui_document_name``); its text in the row too
    when it is small (``INLINE_UI_DOCUMENT_BYTES``). An external URL stays in the row."""
    data = text.encode()
    content_hash = hashlib.sha256(data).hexdigest()
    found = UiResource.objects.filter(server=server, uri=uri, content_hash=content_hash).first()
    if found is not None:
        return found, False
    inline = flavor == "url" or len(data) <= INLINE_UI_DOCUMENT_BYTES
    if flavor != "url":
        _ui_document_put(content_hash, data)
    return UiResource.objects.get_or_create(
        server=server,
        uri=uri,
        content_hash=content_hash,
        defaults={
            "mime_type": mime_type,
            "flavor": flavor,
            "text": text if inline else "",
            "meta": meta,
            "size": len(data),
        },
    )
