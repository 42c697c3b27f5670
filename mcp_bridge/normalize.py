"""Canonical tool results (DESIGN §4): raw ``CallToolResult`` → sanitized parts (pure).

``normalize_tool_result`` turns whatever a server sent into one stored, JSON-ready shape
and never raises: anything it cannot use becomes an explicit error part that says so.
Binary payloads are base64-decoded exactly once; large ones are handed to a ``stage``
callback (durable staging for the media worker) and the decoded bytes are released right
after, so the request path holds at most one decoded copy. With ``defer_decode_over`` set,
payloads above that size are not decoded here at all: ``stage`` gets their base64 text
(``StagedPayload.encoded``, with the decoded size worked out from its length) and whoever
consumes the staging decodes and verifies it. With ``check_inline`` set, payloads small
enough to be inlined as ``data:`` URIs are type-checked by it first.

Canonical parts (plain dicts, camelCase):

- text  ``{"type": "text", "text"}`` (+ ``"uri"``, ``"mimeType"`` for embedded text
  resources)
- image ``{"type": "image", "mimeType", "size", "src": "data:…"}`` inline, or
  ``{"type": "image", "mimeType", "size", "asset": {...}}`` when staged
- file  ``{"type": "file", "mediaKind": "audio"|"video"|"binary", "mimeType", "filename",
  "size", "src" | "asset"}``
- link  ``{"type": "link", "uri", "name", "title", "mimeType", "description", "size",
  "clickable"}``
- ui    ``{"type": "ui", "uri", "mimeType", "flavor", "contentHash", "url", "meta",
  "preferredFrameSize", "initialRenderData", "framework"}`` — the document text lives in
  ``NormalizedResult.documents[contentHash]``, never in the part
- error ``{"type": "error", "code", "message"}``

Any part may also carry ``"audience": ["user"]`` or ``["assistant"]`` copied from the
block's ``annotations.audience`` when it names only one audience.

Text over ``max_text`` (a budget for the whole result) is *truncated*, and one
``text_truncated`` error part right after the first cut part says how much was cut.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from mcp_bridge.uimeta import (
    OCTET_STREAM,
    URI_LIST_MIME,
    MimeType,
    clean_str,
    describe_type,
    first_http_url,
    is_http_url,
    is_ui_uri,
    json_safe,
    parse_mime,
    parse_resource_ui,
    printable,
    ui_flavor,
)

MediaKind = Literal["image", "audio", "video", "binary"]

DEFAULT_INLINE_LIMIT = 64 * 1024
DEFAULT_MAX_TEXT = 1_000_000
DEFAULT_MAX_BLOCKS = 500
DEFAULT_MAX_BINARY = 256 * 1024 * 1024
DEFAULT_MAX_DOCUMENT = 5 * 1024 * 1024
MAX_URI_LENGTH = 2048
MAX_NAME_LENGTH = 300
MAX_DESCRIPTION_LENGTH = 2000
MAX_FILENAME_LENGTH = 120
MAX_FALLBACK_JSON = 2000
CLICKABLE_SCHEMES = ("http", "https")

_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_FRAMEWORK_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
# Media MIME types end up in data: URIs and Content-Type headers: allow only plain names
# (RFC 6838 restricted-name characters), not every RFC 7230 token character.
_MEDIA_MIME_RE = re.compile(r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}$")
_FILENAME_UNSAFE_RE = re.compile(r"[\x00-\x1f\x7f-\x9f/\\:*?\"<>|]")


@dataclass
class StagedPayload:
    """A binary payload handed to the staging callback: decoded (``data``), or, above the
    normalizer's ``defer_decode_over``, still base64 (``encoded``: not validated beyond its
    length and padding; ``data`` is then ``None``). ``size`` is the decoded size either way.

    The callback must consume the payload during the call (write it somewhere durable); the
    normalizer drops its own references as soon as the callback returns.
    """

    kind: MediaKind
    mime_type: str
    data: bytes | None
    filename: str | None = None
    source_uri: str | None = None
    encoded: str | None = None
    size: int = 0

    def __post_init__(self) -> None:
        if self.data is not None:
            self.size = len(self.data)


StageFn = Callable[[StagedPayload], dict]
# (kind, MIME type, decoded bytes) -> None if fine, else why not, in words for people.
CheckFn = Callable[[MediaKind, str, bytes], str | None]


@dataclass
class NormalizedResult:
    parts: list[dict[str, Any]] = field(default_factory=list)
    structured: dict[str, Any] | None = None
    resources: list[dict[str, Any]] = field(default_factory=list)
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    is_error: bool = False
    ui_meta: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "parts": self.parts,
            "structured": self.structured,
            "resources": self.resources,
            "documents": self.documents,
            "isError": self.is_error,
            "uiMeta": self.ui_meta,
        }


def error_part(code: str, message: str) -> dict[str, Any]:
    return {"type": "error", "code": code, "message": message}


def _media_kind_for(mime: str) -> MediaKind:
    major = mime.split("/", 1)[0]
    if major == "image":
        return "image"
    if major == "audio":
        return "audio"
    if major == "video":
        return "video"
    return "binary"


def _decode_base64(value: str) -> bytes | None:
    """Strict base64: standard alphabet, correct padding; whitespace (line wrapping) is
    tolerated. The fast path avoids copying large, unwrapped payloads."""
    try:
        # a2b_base64 reads the str directly; b64decode would first copy it to bytes
        # (a 67 MB copy for a 50 MB video).
        return binascii.a2b_base64(value, strict_mode=True)
    except (binascii.Error, ValueError):
        pass
    compact = "".join(value.split())
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return None


_BASE64_SPACE = " \t\n\r"


def base64_decoded_size(value: str) -> int | None:
    """The size ``value`` decodes to, from its length and padding alone (``None`` when those
    cannot be base64): ASCII, spaces/tabs/line breaks ignored, a multiple of 4 characters.
    The alphabet is *not* checked — that takes a full decode. Costs a few ``memchr`` scans."""
    if not value.isascii():
        return None
    spaces = sum(value.count(char) for char in _BASE64_SPACE if char in value)
    length = len(value) - spaces
    if length % 4:
        return None
    end = len(value)
    tail = ""
    while end > 0 and len(tail) < 2:
        end -= 1
        if value[end] not in _BASE64_SPACE:
            tail = value[end] + tail
    data_tail = tail.rstrip("=")
    if "=" in data_tail:  # padding inside the data
        return None
    padding = len(tail) - len(data_tail)
    return length // 4 * 3 - padding


def _filename_from_uri(uri: str | None) -> str | None:
    if not uri:
        return None
    try:
        path = urlsplit(uri).path
    except ValueError:
        return None
    name = unquote(path.rstrip("/").rsplit("/", 1)[-1])
    name = _FILENAME_UNSAFE_RE.sub("_", name).strip(" .")
    name = clean_str(name)
    if not name:
        return None
    if len(name) > MAX_FILENAME_LENGTH:
        stem, dot, ext = name.rpartition(".")
        keep_ext = dot and 0 < len(ext) <= 10
        name = (stem[: MAX_FILENAME_LENGTH - len(ext) - 1] + "." + ext) if keep_ext else name
        name = name[:MAX_FILENAME_LENGTH]
    return name


def _clean_uri(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_URI_LENGTH:
        return None
    value = value.strip()
    if _CONTROL_RE.search(value):
        return None
    return clean_str(value)


def _optional_text(value: Any, limit: int) -> str | None:
    if not isinstance(value, str):
        return None
    value = clean_str(value.strip())
    return value[:limit] if value else None


def _human_size(size: Any) -> str | None:
    """``512 B``, ``12 KB``, ``1.5 MB`` (binary units); ``None`` for a non-size."""
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return None
    if size < 1024:
        return f"{size} B"
    value = size / 1024
    unit = "KB"
    for larger_unit in ("MB", "GB"):
        if value < 1024:
            break
        value /= 1024
        unit = larger_unit
    rounded = f"{value:.1f}" if value < 10 else f"{value:.0f}"
    return f"{rounded.removesuffix('.0')} {unit}"


class _Normalizer:
    """One normalization run; holds budgets that span the whole result."""

    def __init__(
        self,
        *,
        stage: StageFn | None,
        inline_limit: int,
        max_inline_total: int,
        max_text: int,
        max_blocks: int,
        max_binary: int,
        max_document: int,
        defer_decode_over: int | None = None,
        check_inline: CheckFn | None = None,
    ) -> None:
        self.stage = stage
        self.defer_decode_over = defer_decode_over
        self.check_inline = check_inline
        self.inline_limit = inline_limit
        self.max_inline_total = max_inline_total
        self.max_text = max_text
        self.max_blocks = max_blocks
        self.max_binary = max_binary
        self.max_document = max_document
        self.result = NormalizedResult()
        self.text_used = 0
        self.text_cut = 0
        self.truncation_notice: dict[str, Any] | None = None
        self.inline_used = 0

    # ------------------------------------------------------------------ entry

    def run(self, raw: Any) -> NormalizedResult:
        raw = self._coerce(raw)
        if raw is None:
            return self.result
        self.result.is_error = raw.get("isError") is True

        content = raw.get("content")
        if content is None:
            content = []
        if not isinstance(content, list | tuple):
            self._error(
                "invalid_content",
                f"The tool result's content is a {describe_type(content)}, not a list; "
                "it was skipped.",
            )
            content = []
        for index, block in enumerate(content):
            if index >= self.max_blocks:
                self._error(
                    "too_many_blocks",
                    f"The tool returned {len(content)} content blocks; only the first "
                    f"{self.max_blocks} are shown.",
                )
                break
            self._block(block, index + 1)

        self._structured(raw)
        self._meta(raw)
        if self.truncation_notice is not None:
            self.truncation_notice["message"] = (
                f"Text output was too long: {self.text_cut:,} characters beyond the "
                f"{self.max_text:,}-character limit were cut."
            )
        return self.result

    def _coerce(self, raw: Any) -> Mapping[str, Any] | None:
        # Accept SDK model objects (pydantic) as a convenience; the wire form is canonical.
        if not isinstance(raw, Mapping) and hasattr(raw, "model_dump"):
            try:
                raw = raw.model_dump(mode="json", by_alias=True, exclude_none=True)
            except Exception:  # any failure of foreign code is just "not a result"
                raw = None
        if not isinstance(raw, Mapping):
            self.result.is_error = True
            self._error(
                "invalid_result",
                f"The tool returned a {describe_type(raw)} instead of a result object.",
            )
            return None
        return raw

    # ------------------------------------------------------------------ helpers

    def _error(self, code: str, message: str) -> dict[str, Any]:
        part = error_part(code, message)
        self.result.parts.append(part)
        return part

    def _add_part(self, part: dict[str, Any], audience: list[str] | None) -> None:
        if audience:
            part["audience"] = audience
        self.result.parts.append(part)

    @staticmethod
    def _audience(block: Mapping[str, Any]) -> list[str] | None:
        annotations = block.get("annotations")
        if not isinstance(annotations, Mapping):
            return None
        audience = annotations.get("audience")
        if not isinstance(audience, list | tuple):
            return None
        names = [name for name in ("user", "assistant") if name in audience]
        # Only a single named audience restricts anything; both (or none) is the default.
        return names if len(names) == 1 else None

    def _add_text(
        self, text: str, audience: list[str] | None, extra: dict[str, Any] | None = None
    ) -> None:
        remaining = self.max_text - self.text_used
        if len(text) > remaining:
            self.text_cut += len(text) - max(remaining, 0)
            text = text[: max(remaining, 0)]
            if self.truncation_notice is None:
                if text:
                    self._add_part(
                        {"type": "text", "text": clean_str(text), **(extra or {})}, audience
                    )
                    self.text_used += len(text)
                # Message is finalized in run() once the total cut is known.
                self.truncation_notice = self._error("text_truncated", "")
            return
        self.text_used += len(text)
        self._add_part({"type": "text", "text": clean_str(text), **(extra or {})}, audience)

    # ------------------------------------------------------------------ blocks

    def _block(self, block: Any, number: int) -> None:
        if not isinstance(block, Mapping):
            self._error(
                "invalid_block",
                f"Content block {number} is a {describe_type(block)}, not an object; "
                "it was skipped.",
            )
            return
        block_type = block.get("type")
        audience = self._audience(block)
        if block_type == "text":
            text = block.get("text")
            if not isinstance(text, str):
                self._error("missing_field", f"Text block {number} has no text.")
                return
            self._add_text(text, audience)
        elif block_type == "image":
            self._inline_media_block(block, "image", "Image", audience)
        elif block_type == "audio":
            self._inline_media_block(block, "audio", "Audio", audience)
        elif block_type == "resource":
            self._embedded_resource(block, number, audience)
        elif block_type == "resource_link":
            self._resource_link(block, number, audience)
        elif isinstance(block_type, str):
            self._error(
                "unknown_block_type",
                f"Unknown content block type {printable(block_type, 40)!r} was skipped.",
            )
        else:
            self._error("invalid_block", f"Content block {number} has no type; it was skipped.")

    def _inline_media_block(
        self,
        block: Mapping[str, Any],
        kind: Literal["image", "audio"],
        label: str,
        audience: list[str] | None,
    ) -> None:
        mime = parse_mime(block.get("mimeType"))
        if mime is None:
            self._error("missing_field", f"{label} block has no valid MIME type.")
            return
        if mime.type != kind or not _MEDIA_MIME_RE.match(mime.essence):
            self._error(
                "unsupported_mime",
                f"{label} block has unsupported MIME type {printable(mime.essence, 60)!r}.",
            )
            return
        self._media(
            block.get("data"),
            kind=kind,
            mime=mime.essence,
            label=label,
            filename=None,
            source_uri=None,
            audience=audience,
        )

    def _media(
        self,
        data_b64: Any,
        *,
        kind: MediaKind,
        mime: str,
        label: str,
        filename: str | None,
        source_uri: str | None,
        audience: list[str] | None,
    ) -> None:
        if not isinstance(data_b64, str) or not data_b64.strip():
            self._error("missing_data", f"{label} block has no data.")
            return
        estimate = len(data_b64) // 4 * 3
        if estimate > self.max_binary + 3:
            self._too_large(label)
            return
        location = (kind, mime, label, filename, source_uri, audience)
        # (estimate: the decoded size + 0..2, the padding)
        if self.defer_decode_over is not None and estimate > 2 + max(
            self.defer_decode_over, self.inline_limit
        ):
            self._encoded_media(data_b64, *location)
            return
        data = _decode_base64(data_b64)
        if data is None:
            self._error("invalid_base64", f"{label} block has invalid base64 data.")
            return
        if not data:
            self._error("missing_data", f"{label} block has no data.")
            return
        size = len(data)
        fits_inline = size <= self.inline_limit and self.inline_used + size <= self.max_inline_total
        # Images and audio play fine from data: URIs; video and other files get a real
        # URL (and a filename) through staging whenever staging is available.
        prefer_inline = kind in ("image", "audio") or self.stage is None
        if fits_inline and prefer_inline:
            rejection = self._inline_rejection(kind, mime, label, data)
            if rejection is not None:
                del data
                self._error("media_rejected", rejection)
                return
            self.inline_used += size
            src = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
            del data
            self._emit_media(
                kind, mime, size, filename, source_uri, audience, {"src": src}, "inline"
            )
            return
        if self.stage is None:
            del data
            self._error(
                "media_storage_unavailable",
                f"{label} ({_human_size(size)}) could not be shown: media storage is unavailable.",
            )
            return
        payload = StagedPayload(
            kind=kind, mime_type=mime, data=data, filename=filename, source_uri=source_uri
        )
        del data
        self._stage(payload, *location)

    def _too_large(self, label: str) -> None:
        self._error(
            "too_large",
            f"{label} is larger than the {_human_size(self.max_binary)} limit and was not stored.",
        )

    def _inline_rejection(self, kind: MediaKind, mime: str, label: str, data: bytes) -> str | None:
        if self.check_inline is None:
            return None
        try:
            return self.check_inline(kind, mime, data)
        except Exception:  # a checker that fails must not let unchecked content through
            return f"{label} could not be checked, so it is not shown."

    def _encoded_media(
        self,
        data_b64: str,
        kind: MediaKind,
        mime: str,
        label: str,
        filename: str | None,
        source_uri: str | None,
        audience: list[str] | None,
    ) -> None:
        """A payload too large to decode here: staged as base64 (the consumer decodes)."""
        size = base64_decoded_size(data_b64)
        if size is None:
            self._error("invalid_base64", f"{label} block has invalid base64 data.")
            return
        if size > self.max_binary:
            self._too_large(label)
            return
        if self.stage is None:
            self._error(
                "media_storage_unavailable",
                f"{label} ({_human_size(size)}) could not be shown: media storage is unavailable.",
            )
            return
        payload = StagedPayload(
            kind=kind,
            mime_type=mime,
            data=None,
            filename=filename,
            source_uri=source_uri,
            encoded=data_b64,
            size=size,
        )
        del data_b64
        self._stage(payload, kind, mime, label, filename, source_uri, audience)

    def _stage(
        self,
        payload: StagedPayload,
        kind: MediaKind,
        mime: str,
        label: str,
        filename: str | None,
        source_uri: str | None,
        audience: list[str] | None,
    ) -> None:
        assert self.stage is not None
        size = payload.size
        try:
            descriptor = self.stage(payload)
        except Exception:  # a storage failure must not lose the rest of the result
            descriptor = None
        finally:
            del payload  # release the payload as soon as staging is done
        if not isinstance(descriptor, Mapping):
            self._error(
                "staging_failed",
                f"{label} ({_human_size(size)}) could not be stored; please try again.",
            )
            return
        asset, _ = json_safe(dict(descriptor), max_depth=8, max_nodes=1000)
        status = asset.get("status") if isinstance(asset.get("status"), str) else "staged"
        self._emit_media(kind, mime, size, filename, source_uri, audience, {"asset": asset}, status)

    def _emit_media(
        self,
        kind: MediaKind,
        mime: str,
        size: int,
        filename: str | None,
        source_uri: str | None,
        audience: list[str] | None,
        location: dict[str, Any],
        status: str,
    ) -> None:
        if kind == "image":
            part: dict[str, Any] = {"type": "image", "mimeType": mime, "size": size, **location}
        else:
            part = {
                "type": "file",
                "mediaKind": kind,
                "mimeType": mime,
                "filename": filename,
                "size": size,
                **location,
            }
        self._add_part(part, audience)
        resource: dict[str, Any] = {"uri": source_uri, "kind": kind, "mimeType": mime}
        if filename:
            resource["filename"] = filename
        resource["size"] = size
        resource["status"] = status
        asset = location.get("asset")
        if isinstance(asset, Mapping) and source_uri is None and isinstance(asset.get("url"), str):
            resource["uri"] = asset["url"]
        self.result.resources.append(resource)

    def _embedded_resource(
        self, block: Mapping[str, Any], number: int, audience: list[str] | None
    ) -> None:
        resource = block.get("resource")
        if not isinstance(resource, Mapping):
            self._error(
                "invalid_resource",
                f"Embedded resource block {number} has no resource object; it was skipped.",
            )
            return
        uri = _clean_uri(resource.get("uri"))
        mime = parse_mime(resource.get("mimeType"))
        text = resource.get("text")
        blob = resource.get("blob")

        # Only ui:// resources with a UI MIME type render as views; a text/html resource
        # elsewhere is just data.
        is_view = uri is not None and is_ui_uri(uri) and mime is not None
        if is_view and ui_flavor(mime, None) is not None:
            self._ui_resource(uri, mime, resource, audience)
            return

        if isinstance(text, str):
            extra: dict[str, Any] = {"uri": uri}
            if mime is not None:
                extra["mimeType"] = str(mime)
            self._add_text(text, audience, extra)
            return
        if blob is not None:
            essence = mime.essence if mime is not None else OCTET_STREAM
            if not _MEDIA_MIME_RE.match(essence):
                essence = OCTET_STREAM
            kind = _media_kind_for(essence)
            label = {"image": "Image", "audio": "Audio", "video": "Video"}.get(kind, "File")
            self._media(
                blob,
                kind=kind,
                mime=essence,
                label=label,
                filename=_filename_from_uri(uri),
                source_uri=uri,
                audience=audience,
            )
            return
        shown = printable(uri, 80) if uri else f"in block {number}"
        self._error("missing_data", f"Embedded resource {shown} has no text or blob content.")

    def _ui_resource(
        self,
        uri: str,
        mime: MimeType,
        resource: Mapping[str, Any],
        audience: list[str] | None,
    ) -> None:
        shown_uri = printable(uri, 80)
        text = resource.get("text")
        blob = resource.get("blob")
        if isinstance(text, str):
            content = text
        elif isinstance(blob, str):
            if len(blob) // 4 * 3 > self.max_document + 3:
                self._error("too_large", f"UI resource {shown_uri} is too large to show.")
                return
            decoded = _decode_base64(blob)
            if decoded is None:
                self._error("invalid_base64", f"UI resource {shown_uri} has invalid base64 data.")
                return
            try:
                content = decoded.decode("utf-8")
            except UnicodeDecodeError:
                self._error("invalid_encoding", f"UI resource {shown_uri} is not valid UTF-8.")
                return
        else:
            self._error("missing_data", f"UI resource {shown_uri} has no content.")
            return
        if len(content) > self.max_document:
            self._error("too_large", f"UI resource {shown_uri} is too large to show.")
            return
        content = clean_str(content)
        flavor = ui_flavor(mime, content)
        encoded = content.encode("utf-8")
        content_hash = hashlib.sha256(encoded).hexdigest()
        url: str | None = None
        if flavor == "url":
            url = first_http_url(content) if mime.essence == URI_LIST_MIME else content.strip()
            if url is None or not is_http_url(url):
                self._error(
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
        self._add_part(part, audience)
        if url is None:
            self.result.documents[content_hash] = {
                "uri": uri,
                "mimeType": mime_text,
                "text": content,
            }
        self.result.resources.append(
            {
                "uri": uri,
                "kind": "ui",
                "mimeType": mime_text,
                "size": len(encoded),
                "status": "external" if url else "inline",
            }
        )

    def _resource_link(
        self, block: Mapping[str, Any], number: int, audience: list[str] | None
    ) -> None:
        uri = _clean_uri(block.get("uri"))
        if uri is None:
            self._error("missing_field", f"Resource link in block {number} has no valid URI.")
            return
        name = _optional_text(block.get("name"), MAX_NAME_LENGTH)
        mime_raw = block.get("mimeType")
        mime = parse_mime(mime_raw) if mime_raw is not None else None
        size = block.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            size = None
        scheme = uri.split(":", 1)[0].lower() if ":" in uri else ""
        clickable = scheme in CLICKABLE_SCHEMES and is_http_url(uri)
        part = {
            "type": "link",
            "uri": uri,
            "name": name or _filename_from_uri(uri) or uri[:MAX_NAME_LENGTH],
            "title": _optional_text(block.get("title"), MAX_NAME_LENGTH),
            "mimeType": str(mime) if mime is not None else None,
            "description": _optional_text(block.get("description"), MAX_DESCRIPTION_LENGTH),
            "size": size,
            "clickable": clickable,
        }
        self._add_part(part, audience)
        entry: dict[str, Any] = {"uri": uri, "kind": "link", "mimeType": part["mimeType"]}
        if size is not None:
            entry["size"] = size
        entry["status"] = "external"
        self.result.resources.append(entry)

    # ------------------------------------------------------------------ result fields

    def _structured(self, raw: Mapping[str, Any]) -> None:
        structured = raw.get("structuredContent")
        if structured is None:
            return
        if not isinstance(structured, Mapping):
            self._error(
                "invalid_structured_content",
                f"Structured content is a {describe_type(structured)}, not a JSON object; "
                "it was dropped.",
            )
            return
        copy, problems = json_safe(structured)
        self.result.structured = copy
        if problems:
            self._error(
                "invalid_structured_content",
                "Parts of the structured content could not be kept: " + "; ".join(problems),
            )

    def _meta(self, raw: Mapping[str, Any]) -> None:
        meta = raw.get("_meta")
        if meta is None:
            return
        if not isinstance(meta, Mapping):
            self._error(
                "invalid_meta",
                f"The result's _meta is a {describe_type(meta)}, not an object; it was dropped.",
            )
            return
        copy, problems = json_safe(meta)
        self.result.ui_meta = copy
        if problems:
            self._error(
                "invalid_meta",
                "Parts of the result's UI metadata could not be kept: " + "; ".join(problems),
            )


def normalize_tool_result(
    raw: Any,
    *,
    stage: StageFn | None = None,
    inline_limit: int = DEFAULT_INLINE_LIMIT,
    max_text: int = DEFAULT_MAX_TEXT,
    max_inline_total: int | None = None,
    max_blocks: int = DEFAULT_MAX_BLOCKS,
    max_binary: int = DEFAULT_MAX_BINARY,
    max_document: int = DEFAULT_MAX_DOCUMENT,
    defer_decode_over: int | None = None,
    check_inline: CheckFn | None = None,
) -> NormalizedResult:
    """Normalize a wire-form ``CallToolResult`` dict. Pure apart from ``stage``; never raises.

    ``inline_limit`` — decoded size above which a payload is staged instead of inlined.
    ``max_inline_total`` — inline bytes budget for the whole result (default
    ``8 * inline_limit``); further payloads are staged. ``max_text`` — total characters of
    text kept. ``max_blocks`` — content blocks processed. ``max_binary`` — largest decoded
    payload accepted. ``max_document`` — largest UI document (characters).
    ``defer_decode_over`` — decoded size above which a payload goes to ``stage`` still
    base64-encoded (``None``: always decode here). ``check_inline(kind, mime, data)`` — vets
    a payload about to be inlined; a reason it returns becomes a ``media_rejected`` error part.
    """
    normalizer = _Normalizer(
        stage=stage,
        inline_limit=inline_limit,
        max_inline_total=max_inline_total if max_inline_total is not None else 8 * inline_limit,
        max_text=max_text,
        max_blocks=max_blocks,
        max_binary=max_binary,
        max_document=max_document,
        defer_decode_over=defer_decode_over,
        check_inline=check_inline,
    )
    try:
        return normalizer.run(raw)
    except Exception as exc:  # last line of defence: the contract is "never raises"
        result = normalizer.result
        result.parts.append(
            error_part(
                "normalization_failed",
                f"Part of the tool result could not be processed ({type(exc).__name__}).",
            )
        )
        return result


# --------------------------------------------------------------------------- packaging


def build_sanitized_tool_result(
    normalized: NormalizedResult,
    *,
    tool_name: str,
    tool_call_id: str,
    server: str,
) -> dict[str, Any]:
    """The stored / broadcast ``SanitizedToolResult`` (documents are stored separately)."""
    return {
        "parts": normalized.parts,
        "structured": normalized.structured,
        "resources": normalized.resources,
        "meta": {
            "toolName": tool_name,
            "toolCallId": tool_call_id,
            "server": server,
            "success": not normalized.is_error,
            "isError": normalized.is_error,
        },
        "uiMeta": normalized.ui_meta,
    }


def _part_visible_to(part: Mapping[str, Any], audience: str) -> bool:
    restricted = part.get("audience")
    return not isinstance(restricted, list) or audience in restricted


def describe_part(part: Any) -> str | None:
    """Short text for a non-text part (``[image: image/png, 12 KB]``); ``None`` if unknown.

    Uses only content-derived fields; never a part's ``meta`` (UI-only data).
    """
    if not isinstance(part, Mapping):
        return None
    part_type = part.get("type")
    mime = part.get("mimeType") if isinstance(part.get("mimeType"), str) else None
    size = _human_size(part.get("size"))
    if part_type in ("image", "file"):
        kind = "image" if part_type == "image" else part.get("mediaKind")
        label = {"image": "image", "audio": "audio", "video": "video"}.get(kind, "file")
        details = [item for item in (mime, size) if item]
        filename = part.get("filename")
        if isinstance(filename, str) and filename:
            details.append(filename)
        return f"[{label}: {', '.join(details)}]" if details else f"[{label}]"
    if part_type == "link":
        uri = part.get("uri") if isinstance(part.get("uri"), str) else ""
        name = part.get("title") or part.get("name")
        if isinstance(name, str) and name and name != uri:
            return f"[link: {name} — {uri}]"
        return f"[link: {uri}]"
    if part_type == "ui":
        uri = part.get("uri") if isinstance(part.get("uri"), str) else "ui://"
        return f"[interactive view: {uri} — open in the web app]"
    if part_type == "error":
        message = part.get("message")
        return f"[error: {message}]" if isinstance(message, str) and message else "[error]"
    return None


def _compact_json(value: Any, limit: int) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
    except (TypeError, ValueError, RecursionError):
        return "[structured data]"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def text_fallback(sanitized: Any) -> str:
    """What a client without interactive UI shows: text parts, then one line per media,
    link, view and error; structured data as compact JSON when there is no text."""
    if not isinstance(sanitized, Mapping):
        return ""
    parts = sanitized.get("parts")
    parts = [p for p in parts if isinstance(p, Mapping)] if isinstance(parts, list) else []
    parts = [p for p in parts if _part_visible_to(p, "user")]
    texts = [p["text"] for p in parts if p.get("type") == "text" and isinstance(p.get("text"), str)]
    lines: list[str] = list(texts)
    structured = sanitized.get("structured")
    if not texts and structured is not None:
        lines.append(_compact_json(structured, MAX_FALLBACK_JSON))
    for part in parts:
        if part.get("type") == "text":
            continue
        description = describe_part(part)
        if description:
            lines.append(description)
    if not lines:
        meta = sanitized.get("meta")
        if isinstance(meta, Mapping) and meta.get("isError") is True:
            return "(The tool reported an error without details.)"
        return "(The tool returned no content.)"
    return "\n".join(lines)


def model_content(sanitized: Any) -> dict[str, Any]:
    """What a model provider may receive for a tool result.

    Only content-derived text and ``structuredContent``: never ``uiMeta`` (result
    ``_meta``), never a UI part's ``meta``/render data, never a part marked for the user
    only (security invariant 8).
    """
    content: list[dict[str, str]] = []
    structured: Any = None
    if isinstance(sanitized, Mapping):
        parts = sanitized.get("parts")
        for part in parts if isinstance(parts, list) else []:
            if not isinstance(part, Mapping) or not _part_visible_to(part, "assistant"):
                continue
            if part.get("type") == "text":
                if isinstance(part.get("text"), str):
                    content.append({"type": "text", "text": part["text"]})
                continue
            if part.get("type") == "ui":
                uri = part.get("uri") if isinstance(part.get("uri"), str) else "ui://"
                content.append(
                    {"type": "text", "text": f"[interactive view {uri} was shown to the user]"}
                )
                continue
            description = describe_part(part)
            if description:
                content.append({"type": "text", "text": description})
        structured = sanitized.get("structured")
        if not isinstance(structured, Mapping):
            structured = None
    return {"content": content, "structuredContent": structured}
