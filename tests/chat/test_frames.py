"""Which decoded JSON holds U+0000 (chat/realtime/frames.py)."""

from __future__ import annotations

import json

import pytest

from chat.realtime.frames import contains_nul, frame_has_nul


@pytest.mark.parametrize(
    "value",
    ["a\x00b", {"k\x00": 1}, {"k": ["x", {"y": "\x00"}]}, [[[["\x00"]]]]],
)
def test_a_nul_in_any_string_or_key_is_found(value):
    assert contains_nul(value)
    assert frame_has_nul(json.dumps(value), value)


@pytest.mark.parametrize("value", ["a\\u0000", {"k": [1, 2.5, None, True]}, "", {}, 0])
def test_values_without_a_nul_pass(value):
    assert not contains_nul(value)
    assert not frame_has_nul(json.dumps(value), value)


def test_a_deep_value_is_walked_without_recursion():
    value: object = "\x00"
    for _ in range(100_000):  # far past the interpreter's recursion limit
        value = [value]
    assert contains_nul(value)
