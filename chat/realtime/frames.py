"""What an inbound frame's JSON may hold beyond being valid JSON: only text a database can
store (the rule is ``mcp_bridge.uimeta.clean_str``'s)."""

from __future__ import annotations

from typing import Any

from mcp_bridge.uimeta import clean_str

UNSTORABLE_REFUSED = "Text may not contain U+0000 or an unpaired surrogate (\\ud800–\\udfff)."


def _storable(text: str) -> bool:
    return clean_str(text) == text


def unstorable(value: Any) -> bool:
    """Whether a string anywhere in a decoded JSON value, keys included, holds U+0000 or a
    lone surrogate: PostgreSQL's text and jsonb store neither (the write fails) and SQLite
    stores both, so both profiles refuse them alike, before anything is stored. Iterative:
    a deeply nested value is walked without recursion."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if not _storable(item):
                return True
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and not _storable(key):
                    return True
                pending.append(child)
        elif isinstance(item, list):
            pending.extend(item)
    return False


def frame_unstorable(text: str, content: Any) -> bool:
    """``unstorable`` for a frame's decoded ``content``. A websocket text frame is valid
    UTF-8, so U+0000 and surrogates arrive only as JSON's ``\\uXXXX`` escapes: a frame
    without one is not walked."""
    return "\\u" in text and unstorable(content)
