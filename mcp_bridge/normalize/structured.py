"""A result's ``structuredContent`` and ``_meta``: kept as JSON-safe copies, with an error
part for whatever could not be kept (pure).

Each has a size limit in serialized JSON bytes (``Limits.max_structured`` /
``Limits.max_meta``), measured on the server's value before anything is copied
(``limits.serialized_size``): past it the value is not kept at all (``structured`` is
``null``, ``uiMeta`` is ``null``) and an error part names the limit; the text content and
every other part of the result are kept as usual.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_bridge.uimeta import describe_type, json_safe

from .limits import DEFAULT_MAX_META, DEFAULT_MAX_STRUCTURED, human_size, serialized_size
from .result import NormalizedResult


def read_structured_content(
    raw: Mapping[str, Any], result: NormalizedResult, *, max_bytes: int = DEFAULT_MAX_STRUCTURED
) -> None:
    structured = raw.get("structuredContent")
    if structured is None:
        return
    if not isinstance(structured, Mapping):
        result.add_error(
            "invalid_structured_content",
            f"Structured content is a {describe_type(structured)}, not a JSON object; "
            "it was dropped.",
        )
        return
    if serialized_size(structured, max_bytes) > max_bytes:
        result.add_error(
            "structured_content_too_large",
            f"The structured content is larger than the {human_size(max_bytes)} limit; "
            "it was dropped.",
        )
        return
    copy, problems = json_safe(structured)
    result.structured = copy
    if problems:
        result.add_error(
            "invalid_structured_content",
            "Parts of the structured content could not be kept: " + "; ".join(problems),
        )


def read_result_meta(
    raw: Mapping[str, Any], result: NormalizedResult, *, max_bytes: int = DEFAULT_MAX_META
) -> None:
    meta = raw.get("_meta")
    if meta is None:
        return
    if not isinstance(meta, Mapping):
        result.add_error(
            "invalid_meta",
            f"The result's _meta is a {describe_type(meta)}, not an object; it was dropped.",
        )
        return
    if serialized_size(meta, max_bytes) > max_bytes:
        result.add_error(
            "meta_too_large",
            f"The result's UI metadata (_meta) is larger than the {human_size(max_bytes)} "
            "limit; it was dropped.",
        )
        return
    copy, problems = json_safe(meta)
    result.ui_meta = copy
    if problems:
        result.add_error(
            "invalid_meta",
            "Parts of the result's UI metadata could not be kept: " + "; ".join(problems),
        )
