"""What an inbound frame's JSON may hold beyond being valid JSON."""

from __future__ import annotations

from typing import Any

NUL = "\x00"
NUL_REFUSED = "Text may not contain the NUL character (U+0000)."


def contains_nul(value: Any) -> bool:
    """Whether a string anywhere in a decoded JSON value, keys included, holds U+0000.

    PostgreSQL's text and jsonb cannot store it (the write fails), SQLite can: refused
    alike on both profiles, with a clear error, before anything is stored. Iterative: a
    value nested as deep as the JSON decoder allows is walked without recursion."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if NUL in item:
                return True
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and NUL in key:
                    return True
                pending.append(child)
        elif isinstance(item, list):
            pending.extend(item)
    return False


def frame_has_nul(text: str, content: Any) -> bool:
    """``contains_nul`` for a frame's decoded ``content``; JSON spells U+0000 only as the
    escape ``\\u0000``, so a frame without that text is not walked."""
    return "\\u0000" in text and contains_nul(content)
