"""A view's document embedded in a result (``ui://`` resource): a ``ui`` part (pure)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from mcp_bridge.uimeta import (
    URI_LIST_MIME,
    MimeType,
    clean_str,
    first_http_url,
    is_http_url,
    parse_resource_ui,
    printable,
    ui_flavor,
)

from .media import decode_base64
from .result import NormalizedResult

_FRAMEWORK_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")


def read_ui_resource(
    uri: str,
    mime: MimeType,
    resource: Mapping[str, Any],
    audience: list[str] | None,
    *,
    result: NormalizedResult,
    max_document: int,
) -> None:
    """An embedded ``ui://`` resource with a UI MIME type: a ``ui`` part; its document
    goes to ``result.documents`` under its content hash, never into the part."""
    shown_uri = printable(uri, 80)
    text = resource.get("text")
    blob = resource.get("blob")
    if isinstance(text, str):
        content = text
    elif isinstance(blob, str):
        if len(blob) // 4 * 3 > max_document + 3:
            result.add_error("too_large", f"UI resource {shown_uri} is too large to show.")
            return
        decoded = decode_base64(blob)
        if decoded is None:
            result.add_error("invalid_base64", f"UI resource {shown_uri} has invalid base64 data.")
            return
        try:
            content = decoded.decode("utf-8")
        except UnicodeDecodeError:
            result.add_error("invalid_encoding", f"UI resource {shown_uri} is not valid UTF-8.")
            return
    else:
        result.add_error("missing_data", f"UI resource {shown_uri} has no content.")
        return
    if len(content) > max_document:
        result.add_error("too_large", f"UI resource {shown_uri} is too large to show.")
        return
    content = clean_str(content)
    flavor = ui_flavor(mime, content)
    encoded = content.encode("utf-8")
    content_hash = hashlib.sha256(encoded).hexdigest()
    url: str | None = None
    if flavor == "url":
        url = first_http_url(content) if mime.essence == URI_LIST_MIME else content.strip()
        if url is None or not is_http_url(url):
            result.add_error(
                "invalid_ui_url", f"UI resource {shown_uri} lists no valid http(s) URL."
            )
            return
    framework = mime.param("framework") if flavor == "remote-dom" else None
    if framework is not None and not _FRAMEWORK_RE.match(framework):
        framework = None
    resource_ui = parse_resource_ui(resource.get("_meta"), None)
    mime_text = str(mime)
    part = {
        "type": "ui",
        "uri": uri,
        "mimeType": mime_text,
        "flavor": flavor,
        "contentHash": content_hash,
        "url": url,
        "meta": resource_ui.to_dict(),
        "preferredFrameSize": resource_ui.preferred_frame_size,
        "initialRenderData": resource_ui.initial_render_data,
        "framework": framework,
    }
    result.add_part(part, audience)
    if url is None:
        result.documents[content_hash] = {
            "uri": uri,
            "mimeType": mime_text,
            "text": content,
        }
    result.resources.append(
        {
            "uri": uri,
            "kind": "ui",
            "mimeType": mime_text,
            "size": len(encoded),
            "status": "external" if url else "inline",
        }
    )
