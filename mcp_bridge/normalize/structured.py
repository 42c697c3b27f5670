"""A result's ``structuredContent`` and ``_meta``: kept as JSON-safe copies, with an error
part for whatever could not be kept (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_bridge.uimeta import describe_type, json_safe

from .result import NormalizedResult


def read_structured_content(raw: Mapping[str, Any], result: NormalizedResult) -> None:
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
    copy, problems = json_safe(structured)
    result.structured = copy
    if problems:
        result.add_error(
            "invalid_structured_content",
            "Parts of the structured content could not be kept: " + "; ".join(problems),
        )


def read_result_meta(raw: Mapping[str, Any], result: NormalizedResult) -> None:
    meta = raw.get("_meta")
    if meta is None:
        return
    if not isinstance(meta, Mapping):
        result.add_error(
            "invalid_meta",
            f"The result's _meta is a {describe_type(meta)}, not an object; it was dropped.",
        )
        return
    copy, problems = json_safe(meta)
    result.ui_meta = copy
    if problems:
        result.add_error(
            "invalid_meta",
            "Parts of the result's UI metadata could not be kept: " + "; ".join(problems),
        )
