"""The normalized result and the stored ``SanitizedToolResult`` built from it (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


def error_part(code: str, message: str) -> dict[str, Any]:
    return {"type": "error", "code": code, "message": message}


@dataclass
class NormalizedResult:
    parts: list[dict[str, Any]] = field(default_factory=list)
    structured: dict[str, Any] | None = None
    resources: list[dict[str, Any]] = field(default_factory=list)
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    is_error: bool = False
    ui_meta: dict[str, Any] | None = None

    def add_part(self, part: dict[str, Any], audience: list[str] | None = None) -> None:
        if audience:
            part["audience"] = audience
        self.parts.append(part)

    def add_error(self, code: str, message: str) -> dict[str, Any]:
        part = error_part(code, message)
        self.parts.append(part)
        return part

    def to_dict(self) -> dict[str, Any]:
        return {
            "parts": self.parts,
            "structured": self.structured,
            "resources": self.resources,
            "documents": self.documents,
            "isError": self.is_error,
            "uiMeta": self.ui_meta,
        }


def block_audience(block: Mapping[str, Any]) -> list[str] | None:
    """``["user"]`` or ``["assistant"]`` from ``annotations.audience`` when it names only
    one of them; both (or none) is the default and restricts nothing."""
    annotations = block.get("annotations")
    if not isinstance(annotations, Mapping):
        return None
    audience = annotations.get("audience")
    if not isinstance(audience, list | tuple):
        return None
    names = [name for name in ("user", "assistant") if name in audience]
    return names if len(names) == 1 else None


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
