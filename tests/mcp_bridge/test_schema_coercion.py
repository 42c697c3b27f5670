"""The host never checks arguments more strictly than the tool's server (issue 27;
docs/view-bridge.md §4c): what pydantic / zod servers coerce passes unchanged, clearly
invalid shapes and missing required properties are refused."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_bridge.errors import InvalidArguments
from mcp_bridge.schema import validate_arguments

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "count": {"type": "integer", "minimum": 1},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "level": {"enum": [1, 2, 3]},
        "name": {"type": "string"},
    },
    "required": ["count"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "arguments",
    [
        {"count": "7"},
        {"count": " -3 "},  # the server's own minimum is its to apply
        {"count": 7, "ratio": "2.5"},
        {"count": 7, "ratio": "1e3"},
        {"count": 7, "flag": "true"},
        {"count": 7, "flag": "off"},
        {"count": 7, "maybe": "4"},
        {"count": 7, "level": "2"},
    ],
)
def test_what_servers_coerce_passes(arguments):
    assert validate_arguments(arguments, SCHEMA) == []


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"count": "seven"}, "count: 'seven' is not of type 'integer'"),
        ({"count": "7.5"}, "count: '7.5' is not of type 'integer'"),
        ({"count": 7, "name": {"a": 1}}, "name: {'a': 1} is not of type 'string'"),
        ({"count": 7, "flag": "maybe"}, "flag: 'maybe' is not of type 'boolean'"),
        ({"count": 7, "level": "9"}, "level: '9' is not one of [1, 2, 3]"),
        ({}, "'count' is a required property"),
        (
            {"count": 7, "extra": 1},
            "Additional properties are not allowed ('extra' was unexpected)",
        ),
        ({"count": 0}, "count: 0 is less than the minimum of 1"),
    ],
)
def test_what_no_server_accepts_is_refused(arguments, problem):
    with pytest.raises(InvalidArguments) as caught:
        validate_arguments(arguments, SCHEMA)
    assert caught.value.problems == [problem]
