"""Binary payloads of a result (pure apart from the staging callback): base64 decoded
exactly once, inlined as ``data:`` URIs when small, else handed to ``stage`` (durable
staging for the media worker) and released right after, so the request path holds at most
one decoded copy. Above ``defer_decode_over`` a payload is not decoded here at all: ``stage``
gets its base64 text and whoever consumes the staging decodes and verifies it. A payload
that would take the result's staged bytes past ``max_staged_total`` is not staged: a
``staged_media_limit`` error part stands in its place."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from mcp_bridge.spooled_media import SpooledLiteral
from mcp_bridge.uimeta import json_safe

from .limits import Limits, human_size
from .result import NormalizedResult

MediaKind = Literal["image", "audio", "video", "binary"]

# Media MIME types end up in data: URIs and Content-Type headers: allow only plain names
# (RFC 6838 restricted-name characters), not every RFC 7230 token character.
MEDIA_MIME_RE = re.compile(r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}$")


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
    # Still base64, in the transport's spool file (``mcp_bridge.spooled_media``): the
    # callback takes the file over (renames it), or discards it.
    spooled: SpooledLiteral | None = None

    def __post_init__(self) -> None:
        if self.data is not None:
            self.size = len(self.data)


StageFn = Callable[[StagedPayload], Mapping[str, Any] | None]
# (kind, MIME type, decoded bytes) -> None if fine, else why not, in words for people.
CheckFn = Callable[[MediaKind, str, bytes], str | None]
# A marker string -> the spooled literal it stands for (once), else None.
ClaimFn = Callable[[str], SpooledLiteral | None]


def media_kind_for(mime: str) -> MediaKind:
    major = mime.split("/", 1)[0]
    if major == "image":
        return "image"
    if major == "audio":
        return "audio"
    if major == "video":
        return "video"
    return "binary"


def decode_base64(value: str) -> bytes | None:
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


class MediaReader:
    """The media of one run; holds the inline budget that spans the whole result."""

    def __init__(
        self,
        *,
        result: NormalizedResult,
        limits: Limits,
        stage: StageFn | None,
        check_inline: CheckFn | None,
        claim_spooled: ClaimFn | None = None,
    ) -> None:
        self.claim_spooled = claim_spooled
        self.result = result
        self.limits = limits
        self.stage = stage
        self.check_inline = check_inline
        self.inline_used = 0
        self.staged_total = 0  # decoded bytes staged so far (``limits.max_staged_total``)

    def read(
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
            self.result.add_error("missing_data", f"{label} block has no data.")
            return
        location = (kind, mime, label, filename, source_uri, audience)
        spooled = self.claim_spooled(data_b64) if self.claim_spooled is not None else None
        if spooled is not None:
            data_b64 = self._spooled_media(spooled, *location)
            if data_b64 is None:
                return
        estimate = len(data_b64) // 4 * 3
        if estimate > self.limits.max_binary + 3:
            self._too_large(label)
            return
        # (estimate: the decoded size + 0..2, the padding)
        if self.limits.defer_decode_over is not None and estimate > 2 + max(
            self.limits.defer_decode_over, self.limits.inline_limit
        ):
            self._encoded_media(data_b64, *location)
            return
        data = decode_base64(data_b64)
        if data is None:
            self.result.add_error("invalid_base64", f"{label} block has invalid base64 data.")
            return
        if not data:
            self.result.add_error("missing_data", f"{label} block has no data.")
            return
        size = len(data)
        fits_inline = (
            size <= self.limits.inline_limit
            and self.inline_used + size <= self.limits.max_inline_total
        )
        # Images and audio play fine from data: URIs; video and other files get a real
        # URL (and a filename) through staging whenever staging is available.
        prefer_inline = kind in ("image", "audio") or self.stage is None
        if fits_inline and prefer_inline:
            rejection = self._inline_rejection(kind, mime, label, data)
            if rejection is not None:
                del data
                self.result.add_error("media_rejected", rejection)
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
            self.result.add_error(
                "media_storage_unavailable",
                f"{label} ({human_size(size)}) could not be shown: media storage is unavailable.",
            )
            return
        payload = StagedPayload(
            kind=kind, mime_type=mime, data=data, filename=filename, source_uri=source_uri
        )
        del data
        self._stage(payload, *location)

    def _too_large(self, label: str) -> None:
        self.result.add_error(
            "too_large",
            f"{label} is larger than the {human_size(self.limits.max_binary)} limit and was not stored.",
        )

    def _inline_rejection(self, kind: MediaKind, mime: str, label: str, data: bytes) -> str | None:
        if self.check_inline is None:
            return None
        try:
            return self.check_inline(kind, mime, data)
        except Exception:  # a checker that fails must not let unchecked content through
            return f"{label} could not be checked, so it is not shown."

    def _spooled_media(
        self,
        spooled: SpooledLiteral,
        kind: MediaKind,
        mime: str,
        label: str,
        filename: str | None,
        source_uri: str | None,
        audience: list[str] | None,
    ) -> str | None:
        """A payload the transport spooled: staged as its file; a small one comes back as
        text for the usual path (decode, inline checks)."""
        size = spooled.decoded_size()
        limits = self.limits
        small = limits.defer_decode_over is None or (
            size is not None and size <= max(limits.defer_decode_over, limits.inline_limit)
        )
        if size is not None and size <= limits.max_binary and small:
            try:
                return spooled.read_text()
            finally:
                spooled.discard()
        if size is None or size > limits.max_binary or self.stage is None:
            spooled.discard()
            if size is None:
                self.result.add_error("invalid_base64", f"{label} block has invalid base64 data.")
            elif size > limits.max_binary:
                self._too_large(label)
            else:
                self.result.add_error(
                    "media_storage_unavailable",
                    f"{label} ({human_size(size)}) could not be shown: media storage is "
                    "unavailable.",
                )
            return None
        payload = StagedPayload(
            kind=kind,
            mime_type=mime,
            data=None,
            filename=filename,
            source_uri=source_uri,
            size=size,
            spooled=spooled,
        )
        self._stage(payload, kind, mime, label, filename, source_uri, audience)
        return None

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
            self.result.add_error("invalid_base64", f"{label} block has invalid base64 data.")
            return
        if size > self.limits.max_binary:
            self._too_large(label)
            return
        if self.stage is None:
            self.result.add_error(
                "media_storage_unavailable",
                f"{label} ({human_size(size)}) could not be shown: media storage is unavailable.",
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
        if self.staged_total + size > self.limits.max_staged_total:
            if payload.spooled is not None:
                payload.spooled.discard()
            del payload
            self.result.add_error(
                "staged_media_limit",
                f"{label} ({human_size(size)}) was not stored: this result's media exceed "
                f"the {human_size(self.limits.max_staged_total)} limit for one tool result.",
            )
            return
        self.staged_total += size
        try:
            descriptor = self.stage(payload)
        except Exception:  # a storage failure must not lose the rest of the result
            descriptor = None
        finally:
            del payload  # release the payload as soon as staging is done
        if not isinstance(descriptor, Mapping):
            self.result.add_error(
                "staging_failed",
                f"{label} ({human_size(size)}) could not be stored; please try again.",
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
        self.result.add_part(part, audience)
        resource: dict[str, Any] = {"uri": source_uri, "kind": kind, "mimeType": mime}
        if filename:
            resource["filename"] = filename
        resource["size"] = size
        resource["status"] = status
        asset = location.get("asset")
        if isinstance(asset, Mapping) and source_uri is None and isinstance(asset.get("url"), str):
            resource["uri"] = asset["url"]
        self.result.resources.append(resource)
