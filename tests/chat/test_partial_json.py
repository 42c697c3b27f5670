"""Unit tests for chat.partial_json (streamed tool-argument repair)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chat.partial_json import repair_partial_json


def consistent(partial: Any, final: Any) -> bool:
    """Is ``partial`` something ``final`` can grow into? Keys ⊆, arrays and strings are
    prefixes, everything else equal (with the same type: True is not 1)."""
    if isinstance(partial, dict):
        return isinstance(final, dict) and all(
            key in final and consistent(value, final[key]) for key, value in partial.items()
        )
    if isinstance(partial, list):
        return (
            isinstance(final, list)
            and len(partial) <= len(final)
            and all(consistent(a, b) for a, b in zip(partial, final, strict=False))
        )
    if isinstance(partial, str):
        return isinstance(final, str) and final.startswith(partial)
    return type(partial) is type(final) and partial == final


REAL_ARGUMENTS = [
    '{"query": "weather in Zürich", "units": "metric", "days": 3}',
    '{"path":"/tmp/a b/c.txt","content":"line 1\\nline 2\\t\\"quoted\\" \\\\ end","overwrite":false}',
    '{"items":[{"id":1,"tags":["a","b"]},{"id":2,"tags":[]}],"dryRun":true,"note":null}',
    '{\n  "sql": "SELECT * FROM t WHERE x = \'y\'",\n  "params": [1.5, -2, 3e10, 0],\n  "opts": {"timeout": 30}\n}',
    '{"emoji":"\\ud83d\\ude00 ok","accent":"caf\\u00e9","raw":"😀 é"}',
    '{"a":{"b":{"c":{"d":[[[]],[{}]]}}},"e":""}',
    '{"numbers":[0,-0.5,1E+2,12345678901234567890],"neg":-1}',
    "{}",
]


@pytest.mark.parametrize("final_text", REAL_ARGUMENTS)
def test_every_prefix_is_none_or_consistent(final_text: str) -> None:
    final = json.loads(final_text)
    for cut in range(len(final_text) + 1):
        partial = repair_partial_json(final_text[:cut])
        assert partial is None or (isinstance(partial, dict) and consistent(partial, final)), (
            final_text[:cut],
            partial,
        )
    assert repair_partial_json(final_text) == final


@pytest.mark.parametrize("final_text", REAL_ARGUMENTS)
def test_a_prefix_after_the_opening_brace_always_yields_a_dict(final_text: str) -> None:
    start = final_text.index("{") + 1
    for cut in range(start, len(final_text) + 1):
        assert isinstance(repair_partial_json(final_text[:cut]), dict), final_text[:cut]


@pytest.mark.parametrize(
    ("fragment", "expected"),
    [
        ("{", {}),
        ('{"query', {}),
        ('{"query"', {}),
        ('{"query":', {}),
        ('{"query": "cat', {"query": "cat"}),
        ('{"query": "cat"', {"query": "cat"}),
        ('{"query": "cat",', {"query": "cat"}),
        ('{"query": "cat", ', {"query": "cat"}),
        ('{"query": "cat", "li', {"query": "cat"}),
        ('{"n": 12', {}),
        ('{"n": 12,', {"n": 12}),
        ('{"n": 1.', {}),
        ('{"n": -', {}),
        ('{"n": 1e', {}),
        ('{"ok": tru', {"ok": True}),
        ('{"ok": f', {"ok": False}),
        ('{"ok": nul', {"ok": None}),
        ('{"ok": true', {"ok": True}),
        ('{"list": [', {"list": []}),
        ('{"list": [1, 2', {"list": [1]}),
        ('{"list": [1, 2,', {"list": [1, 2]}),
        ('{"list": ["a", "b', {"list": ["a", "b"]}),
        ('{"list": [{"x": 1}, {"y"', {"list": [{"x": 1}, {}]}),
        ('{"obj": {"inner": {"deep": "va', {"obj": {"inner": {"deep": "va"}}}),
        ('{"s": "a\\', {"s": "a"}),
        ('{"s": "a\\n', {"s": "a\n"}),
        ('{"s": "a\\u00', {"s": "a"}),
        ('{"s": "a\\u00e9', {"s": "aé"}),
        ('{"s": "\\ud83d', {"s": ""}),
        ('{"s": "\\ud83d\\ude00', {"s": "😀"}),
        ('{"s": "a\\\\', {"s": "a\\"}),
        ('{"s": "a\\\\\\', {"s": "a\\"}),
        ('{"s": "a\\\\u12', {"s": "a\\u12"}),
        ('  {  "k"  :  "v"  ', {"k": "v"}),
        ('{"a": 1}', {"a": 1}),
    ],
)
def test_specific_repairs(fragment: str, expected: dict[str, Any]) -> None:
    assert repair_partial_json(fragment) == expected


@pytest.mark.parametrize(
    "fragment",
    [
        "",
        "   ",
        "[1, 2",
        '"just a string',
        "42",
        "nul",
        "[]",
        '{"a": 1} trailing',
        '{"a" 1',
        '{"a": 01}',
        '{"a": 1x',
        '{"a": [1,]',
        '{"a": 1,}',
        "{'a': 1}",
        '{"a": tx',
        '{"a": "bad \\q escape',
        "{a: 1}",
        "}",
        '{"a": ]',
    ],
)
def test_hopeless_fragments_return_none(fragment: str) -> None:
    assert repair_partial_json(fragment) is None


@pytest.mark.parametrize("fragment", [None, 5, b'{"a": 1}', ["{"], {"a": 1}])
def test_non_string_input(fragment: Any) -> None:
    assert repair_partial_json(fragment) is None


def test_deeply_nested_fragment_does_not_crash() -> None:
    assert repair_partial_json('{"a": ' + "[" * 100_000) is None
    assert repair_partial_json('{"a": ' + "[" * 50) == {
        "a": [
            [
                [
                    [
                        [
                            [
                                [
                                    [
                                        [
                                            [
                                                [
                                                    [
                                                        [
                                                            [
                                                                [
                                                                    [
                                                                        [
                                                                            [
                                                                                [
                                                                                    [
                                                                                        [
                                                                                            [
                                                                                                [
                                                                                                    [
                                                                                                        [
                                                                                                            [
                                                                                                                [
                                                                                                                    [
                                                                                                                        [
                                                                                                                            [
                                                                                                                                [
                                                                                                                                    [
                                                                                                                                        [
                                                                                                                                            [
                                                                                                                                                [
                                                                                                                                                    [
                                                                                                                                                        [
                                                                                                                                                            [
                                                                                                                                                                [
                                                                                                                                                                    [
                                                                                                                                                                        [
                                                                                                                                                                            [
                                                                                                                                                                                [
                                                                                                                                                                                    [
                                                                                                                                                                                        [
                                                                                                                                                                                            [
                                                                                                                                                                                                [
                                                                                                                                                                                                    [
                                                                                                                                                                                                        [
                                                                                                                                                                                                            []
                                                                                                                                                                                                        ]
                                                                                                                                                                                                    ]
                                                                                                                                                                                                ]
                                                                                                                                                                                            ]
                                                                                                                                                                                        ]
                                                                                                                                                                                    ]
                                                                                                                                                                                ]
                                                                                                                                                                            ]
                                                                                                                                                                        ]
                                                                                                                                                                    ]
                                                                                                                                                                ]
                                                                                                                                                            ]
                                                                                                                                                        ]
                                                                                                                                                    ]
                                                                                                                                                ]
                                                                                                                                            ]
                                                                                                                                        ]
                                                                                                                                    ]
                                                                                                                                ]
                                                                                                                            ]
                                                                                                                        ]
                                                                                                                    ]
                                                                                                                ]
                                                                                                            ]
                                                                                                        ]
                                                                                                    ]
                                                                                                ]
                                                                                            ]
                                                                                        ]
                                                                                    ]
                                                                                ]
                                                                            ]
                                                                        ]
                                                                    ]
                                                                ]
                                                            ]
                                                        ]
                                                    ]
                                                ]
                                            ]
                                        ]
                                    ]
                                ]
                            ]
                        ]
                    ]
                ]
            ]
        ]
    }


def test_long_streamed_string_is_fast() -> None:
    import time

    fragment = '{"content": "' + ("lorem ipsum dolor sit amet " * 40_000)  # ~1 MB
    started = time.perf_counter()
    result = repair_partial_json(fragment)
    assert time.perf_counter() - started < 0.5
    assert result is not None and result["content"].startswith("lorem ipsum")
