"""Unit tests for mcp_bridge.errors and mcp_bridge.schema."""

from __future__ import annotations

import json
import logging
import pickle
from typing import Any

import pytest

from mcp_bridge import errors
from mcp_bridge.errors import (
    ERROR_CLASSES,
    BridgeError,
    Cancelled,
    InvalidArguments,
    InvalidResource,
    ResourceNotFound,
    ServerCrashed,
    ServerDisabled,
    ServerUnavailable,
    ToolNotFound,
    ToolReturnedError,
    ToolTimeout,
)
from mcp_bridge.schema import check_input_schema, validate_arguments

# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("error", "code", "message"),
    [
        (
            ServerUnavailable("search"),
            "server_unavailable",
            "The tool server 'search' is not running or cannot be reached.",
        ),
        (
            ServerUnavailable(),
            "server_unavailable",
            "The tool server is not running or cannot be reached.",
        ),
        (
            ServerDisabled("search"),
            "server_disabled",
            "The tool server 'search' is disabled by an administrator.",
        ),
        (
            ToolNotFound("lookup", server="search"),
            "tool_not_found",
            "The tool 'lookup' does not exist on server 'search'.",
        ),
        (ToolNotFound(), "tool_not_found", "The tool does not exist."),
        (
            ToolTimeout("lookup", timeout_seconds=30),
            "tool_timeout",
            "The tool 'lookup' did not answer within 30 seconds.",
        ),
        (ToolTimeout(), "tool_timeout", "The tool did not answer in time."),
        (
            ServerCrashed("search"),
            "server_crashed",
            "The tool server 'search' stopped while handling the request; it will be restarted.",
        ),
        (
            ToolReturnedError("lookup", detail="quota exceeded"),
            "tool_returned_error",
            "The tool 'lookup' reported an error: quota exceeded",
        ),
        (ToolReturnedError(), "tool_returned_error", "The tool reported an error."),
        (
            ResourceNotFound("ui://a/b"),
            "resource_not_found",
            "The resource 'ui://a/b' was not found.",
        ),
        (
            InvalidResource("ui://a/b", reason="unsupported MIME type image/png"),
            "invalid_resource",
            "The resource 'ui://a/b' cannot be shown: unsupported MIME type image/png",
        ),
        (Cancelled(), "cancelled", "The request was cancelled."),
        (
            Cancelled(reason="the user stopped it"),
            "cancelled",
            "The request was cancelled: the user stopped it",
        ),
        (BridgeError(), "bridge_error", "The tool server could not handle the request."),
    ],
)
def test_error_codes_and_messages(error: BridgeError, code: str, message: str) -> None:
    assert error.code == code
    assert error.user_message == message
    assert str(error) == message
    as_dict = error.to_dict()
    assert as_dict["code"] == code and as_dict["message"] == message
    assert isinstance(as_dict["details"], dict)
    json.dumps(as_dict)


def test_details_carry_context_without_nones() -> None:
    assert ToolTimeout("t", timeout_seconds=2.5, server="s").to_dict() == {
        "code": "tool_timeout",
        "message": "The tool 't' did not answer within 2.5 seconds.",
        "details": {"tool": "t", "server": "s", "timeoutSeconds": 2.5},
    }
    assert ServerUnavailable().details == {}


def test_invalid_arguments_lists_problems() -> None:
    error = InvalidArguments(["a: wrong", "b: wrong", "c: wrong", "d: wrong"], tool="search")
    assert error.problems == ["a: wrong", "b: wrong", "c: wrong", "d: wrong"]
    assert error.user_message == (
        "The arguments for the tool 'search' are not valid: a: wrong; b: wrong; c: wrong (and 1 more)"
    )
    assert error.to_dict()["details"] == {"tool": "search", "problems": error.problems}
    assert InvalidArguments().user_message == "The tool arguments are not valid."
    assert len(InvalidArguments([f"p{i}" for i in range(100)]).problems) == 20


def test_custom_user_message_and_subclassing() -> None:
    error = ToolNotFound("x", user_message="Nope.")
    assert str(error) == "Nope."
    assert isinstance(error, BridgeError)
    with pytest.raises(BridgeError):
        raise ServerCrashed("s")


def test_every_class_is_registered_with_a_unique_code() -> None:
    classes = [
        obj
        for obj in vars(errors).values()
        if isinstance(obj, type) and issubclass(obj, BridgeError)
    ]
    assert set(ERROR_CLASSES.values()) == set(classes)
    assert len(ERROR_CLASSES) == len(classes) == 15  # codes are unique


def test_jsonrpc_error_and_retryability() -> None:
    assert InvalidArguments(["x"]).to_jsonrpc_error()["code"] == -32602
    assert ToolTimeout().to_jsonrpc_error()["code"] == -32001
    assert ResourceNotFound("ui://x").to_jsonrpc_error()["code"] == -32002
    assert ServerCrashed().to_jsonrpc_error()["data"]["code"] == "server_crashed"
    assert ServerUnavailable.retryable and ToolTimeout.retryable
    assert not InvalidArguments.retryable and not ToolNotFound.retryable


@pytest.mark.parametrize(
    "error",
    [
        InvalidArguments(["a"], tool="t"),
        ToolTimeout("t", timeout_seconds=3),
        ServerUnavailable("s", reason="ECONNREFUSED"),
    ],
)
def test_errors_survive_pickling(error: BridgeError) -> None:
    restored = pickle.loads(pickle.dumps(error))
    assert type(restored) is type(error)
    assert restored.to_dict() == error.to_dict()
    assert str(restored) == str(error)


# --------------------------------------------------------------------------- schema

SEARCH_SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": 20},
        "limit": {"type": "integer", "minimum": 1},
        "filters": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"field": {"type": "string"}},
                "required": ["field"],
            },
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}


def test_valid_arguments_pass() -> None:
    assert validate_arguments({"query": "cats", "limit": 3}, SEARCH_SCHEMA) == []
    assert validate_arguments({"anything": 1}, None) == []


def test_invalid_arguments_raise_with_readable_problems() -> None:
    with pytest.raises(InvalidArguments) as caught:
        validate_arguments(
            {"query": "", "limit": "three", "filters": [{"x": 1}], "extra": True},
            SEARCH_SCHEMA,
            tool="search",
        )
    problems = caught.value.problems
    assert "Additional properties are not allowed ('extra' was unexpected)" in problems
    assert "query: '' should be non-empty" in problems
    assert "limit: 'three' is not of type 'integer'" in problems
    assert "filters[0]: 'field' is a required property" in problems
    assert caught.value.details["tool"] == "search"


def test_missing_required_argument() -> None:
    with pytest.raises(InvalidArguments) as caught:
        validate_arguments({}, SEARCH_SCHEMA)
    assert caught.value.problems == ["'query' is a required property"]


@pytest.mark.parametrize(
    ("arguments", "kind"),
    [([1], "an array"), ("q", "a string"), (5, "a number"), (True, "a boolean")],
)
def test_arguments_must_be_an_object(arguments: Any, kind: str) -> None:
    with pytest.raises(InvalidArguments) as caught:
        validate_arguments(arguments, SEARCH_SCHEMA)
    assert caught.value.problems == [f"arguments must be a JSON object, not {kind}"]


def test_none_arguments_count_as_empty_object() -> None:
    assert validate_arguments(None, {"type": "object"}) == []
    with pytest.raises(InvalidArguments):
        validate_arguments(None, SEARCH_SCHEMA)


def test_non_string_argument_names() -> None:
    with pytest.raises(InvalidArguments):
        validate_arguments({1: "x"}, {"type": "object"})


def test_long_values_are_shortened_in_problems() -> None:
    with pytest.raises(InvalidArguments) as caught:
        validate_arguments({"query": "x" * 10_000}, SEARCH_SCHEMA)
    assert all(len(problem) <= 300 for problem in caught.value.problems)


def test_problem_count_is_bounded() -> None:
    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    with pytest.raises(InvalidArguments) as caught:
        validate_arguments({f"k{i}": "x" for i in range(500)}, schema)
    assert len(caught.value.problems) == 20


@pytest.mark.parametrize(
    ("schema", "warning_part"),
    [
        ({"type": "bogus"}, "input schema is invalid"),
        ({"properties": {"a": {"pattern": "("}}}, "input schema is invalid"),
        ({"$ref": "https://schemas.example.com/remote.json"}, "could not be applied"),
        ({"$ref": "#/$defs/missing"}, "could not be applied"),
        ({"$schema": ["not", "a", "string"]}, "unusable $schema"),
        ({"type": "object", "x": float("nan")}, "not valid JSON"),
        ({"type": "object", "x": {1, 2}}, "not valid JSON"),
        ("not a schema", "not a JSON object"),
        ([{"type": "object"}], "not a JSON object"),
    ],
)
def test_broken_server_schema_skips_validation_and_reports(
    schema: Any, warning_part: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="mcp_bridge.schema"):
        warnings = validate_arguments({"a": "x"}, schema, tool="broken")
    assert len(warnings) == 1 and warning_part in warnings[0]
    assert "broken" in caplog.text


def test_check_input_schema() -> None:
    assert check_input_schema(SEARCH_SCHEMA) is None
    assert check_input_schema(None) is None
    assert "invalid" in (check_input_schema({"type": 5}) or "")


def test_declared_older_draft_is_honoured() -> None:
    # Draft 4 uses boolean exclusiveMaximum; 2020-12 would reject this schema as invalid.
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {"n": {"type": "number", "maximum": 5, "exclusiveMaximum": True}},
    }
    assert validate_arguments({"n": 4}, schema) == []
    with pytest.raises(InvalidArguments):
        validate_arguments({"n": 5}, schema)


def test_deeply_nested_arguments_do_not_crash() -> None:
    nested: Any = "leaf"
    for _ in range(3000):
        nested = [nested]
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/node"}},
        "$defs": {
            "node": {
                "anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#/$defs/node"}}]
            }
        },
    }
    try:
        result = validate_arguments({"a": nested}, schema)
    except InvalidArguments as error:
        assert error.problems == ["arguments are nested too deeply"]
    else:
        assert result == []
