"""Best-effort parsing of streamed, incomplete JSON tool arguments (pure, no Django).

While a model streams a tool call, its argument string arrives in fragments. Views get
``ui/notifications/tool-input-partial`` with whatever can be recovered so far. The result
is always *consistent* with the final object: every key present will be present at the
end, strings are prefixes of their final value, arrays are prefixes of their final
array, numbers and literals are final. To guarantee that, the parser

- closes an unterminated string value (dropping a half-written escape and a dangling
  high surrogate, which would otherwise show a wrong character),
- drops an object key whose value has not started (``{"a": 1, "b`` → ``{"a": 1}``),
- drops a number at the very end (``{"n": 12`` may still become ``123``),
- completes a partial ``true``/``false``/``null`` (``tru`` can only become ``true``),
- closes open arrays and objects and ignores a trailing comma.

Why not ``pydantic_core.from_json(..., allow_partial=True)``: it returns a number that
touches the end of the input as final (``{"n": 12`` → 12, later 123: a value the final
object does not have, which breaks the rule above), accepts trailing garbage
(``{"a": 1} x``, ``{"a": 1x``) and drops partial literals (``tru``). The cases are in
tests/chat/test_partial_json.py.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 200

_WHITESPACE_RE = re.compile(r"[ \t\n\r]*")
# Characters of a string literal that need no special handling (fast path).
_STRING_CHUNK_RE = re.compile(r'[^"\\]*')
_NUMBER_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_NUMBER_PREFIX_RE = re.compile(r"-?[0-9]*\.?[0-9]*(?:[eE][-+]?[0-9]*)?")
# Escapes at the end of a cut string body; group 1 is the escape itself, preceded by an
# even run of backslashes (so it is not itself escaped).
_UNESCAPED = r"(?:^|[^\\])(?:\\\\)*"
# "\u" plus up to 3 hex digits: not complete yet.
_PARTIAL_UNICODE_ESCAPE_RE = re.compile(_UNESCAPED + r"(\\u[0-9a-fA-F]{0,3})$")
# A complete high-surrogate escape: its low half has not arrived yet.
_TRAILING_HIGH_SURROGATE_RE = re.compile(_UNESCAPED + r"(\\u[dD][89abAB][0-9a-fA-F]{2})$")
_LITERALS = {"true": True, "false": False, "null": None}


class _Invalid(Exception):
    """The fragment can never become valid JSON."""


class _End(Exception):
    """Input ended; carries nothing, the partially built containers are kept."""


_ABSENT = object()


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.length = len(text)

    def skip_ws(self, index: int) -> int:
        match = _WHITESPACE_RE.match(self.text, index)
        return match.end() if match else index

    def value(self, index: int, depth: int) -> tuple[Any, int, bool]:
        """Parse a value at ``index`` (after whitespace).

        Returns ``(value, next_index, complete)``; ``value`` is ``_ABSENT`` when nothing
        usable could be recovered. ``complete`` is False when input ended inside it.
        """
        if depth > MAX_DEPTH:
            raise _Invalid
        if index >= self.length:
            return _ABSENT, index, False
        char = self.text[index]
        if char == "{":
            return self.object(index + 1, depth + 1)
        if char == "[":
            return self.array(index + 1, depth + 1)
        if char == '"':
            return self.string(index + 1)
        if char == "-" or char.isdigit():
            return self.number(index)
        for literal, literal_value in _LITERALS.items():
            if self.text.startswith(literal, index):
                return literal_value, index + len(literal), True
            rest = self.text[index : index + len(literal)]
            if index + len(rest) == self.length and literal.startswith(rest):
                return literal_value, self.length, False
        raise _Invalid

    def number(self, index: int) -> tuple[Any, int, bool]:
        prefix = _NUMBER_PREFIX_RE.match(self.text, index)
        if prefix is not None and prefix.end() == self.length:
            # A number touching the end of input may still grow ("1" → "12", "1." →
            # "1.5"): leave it out until a delimiter follows.
            return _ABSENT, self.length, False
        match = _NUMBER_RE.match(self.text, index)
        if match is None or match.end() >= self.length:
            raise _Invalid
        end = match.end()
        if self.text[end] not in " \t\n\r,]}":
            raise _Invalid
        return json.loads(match.group()), end, True

    def string(self, index: int) -> tuple[str, int, bool]:
        """``index`` is just after the opening quote."""
        start = index
        text = self.text
        while True:
            chunk = _STRING_CHUNK_RE.match(text, index)
            index = chunk.end() if chunk else index
            if index >= self.length:
                return self._partial_string(text[start:]), self.length, False
            if text[index] == '"':
                try:
                    decoded = json.loads(text[start - 1 : index + 1], strict=False)
                except ValueError:
                    raise _Invalid from None
                return decoded, index + 1, True
            # A backslash: skip it and the escaped character (validated when decoding).
            index += 2
            if index > self.length:
                return self._partial_string(text[start:]), self.length, False

    @staticmethod
    def _partial_string(body: str) -> str:
        # An odd run of backslashes at the end is a lone "\" waiting for its character.
        trailing = len(body) - len(body.rstrip("\\"))
        if trailing % 2:
            body = body[:-1]
        for pattern in (_PARTIAL_UNICODE_ESCAPE_RE, _TRAILING_HIGH_SURROGATE_RE):
            match = pattern.search(body)
            if match:
                body = body[: match.start(1)]
        try:
            return json.loads(f'"{body}"', strict=False)
        except ValueError:
            raise _Invalid from None

    def array(self, index: int, depth: int) -> tuple[list[Any], int, bool]:
        items: list[Any] = []
        index = self.skip_ws(index)
        if index >= self.length:
            return items, index, False
        if self.text[index] == "]":
            return items, index + 1, True
        while True:
            index = self.skip_ws(index)
            value, index, complete = self.value(index, depth)
            if value is not _ABSENT:
                items.append(value)
            if not complete:
                return items, index, False
            index = self.skip_ws(index)
            if index >= self.length:
                return items, index, False
            char = self.text[index]
            if char == "]":
                return items, index + 1, True
            if char != ",":
                raise _Invalid
            index = self.skip_ws(index + 1)
            if index >= self.length:
                return items, index, False
            if self.text[index] == "]":
                raise _Invalid  # "[1,]" is not JSON and will not become JSON

    def object(self, index: int, depth: int) -> tuple[dict[str, Any], int, bool]:
        result: dict[str, Any] = {}
        index = self.skip_ws(index)
        if index >= self.length:
            return result, index, False
        if self.text[index] == "}":
            return result, index + 1, True
        while True:
            index = self.skip_ws(index)
            if index >= self.length:
                return result, index, False
            if self.text[index] != '"':
                raise _Invalid
            key, index, key_complete = self.string(index + 1)
            if not key_complete:
                return result, index, False
            index = self.skip_ws(index)
            if index >= self.length:
                return result, index, False
            if self.text[index] != ":":
                raise _Invalid
            index = self.skip_ws(index + 1)
            value, index, complete = self.value(index, depth)
            if value is not _ABSENT:
                result[key] = value
            if not complete:
                return result, index, False
            index = self.skip_ws(index)
            if index >= self.length:
                return result, index, False
            char = self.text[index]
            if char == "}":
                return result, index + 1, True
            if char != ",":
                raise _Invalid
            index = self.skip_ws(index + 1)
            if index >= self.length:
                return result, index, False


def repair_partial_json(fragment: Any) -> dict[str, Any] | None:
    """Parse a possibly incomplete JSON object; ``None`` if nothing sensible can be had
    (not a string, not an object, or text that can never become valid JSON)."""
    if not isinstance(fragment, str):
        return None
    try:
        complete = json.loads(fragment)
    except (ValueError, RecursionError):
        pass
    else:
        return complete if isinstance(complete, dict) else None

    parser = _Parser(fragment)
    try:
        index = parser.skip_ws(0)
        if index >= parser.length or fragment[index] != "{":
            return None
        value, index, complete = parser.value(index, 0)
    except (_Invalid, RecursionError):
        return None
    if complete and parser.skip_ws(index) < parser.length:
        return None  # trailing garbage after a complete object
    return value if isinstance(value, dict) else None
