"""Pure rules for the tools an app view provides: what is kept of a view's ``tools/list``
answer, the wire names the model sees, and the text the model gets back. No Django."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from chat.providers.base import wire_tool_name

PREFIX = "view"  # wire names: view__<app slug>__<tool>
MAX_TOOLS = 32  # per view
MAX_SCHEMA_BYTES = 16 * 1024
MAX_DESCRIPTION = 800
MAX_RESULT_CHARS = 16_000
TOOL_NAME_RE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
ANNOTATIONS = ("title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
V2_MARKERS = ("draft", "v2")


def clean_tools(raw: Any) -> list[dict[str, Any]]:
    """The tools of a ``tools/list`` answer the host keeps: named, with an object schema
    within its size, at most ``MAX_TOOLS``; everything else is dropped."""
    tools = raw.get("tools") if isinstance(raw, Mapping) else raw
    kept: list[dict[str, Any]] = []
    seen: set[str] = set()
    for tool in tools if isinstance(tools, list) else []:
        if len(kept) >= MAX_TOOLS:
            break
        if not isinstance(tool, Mapping):
            continue
        name = tool.get("name")
        if not isinstance(name, str) or not TOOL_NAME_RE.fullmatch(name) or name in seen:
            continue
        schema = tool.get("inputSchema")
        schema = dict(schema) if isinstance(schema, Mapping) else {}
        try:
            if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
                continue
        except (TypeError, ValueError, RecursionError):
            continue
        schema = {k: v for k, v in schema.items() if k not in ("$schema", "_meta")}
        schema["type"] = "object"
        schema.setdefault("properties", {})
        notes = tool.get("annotations")
        notes = notes if isinstance(notes, Mapping) else {}
        seen.add(name)
        kept.append(
            {
                "name": name,
                "title": _text(tool.get("title") or notes.get("title"), 120),
                "description": _text(tool.get("description"), MAX_DESCRIPTION),
                "inputSchema": schema,
                "annotations": {k: notes[k] for k in ANNOTATIONS if k in notes},
            }
        )
    return kept


def _text(value: Any, limit: int) -> str:
    return " ".join(value.split())[:limit] if isinstance(value, str) else ""


def wire_name(app_slug: str, tool_name: str) -> str:
    """``view__<app>__<tool>``: a model and a person tell it from a server's tool."""
    return wire_tool_name(PREFIX, f"{app_slug}__{tool_name}")


def is_view_wire_name(name: str) -> bool:
    return name.startswith(PREFIX + "__")


def description(app_name: str, tool: Mapping[str, Any]) -> str:
    text = tool.get("description") or tool.get("title") or tool.get("name") or ""
    return f"(from the {app_name} view in this thread) {text}".strip()[:1000]


def is_v2(protocol: str) -> bool:
    """Whether the view negotiated the v2 draft (ext-apps BREAKING.md): host→view calls are
    then ``ui/call-view-tool`` / ``ui/list-view-tools``."""
    lowered = protocol.lower()
    return any(marker in lowered for marker in V2_MARKERS)


def call_method(protocol: str) -> str:
    return "ui/call-view-tool" if is_v2(protocol) else "tools/call"


def result_text(result: Any) -> tuple[str, bool]:
    """A view's ``CallToolResult`` as the model's text: its text blocks, a described
    reference for other blocks, then its structured content; ``isError`` kept."""
    if not isinstance(result, Mapping):
        return "(The view returned no result.)", True
    parts: list[str] = []
    content = result.get("content")
    for block in content if isinstance(content, list) else []:
        parts.append(block_text(block))
    structured = result.get("structuredContent")
    if structured is not None:
        try:
            parts.append("structuredContent: " + json.dumps(structured, ensure_ascii=False))
        except (TypeError, ValueError, RecursionError):
            parts.append("structuredContent: [not JSON]")
    text = "\n".join(p for p in parts if p) or "(The tool returned no content.)"
    if len(text) > MAX_RESULT_CHARS:
        text = text[: MAX_RESULT_CHARS - 1] + "…"
    return text, result.get("isError") is True


def block_text(block: Any) -> str:
    """One content block as text: text as is, anything else a described reference."""
    if isinstance(block, str):
        return block
    if not isinstance(block, Mapping):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text") or "")
    if kind in ("image", "audio"):
        mime = str(block.get("mimeType") or kind)[:80]
        data = block.get("data")
        size = len(data) * 3 // 4 if isinstance(data, str) else 0
        return f"[{kind}: {mime}" + (f", about {size // 1024} KB]" if size >= 1024 else "]")
    if kind == "resource_link" or kind == "resourceLink":
        name = str(block.get("name") or block.get("title") or "")[:120]
        return f"[resource link: {str(block.get('uri') or '')[:300]}{' — ' + name if name else ''}]"
    if kind == "resource":
        res = block.get("resource")
        res = res if isinstance(res, Mapping) else {}
        uri = str(res.get("uri") or "")[:300]
        if isinstance(res.get("text"), str):
            return f"[resource {uri}]\n{res['text'][:4000]}"
        return f"[resource {uri}: {str(res.get('mimeType') or 'binary')[:80]}]"
    return f"[{str(kind)[:40]} content]"


def pick_wire_names(
    rows: Iterable[tuple[str, Mapping[str, Any], Any]], taken: set[str]
) -> dict[str, tuple[Mapping[str, Any], Any]]:
    """``(app slug, tool, row)`` → wire name → (tool, row); the first row of a name wins
    (pass the newest first); a name a server tool already has is skipped."""
    named: dict[str, tuple[Mapping[str, Any], Any]] = {}
    for slug, tool, row in rows:
        name = wire_name(slug, str(tool.get("name")))
        if name in taken or name in named:
            continue
        named[name] = (tool, row)
    return named


IMAGE_MAGIC = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}
MAX_CONTEXT_IMAGES = 4


def context_images(context: Any) -> list[tuple[str, str]]:
    """``(mime type, base64)`` of the image blocks of a view's model context that are what
    they say they are (PNG, JPEG, GIF, WebP by their first bytes), at most
    ``MAX_CONTEXT_IMAGES``: image parts for a provider that takes them."""
    content = context.get("content") if isinstance(context, Mapping) else None
    found: list[tuple[str, str]] = []
    for block in content if isinstance(content, list) else []:
        if len(found) >= MAX_CONTEXT_IMAGES:
            break
        if not isinstance(block, Mapping) or block.get("type") != "image":
            continue
        mime, data = block.get("mimeType"), block.get("data")
        if mime not in IMAGE_MAGIC or not isinstance(data, str):
            continue
        try:
            head = base64.b64decode(data[:64], validate=True)
            base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            continue
        if any(head.startswith(magic) for magic in IMAGE_MAGIC[mime]):
            found.append((mime, data))
    return found
