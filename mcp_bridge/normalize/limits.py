"""Budgets of one normalization run (pure): the defaults, and the text budget that spans
the whole result."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_INLINE_LIMIT = 64 * 1024
DEFAULT_MAX_TEXT = 1_000_000
DEFAULT_MAX_BLOCKS = 500
DEFAULT_MAX_BINARY = 256 * 1024 * 1024
DEFAULT_MAX_DOCUMENT = 5 * 1024 * 1024
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
    decoded size above which a payload is staged still base64-encoded (``None``: never)."""

    inline_limit: int = DEFAULT_INLINE_LIMIT
    max_inline_total: int = 8 * DEFAULT_INLINE_LIMIT
    max_text: int = DEFAULT_MAX_TEXT
    max_blocks: int = DEFAULT_MAX_BLOCKS
    max_binary: int = DEFAULT_MAX_BINARY
    max_document: int = DEFAULT_MAX_DOCUMENT
    defer_decode_over: int | None = None


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
