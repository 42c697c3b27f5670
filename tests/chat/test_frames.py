"""Which decoded JSON holds text no database stores (chat/realtime/frames.py)."""

from __future__ import annotations

import json

import pytest

from chat.realtime.frames import frame_unstorable
from mcp_bridge.uimeta import unstorable


@pytest.mark.parametrize(
    "value",
    [
        "a\x00b",
        {"k\x00": 1},
        {"k": ["x", {"y": "\x00"}]},
        [[[["\x00"]]]],
        "lone \ud800",
        {"\udfff": 1},
    ],
)
def test_a_nul_or_lone_surrogate_in_any_string_or_key_is_found(value):
    assert unstorable(value)
    assert frame_unstorable(json.dumps(value), value)


@pytest.mark.parametrize(
    "value", ["a\\u0000", "paired \U0001f600", "é", {"k": [1, 2.5, None, True]}, "", {}, 0]
)
def test_storable_values_pass(value):
    assert not unstorable(value)
    assert not frame_unstorable(json.dumps(value), value)


def test_a_deep_value_is_walked_without_recursion():
    value: object = "\x00"
    for _ in range(100_000):  # far past the interpreter's recursion limit
        value = [value]
    assert unstorable(value)
