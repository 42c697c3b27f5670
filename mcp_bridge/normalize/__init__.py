"""Canonical tool results (DESIGN §4): raw ``CallToolResult`` → sanitized parts (pure).

``normalize_tool_result`` turns whatever a server sent into one stored, JSON-ready shape
and never raises: anything it cannot use becomes an explicit error part that says so.
One module per seam:

- ``content`` — the content blocks, in order, into parts (``ui_resource``: a view's
  embedded document; ``fields``: cleaned URIs, names, filenames)
- ``media`` — binary payloads: decoded once, inlined when small, else staged
- ``structured`` — ``structuredContent`` and the result's ``_meta``
- ``limits`` — the budgets of one run
- ``fallback`` — the text a client without interactive UI shows, and what a model reads
- ``result`` — the normalized result and the stored ``SanitizedToolResult``

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
``structuredContent`` over ``max_structured`` and ``_meta`` over ``max_meta`` (serialized
JSON bytes) are dropped whole, with a ``structured_content_too_large`` / ``meta_too_large``
error part; media beyond ``max_staged_total`` staged bytes get a ``staged_media_limit``
error part instead of being staged. The rest of the result is kept either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_bridge.uimeta import describe_type

from .content import BlockReader
from .fallback import describe_part, model_content, text_fallback
from .limits import (
    DEFAULT_INLINE_LIMIT,
    DEFAULT_MAX_BINARY,
    DEFAULT_MAX_BLOCKS,
    DEFAULT_MAX_DOCUMENT,
    DEFAULT_MAX_META,
    DEFAULT_MAX_STAGED_TOTAL,
    DEFAULT_MAX_STRUCTURED,
    DEFAULT_MAX_TEXT,
    Limits,
    serialized_size,
)
from .media import (
    CheckFn,
    ClaimFn,
    MediaKind,
    MediaReader,
    StagedPayload,
    StageFn,
    base64_decoded_size,
)
from .result import NormalizedResult, build_sanitized_tool_result, error_part
from .structured import read_result_meta, read_structured_content

__all__ = [
    "CheckFn",
    "ClaimFn",
    "Limits",
    "MediaKind",
    "NormalizedResult",
    "StageFn",
    "StagedPayload",
    "base64_decoded_size",
    "build_sanitized_tool_result",
    "describe_part",
    "error_part",
    "model_content",
    "normalize_tool_result",
    "serialized_size",
    "text_fallback",
]


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
    max_structured: int = DEFAULT_MAX_STRUCTURED,
    max_meta: int = DEFAULT_MAX_META,
    max_staged_total: int = DEFAULT_MAX_STAGED_TOTAL,
    check_inline: CheckFn | None = None,
    claim_spooled: ClaimFn | None = None,
) -> NormalizedResult:
    """Normalize a wire-form ``CallToolResult`` dict. Pure apart from ``stage``; never raises.

    The limits are described on ``limits.Limits`` (``max_inline_total`` defaults to
    ``8 * inline_limit``). ``check_inline(kind, mime, data)`` vets a payload about to be
    inlined; a reason it returns becomes a ``media_rejected`` error part.
    ``claim_spooled(marker)`` resolves a media field the stdio transport spooled
    (``mcp_bridge.spooled_media.claim``); only the host passes it.
    """
    limits = Limits(
        inline_limit=inline_limit,
        max_inline_total=max_inline_total if max_inline_total is not None else 8 * inline_limit,
        max_text=max_text,
        max_blocks=max_blocks,
        max_binary=max_binary,
        max_document=max_document,
        defer_decode_over=defer_decode_over,
        max_structured=max_structured,
        max_meta=max_meta,
        max_staged_total=max_staged_total,
    )
    result = NormalizedResult()
    try:
        _normalize(raw, result, limits, stage, check_inline, claim_spooled)
    except Exception as exc:  # last line of defence: the contract is "never raises"
        result.add_error(
            "normalization_failed",
            f"Part of the tool result could not be processed ({type(exc).__name__}).",
        )
    return result


def _normalize(
    raw: Any,
    result: NormalizedResult,
    limits: Limits,
    stage: StageFn | None,
    check_inline: CheckFn | None,
    claim_spooled: ClaimFn | None,
) -> None:
    found = _as_mapping(raw, result)
    if found is None:
        return
    result.is_error = found.get("isError") is True
    content = found.get("content")
    if content is None:
        content = []
    if not isinstance(content, list | tuple):
        result.add_error(
            "invalid_content",
            f"The tool result's content is a {describe_type(content)}, not a list; it was skipped.",
        )
        content = []
    media = MediaReader(
        result=result,
        limits=limits,
        stage=stage,
        check_inline=check_inline,
        claim_spooled=claim_spooled,
    )
    blocks = BlockReader(
        result=result, media=media, max_text=limits.max_text, max_document=limits.max_document
    )
    for index, block in enumerate(content):
        if index >= limits.max_blocks:
            result.add_error(
                "too_many_blocks",
                f"The tool returned {len(content)} content blocks; only the first "
                f"{limits.max_blocks} are shown.",
            )
            break
        blocks.read(block, index + 1)
    read_structured_content(found, result, max_bytes=limits.max_structured)
    read_result_meta(found, result, max_bytes=limits.max_meta)
    blocks.finish()


def _as_mapping(raw: Any, result: NormalizedResult) -> Mapping[str, Any] | None:
    # Accept SDK model objects (pydantic) as a convenience; the wire form is canonical.
    if not isinstance(raw, Mapping) and hasattr(raw, "model_dump"):
        try:
            raw = raw.model_dump(mode="json", by_alias=True, exclude_none=True)
        except Exception:  # any failure of foreign code is just "not a result"
            raw = None
    if not isinstance(raw, Mapping):
        result.is_error = True
        result.add_error(
            "invalid_result",
            f"The tool returned a {describe_type(raw)} instead of a result object.",
        )
        return None
    return raw
