"""What a client without interactive UI shows, and what a model may read, of a stored
result (pure). The text fallback is computed here only: the browser renders what the
server sends."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .limits import human_size

MAX_FALLBACK_JSON = 2000


def part_visible_to(part: Mapping[str, Any], audience: str) -> bool:
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
    size = human_size(part.get("size"))
    if part_type in ("image", "file"):
        kind = "image" if part_type == "image" else part.get("mediaKind")
        label = {"image": "image", "audio": "audio", "video": "video"}.get(str(kind), "file")
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


def compact_json(value: Any, limit: int) -> str:
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
    parts = [p for p in parts if part_visible_to(p, "user")]
    texts = [p["text"] for p in parts if p.get("type") == "text" and isinstance(p.get("text"), str)]
    lines: list[str] = list(texts)
    structured = sanitized.get("structured")
    if not texts and structured is not None:
        lines.append(compact_json(structured, MAX_FALLBACK_JSON))
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
            if not isinstance(part, Mapping) or not part_visible_to(part, "assistant"):
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
