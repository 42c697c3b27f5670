"""The complexity measure of input schemas (mcp_bridge.schema.measure_input_schema): plain
unit tests, no Django. What it refuses, what it lets run inline, and that it stays
linear in the schema's size however exponential the schema."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from mcp_bridge.errors import InvalidArguments
from mcp_bridge.schema import (
    INLINE_BUDGET,
    INLINE_MAX_CHARS,
    MAX_EXPANDED_SUBSCHEMAS,
    MAX_FAN_OUT,
    MAX_REF_EXPANSIONS,
    MAX_SCHEMA_CHARS,
    MAX_SCHEMA_DEPTH,
    argument_nodes,
    measure_input_schema,
    validate_arguments,
    validates_inline,
)
from tests.fixtures.mcp_servers.schema_bombs import deep_choice_schema, nested_choice_schema

SEARCH = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "description": "What to look for"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 40}},
        "sort": {"enum": ["relevance", "date"]},
    },
    "required": ["query"],
    "additionalProperties": False,
}


def _nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


# ---- inline: cheap schemas, checked on the event loop -----------------------------------


def test_a_flat_schema_is_checked_inline_for_a_bounded_number_of_values() -> None:
    cost = measure_input_schema(SEARCH)
    assert cost.problem is None
    assert cost.expanded == 6 and cost.ref_expansions == 0 and not cost.recursive
    assert cost.heaviest > 0
    assert cost.inline_nodes == INLINE_BUDGET // (2 * cost.heaviest)
    assert cost.inline_nodes >= 100  # a usual call is far below


def test_no_schema_is_inline() -> None:
    assert measure_input_schema(None).inline_nodes > 0
    assert measure_input_schema({}).inline_nodes > 0


@pytest.mark.parametrize(
    "keyword,value",
    [
        ("anyOf", [{"type": "string"}, {"type": "integer"}]),
        ("oneOf", [{"type": "string"}]),
        ("allOf", [{"type": "string"}]),
        ("not", {"type": "null"}),
        ("if", {"type": "string"}),
        ("$ref", "#/$defs/x"),
        ("$dynamicRef", "#meta"),
        ("patternProperties", {"^x": {"type": "string"}}),
        ("unevaluatedProperties", False),
        ("contains", {"type": "string"}),
        ("uniqueItems", True),
        ("dependentSchemas", {"a": {"required": ["b"]}}),
    ],
)
def test_a_keyword_that_can_fan_out_sends_the_check_to_a_worker(keyword: str, value: Any) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {keyword: value}},
        "$defs": {"x": {"type": "string"}},
    }
    cost = measure_input_schema(schema)
    assert cost.problem is None
    assert cost.inline_nodes == 0


def test_a_property_named_like_a_keyword_is_just_a_property() -> None:
    schema = {"type": "object", "properties": {"anyOf": {"type": "string"}, "not": {}}}
    assert measure_input_schema(schema).inline_nodes > 0


def test_heavier_subschemas_allow_fewer_values_inline() -> None:
    light = measure_input_schema({"type": "array", "items": {"type": "integer"}})
    heavy = measure_input_schema({"type": "array", "items": {"enum": list(range(200))}})
    assert 0 < heavy.inline_nodes < light.inline_nodes
    assert heavy.heaviest > light.heaviest


def test_annotations_weigh_nothing() -> None:
    bare = measure_input_schema({"type": "string"})
    described = measure_input_schema(
        {"type": "string", "description": "x" * 5000, "title": "T", "examples": ["a"] * 100}
    )
    assert described.inline_nodes == bare.inline_nodes


def test_the_inline_bound_holds_for_arguments_it_admits() -> None:
    """The worst arguments a heavy inline schema admits cost about the budget: an enum of
    200 misses for every admitted value, a few milliseconds (not a timing assertion:
    the bound on values is what the measure promises)."""
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"enum": list(range(2, 202))}}}}  # fmt: skip
    cost = measure_input_schema(schema)
    values = cost.inline_nodes - 3
    arguments = {"a": [1] * values}
    text = json.dumps(arguments)
    assert validates_inline(text, cost.inline_nodes)
    assert not validates_inline(json.dumps({"a": [1] * (values + 10)}), cost.inline_nodes)
    with pytest.raises(InvalidArguments):
        validate_arguments(arguments, schema)


# ---- argument_nodes: an upper bound on values, from the JSON text -------------------------


def _count_values(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(1 + _count_values(v) for v in value.values())  # keys count too
    if isinstance(value, list):
        return 1 + sum(_count_values(v) for v in value)
    return 1


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"a": 1},
        {"a": [1, 2, 3], "b": {"c": None, "d": [[], {}]}},
        {"text": "commas, inside, strings [only] {loosen} the bound"},
        {"x": {"n": {"n": {"n": 5}}}},
        [1] * 100,
    ],
)
def test_argument_nodes_bounds_values_and_names(arguments: Any) -> None:
    text = json.dumps(arguments)
    # Every value, and every property name (propertyNames checks it), at most twice.
    assert 2 * argument_nodes(text) >= _count_values(arguments)


def test_large_arguments_are_never_inline() -> None:
    text = json.dumps({"t": "x" * INLINE_MAX_CHARS})
    assert not validates_inline(text, 10**9)
    assert validates_inline(json.dumps({"t": "x"}), 10)
    assert not validates_inline(json.dumps({"t": [1, 2, 3]}), 3)
    assert not validates_inline("{}", 0)


# ---- refused: past the caps ----------------------------------------------------------------


def test_exponential_refs_are_refused_and_the_measure_stays_linear() -> None:
    started = time.perf_counter()
    cost = measure_input_schema(deep_choice_schema(24))
    assert time.perf_counter() - started < 1  # ~2^24 subschemas are never walked one by one
    assert cost.problem == (
        "the tool's input schema is too complex to check: its $refs expand to more than "
        f"{MAX_EXPANDED_SUBSCHEMAS:,} subschemas"
    )
    assert cost.expanded == MAX_EXPANDED_SUBSCHEMAS + 1  # capped, not computed in full
    assert cost.chars < 2000  # small: size alone would never have caught it


def test_a_few_levels_of_choice_are_measured_not_refused() -> None:
    cost = measure_input_schema(deep_choice_schema(4))
    assert cost.problem is None
    # d0..d4: each anyOf node, its list's two $ref subschemas: 1 + 2·(1 + next).
    # Root 1 + x 1 + d0; each dᵢ is 1 + 2·(1 + dᵢ₊₁) (its anyOf of two $refs), d4 is 1.
    assert cost.expanded == 1 + 1 + (1 + 2 * (1 + (1 + 2 * (1 + (1 + 2 * (1 + (1 + 2 * 2)))))))
    assert cost.ref_expansions == 1 + 2 + 4 + 8 + 16
    assert cost.fan_out == 2 and cost.inline_nodes == 0


def test_too_many_ref_expansions_are_refused() -> None:
    # 101 properties refer to a definition whose 100 properties refer to another one.
    schema = {
        "type": "object",
        "properties": {f"q{j}": {"$ref": "#/$defs/t"} for j in range(101)},
        "$defs": {
            "s": {"type": "string"},
            "t": {"properties": {f"p{i}": {"$ref": "#/$defs/s"} for i in range(100)}},
        },
    }
    cost = measure_input_schema(schema)
    assert cost.problem and f"more than {MAX_REF_EXPANSIONS:,} $refs" in cost.problem
    assert cost.expanded < MAX_EXPANDED_SUBSCHEMAS and cost.chars < MAX_SCHEMA_CHARS


def test_a_recursive_schema_is_not_refused_but_never_inline() -> None:
    """Its cost grows with the arguments' nesting: only a deadline bounds it."""
    cost = measure_input_schema(nested_choice_schema())
    assert cost.problem is None and cost.recursive and cost.inline_nodes == 0
    tree = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            }
        },  # fmt: skip
        "$ref": "#/$defs/node",
    }
    cost = measure_input_schema(tree)
    assert cost.problem is None and cost.recursive and cost.inline_nodes == 0
    assert measure_input_schema({"properties": {"self": {"$ref": "#"}}}).recursive


def test_refs_to_anchors_and_escaped_pointers_are_followed() -> None:
    schema = {
        "properties": {"a": {"$ref": "#here"}, "b": {"$ref": "#/$defs/a~1b"}},
        "$defs": {"x": {"$anchor": "here", "type": "string"}, "a/b": {"type": "integer"}},
    }
    cost = measure_input_schema(schema)
    assert cost.ref_expansions == 2 and not cost.opaque_refs


def test_refs_the_measure_cannot_follow_go_to_a_worker() -> None:
    for schema in (
        {"properties": {"a": {"$ref": "https://example.com/schema.json"}}},
        {"properties": {"a": {"$ref": "#/nowhere"}}},
        {"properties": {"a": {"$id": "https://x/y", "$ref": "#/$defs/z"}}},
        {"properties": {"a": {"$dynamicRef": "#meta"}}},
    ):
        cost = measure_input_schema(schema)
        assert cost.opaque_refs and cost.problem is None and cost.inline_nodes == 0, schema


def test_deep_nesting_is_refused() -> None:
    ok = measure_input_schema(_nested(MAX_SCHEMA_DEPTH // 2 - 1))
    assert ok.problem is None
    deep = measure_input_schema(_nested(MAX_SCHEMA_DEPTH))
    assert deep.problem and f"nested more than {MAX_SCHEMA_DEPTH} levels" in deep.problem
    assert deep.keep is False  # not stored: the reason is
    # Far past the interpreter's recursion limit (json.dumps gives up): refused too.
    assert measure_input_schema(_nested(5000)).problem == deep.problem


def test_a_wide_combinator_is_refused() -> None:
    schema = {"anyOf": [{"const": i} for i in range(MAX_FAN_OUT + 1)]}
    cost = measure_input_schema(schema)
    assert cost.problem and f"has {MAX_FAN_OUT + 1} branches" in cost.problem
    assert measure_input_schema({"anyOf": [{"const": i} for i in range(50)]}).problem is None


def test_a_huge_schema_is_refused_by_size() -> None:
    schema = {"type": "object", "description": "x" * MAX_SCHEMA_CHARS}
    cost = measure_input_schema(schema)
    assert cost.problem and "KB long" in cost.problem and cost.keep is False


def test_unusable_schemas_are_measured_as_worker_checks_not_refusals() -> None:
    for schema in ([1, 2], "string", {"type": float("nan")}):
        cost = measure_input_schema(schema)
        assert cost.problem is None and cost.inline_nodes == 0
