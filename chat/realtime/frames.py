"""What an inbound frame's JSON may hold beyond being valid JSON: only text a database can
store (the rule is ``mcp_bridge.uimeta``'s: both profiles refuse such text alike, before
anything is stored)."""

from __future__ import annotations

from typing import Any

from mcp_bridge.uimeta import unstorable

UNSTORABLE_REFUSED = "Text may not contain U+0000 or an unpaired surrogate (\\ud800–\\udfff)."


def frame_unstorable(text: str, content: Any) -> bool:
    """``unstorable`` for a frame's decoded ``content``. A text frame is valid UTF-8 (no
    surrogates) and strict JSON refuses a raw U+0000 in a string, so both arrive only as
    JSON's ``\\uXXXX`` escapes: a frame without one is not walked."""
    return "\\u" in text and unstorable(content)
