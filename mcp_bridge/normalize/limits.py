"""Budgets of one normalization run (pure): the defaults, and the text budget that spans
the whole result."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_INLINE_LIMIT = 64 * 1024
DEFAULT_MAX_TEXT = 1_000_000
DEFAULT_MAX_BLOCKS = 500
DEFAULT_MAX_BINARY = 256 * 1024 * 1024
DEFAULT_MAX_DOCUMENT = 5 * 1024 * 1024
# Serialized JSON bytes (compact, ASCII-escaped: what is stored and broadcast).
DEFAULT_MAX_STRUCTURED = 1024 * 1024
DEFAULT_MAX_META = 256 * 1024
# Decoded bytes staged for the media worker by one result (all its payloads together).
DEFAULT_MAX_STAGED_TOTAL = 512 * 1024 * 1024
MAX_URI_LENGTH = 2048
MAX_NAME_LENGTH = 300
MAX_DESCRIPTION_LENGTH = 2000
MAX_FILENAME_LENGTH = 120


@dataclass(frozen=True)
class Limits:
    """``inline_limit`` — decoded size above which a payload is staged instead of inlined.
    ``max_inline_total`` — inline bytes for the whole result. ``max_text`` — characters of
    text kept. ``max_blocks`` — content blocks processed. ``max_binary`` — largest decoded
    payload. ``max_document`` — largest UI document (characters). ``defer_decode_over`` —
    decoded size above which a payload is staged still base64-encoded (``None``: never).
    ``max_structured`` / ``max_meta`` — serialized JSON bytes of ``structuredContent`` /
    the result's ``_meta``. ``max_staged_total`` — decoded bytes staged by the whole
    result."""

    inline_limit: int = DEFAULT_INLINE_LIMIT
    max_inline_total: int = 8 * DEFAULT_INLINE_LIMIT
    max_text: int = DEFAULT_MAX_TEXT
    max_blocks: int = DEFAULT_MAX_BLOCKS
    max_binary: int = DEFAULT_MAX_BINARY
    max_document: int = DEFAULT_MAX_DOCUMENT
    defer_decode_over: int | None = None
    max_structured: int = DEFAULT_MAX_STRUCTURED
    max_meta: int = DEFAULT_MAX_META
    max_staged_total: int = DEFAULT_MAX_STAGED_TOTAL


class TextBudget:
    """Characters of text left for the whole result. Text over the budget is cut; the
    first cut is where the one ``text_truncated`` notice goes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.cut = 0

    def take(self, text: str) -> tuple[str, bool]:
        """The part of ``text`` that fits, and whether anything was cut."""
        remaining = max(self.limit - self.used, 0)
        if len(text) <= remaining:
            self.used += len(text)
            return text, False
        self.cut += len(text) - remaining
        self.used += remaining
        return text[:remaining], True

    def notice(self) -> str:
        return (
            f"Text output was too long: {self.cut:,} characters beyond the "
            f"{self.limit:,}-character limit were cut."
        )


def human_size(size: object) -> str | None:
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


# json.dumps(str) is this C function behind a Python call and an encoder's dispatch: a
# structured result has dozens of strings, counted on every call (issue 28).
_escaped = json.encoder.encode_basestring_ascii

# What one value of an unknown type counts for (``json_safe`` stores it as ``null``).
_OTHER_SIZE = 4


def serialized_size(value: Any, limit: int) -> int:
    """The bytes of ``value`` as compact, ASCII-escaped JSON (``json.dumps(value,
    separators=(",", ":"))``), counted without building that text: exact up to ``limit``;
    past it, some number above ``limit`` (the walk stops there). A string longer than what
    is left is over at once (each character is at least one byte), so one huge string costs
    nothing; a string that may fit is escaped alone (a copy of at most ``limit`` bytes).
    Iterative (no recursion limit); a cycle just counts until it is over."""
    size = 0
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if size + len(item) + 2 > limit:
                return size + len(item) + 2
            size += len(_escaped(item))
        elif item is None or isinstance(item, bool):
            size += 4 if item is not False else 5
        elif isinstance(item, int | float):
            try:
                # As json.dumps writes them: int's own repr (an IntEnum too), and a float's
                # with its NaN / Infinity spellings.
                size += len(int.__repr__(item) if isinstance(item, int) else json.dumps(item))
            except ValueError:  # an int beyond str()'s digit limit, or similar
                size += _OTHER_SIZE
        elif isinstance(item, Mapping):
            if size + 5 * len(item) + 1 > limit:  # each member is at least `"":0,`
                return size + 5 * len(item) + 1
            size += 2 + max(len(item) - 1, 0)  # braces, commas
            for key, member in list(item.items()):
                key_text = key if isinstance(key, str) else str(key)
                size += 1  # the colon
                stack.append(member)
                stack.append(key_text)
                if size > limit:
                    return size
        elif isinstance(item, list | tuple):
            if size + 2 * len(item) + 1 > limit:  # each item is at least `0,`
                return size + 2 * len(item) + 1
            size += 2 + max(len(item) - 1, 0)
            stack.extend(item)
        else:
            size += _OTHER_SIZE
        if size > limit:
            return size
    return size
