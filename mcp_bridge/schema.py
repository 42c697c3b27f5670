"""Validation of tool-call arguments against a tool's ``inputSchema`` (pure, no Django).

The schema comes from the MCP server and is untrusted: a broken schema must never block a
call or crash the bridge, so it is reported (return value + log) and validation is skipped
— the server still validates on its side. Arguments that violate a valid schema raise
``InvalidArguments`` with short, readable problems. JSON Schema Draft 2020-12 is the
default dialect (MCP's); a declared ``$schema`` selects another known draft. Remote
``$ref``s are never fetched.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import re2
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend, validator_for

from mcp_bridge.errors import InvalidArguments

logger = logging.getLogger(__name__)

MAX_PROBLEMS = 20
MAX_PROBLEM_LENGTH = 300


class SchemaTooComplex(InvalidArguments):
    """The check of a call's arguments passed its deadline (or its memory): refused."""

    code = "schema_too_complex"

    def __init__(self, *, tool: str | None = None) -> None:
        subject = f"the tool '{tool}'" if tool else "this tool"
        super().__init__(
            ["the server's input schema is too complex to check in time"],
            tool=tool,
            user_message=f"The server's input schema for {subject} is too complex to check in "
            "time; the call was not made.",
        )


class SchemaRefused(InvalidArguments):
    """The tool's schema was refused when the catalogue was read: it cannot be called."""

    code = "schema_refused"

    def __init__(self, reason: str, *, tool: str | None = None) -> None:
        subject = f"The tool '{tool}'" if tool else "This tool"
        super().__init__([reason], tool=tool, user_message=f"{subject} cannot be called: {reason}.")


class SchemaCheckFailed(InvalidArguments):
    """No worker could check the arguments (busy, or it did not start): refused."""

    code = "schema_check_failed"

    def __init__(self, reason: str, *, tool: str | None = None) -> None:
        super().__init__([reason], tool=tool, user_message=f"{reason[:1].upper()}{reason[1:]}.")


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    return f"a {type(value).__name__}"


# ---- regular expressions from the server: RE2 (linear time), never a backtracking engine
#
# A server's `pattern` such as ``^(a+)+$`` takes exponential time in Python's `re` on
# "aaaa…b", holding the GIL: every socket of the process would stall (ReDoS). Patterns run
# in RE2 instead; one RE2 cannot express (backreferences, lookaround) is not applied, like
# any other unusable part of a schema (the server still validates on its side).

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_RE2_OPTIONS.max_mem = 8 << 20  # bytes of automaton per pattern


@functools.lru_cache(maxsize=512)
def _re2(pattern: str) -> Any:
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except Exception:  # re2.error, and anything a hostile pattern provokes
        return None


def _search(pattern: Any, text: str) -> bool | None:
    """Whether ``pattern`` matches somewhere in ``text``; None if RE2 cannot run it."""
    compiled = _re2(pattern) if isinstance(pattern, str) else None
    return None if compiled is None else compiled.search(text) is not None


def _brief(value: Any) -> str:
    text = str(value)
    return repr(text if len(text) <= 60 else text[:59] + "…")


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and _search(pattern, instance) is False:
        yield ValidationError(f"{_brief(instance)} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = sorted(
        (
            key
            for key in instance
            if key not in known and not any(_search(p, key) for p in patterns)
        ),
        key=str,
    )
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        # jsonschema's own wording.
        shown = ", ".join(_brief(each) for each in extras[:10])
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            regexes = ", ".join(repr(each) for each in sorted(patterns))
            yield ValidationError(f"{shown} {verb} not match any of the regexes: {regexes}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({shown} {verb} unexpected)"
            )


_SAFE_KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
}


def _uses(schema: Any, *keywords: str) -> set[str]:
    """Which of ``keywords`` appear anywhere in ``schema`` (bounded walk)."""
    found: set[str] = set()
    stack, seen = [schema], 0
    while stack and seen < 10_000:
        node = stack.pop()
        seen += 1
        if isinstance(node, dict):
            found.update(k for k in keywords if k in node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


@functools.lru_cache(maxsize=256)
def _compile(schema_json: str) -> tuple[Validator | None, str | None]:
    """Build (and cache) a validator for a canonical schema JSON string."""
    schema = json.loads(schema_json)
    if _uses(schema, "patternProperties", "unevaluatedProperties") == {
        "patternProperties",
        "unevaluatedProperties",
    }:
        # jsonschema evaluates these together with Python's `re`: not applied (see above).
        return None, "the tool's input schema combines patternProperties and unevaluatedProperties"
    try:
        validator_class = validator_for(schema, default=Draft202012Validator)
    except Exception:  # e.g. a non-string "$schema"
        return None, "the tool's input schema declares an unusable $schema"
    try:
        validator_class.check_schema(schema)
    except SchemaError as exc:
        return None, f"the tool's input schema is invalid: {_shorten(exc.message)}"
    except Exception as exc:  # a pathological schema must not take the bridge down
        return None, f"the tool's input schema could not be checked ({type(exc).__name__})"
    safe_class = _safe_classes.get(validator_class)
    if safe_class is None:
        safe_class = extend(validator_class, _SAFE_KEYWORDS)
        _safe_classes[validator_class] = safe_class
    return safe_class(schema), None


_safe_classes: dict[Any, Any] = {}


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_PROBLEM_LENGTH else text[: MAX_PROBLEM_LENGTH - 1] + "…"


def compile_input_schema(input_schema: Any) -> tuple[Validator | None, str | None]:
    """``(validator, None)`` for a usable schema, ``(None, warning)`` otherwise, and
    ``(None, None)`` when there is no schema at all."""
    if input_schema is None:
        return None, None
    if not isinstance(input_schema, Mapping):
        return None, "the tool's input schema is not a JSON object"
    try:
        canonical = json.dumps(input_schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None, "the tool's input schema is not valid JSON"
    return _compile(canonical)


def check_input_schema(input_schema: Any) -> str | None:
    """The problem with a server's input schema, or ``None`` if it is usable (or absent).
    Meant for the tool catalogue, to flag broken tools when they are listed."""
    return compile_input_schema(input_schema)[1]


def _path(parts: Iterable[Any]) -> str:
    rendered = ""
    for part in parts:
        if isinstance(part, int):
            rendered += f"[{part}]"
        else:
            rendered += f".{part}" if rendered else str(part)
    return rendered


def _problem(error: ValidationError) -> str:
    path = _path(error.absolute_path)
    return _shorten(f"{path}: {error.message}" if path else error.message)


def validate_arguments(arguments: Any, input_schema: Any, *, tool: str | None = None) -> list[str]:
    """Validate tool-call ``arguments`` against ``input_schema``.

    Raises ``InvalidArguments`` when the arguments are not a JSON object or violate the
    schema. ``None`` arguments count as ``{}`` (MCP lets a call omit them). Returns the
    warnings about the schema itself (empty list = fully validated); each is also logged.
    """
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise InvalidArguments(
            [f"arguments must be a JSON object, not {_describe(arguments)}"], tool=tool
        )
    bad_keys = [key for key in arguments if not isinstance(key, str)]
    if bad_keys:
        raise InvalidArguments(["argument names must be strings"], tool=tool)

    validator, warning = compile_input_schema(input_schema)
    if validator is None:
        if warning:
            logger.warning("Skipping argument validation for tool %r: %s", tool, warning)
            return [warning]
        return []

    try:
        errors = list(itertools.islice(validator.iter_errors(arguments), MAX_PROBLEMS))
    except RecursionError:
        raise InvalidArguments(["arguments are nested too deeply"], tool=tool) from None
    except Exception as exc:  # unresolvable $ref, broken regex pattern, ...
        warning = f"the tool's input schema could not be applied ({type(exc).__name__})"
        logger.warning("Skipping argument validation for tool %r: %s", tool, warning)
        return [warning]
    errors = [error for error in errors if not _server_would_coerce(error)]
    if errors:
        raise InvalidArguments([_problem(error) for error in errors], tool=tool)
    return []


# ---- the server is the authority on its own schema (docs/view-bridge.md §4c)
#
# A host that refuses what the tool's server would accept breaks real apps: forms send
# every field as text ("7" for an integer field, the ``"{{ field }}"`` pattern), and the
# servers they talk to coerce it (pydantic's lax mode, zod's ``z.coerce``, FastMCP). So a
# violation is dropped when the value is a string those servers turn into the expected
# type: an integer or number written in decimal, ``"true"``/``"false"`` for a boolean —
# in ``type``, ``enum`` and ``const`` (then compared as the coerced value), and a branch
# of ``anyOf``/``oneOf`` whose only problems are such strings. The value is passed on
# unchanged: the server coerces it, and answers any further rule (``minimum``…) itself.
# Everything else stays a refusal: a value of a JSON type no server coerces (an object
# for a string), a missing required property (no coercion makes it present: the call
# is refused before anyone is asked to approve it), extra properties the schema forbids.

_INTEGER_TEXT = re2.compile(r"^\s*[-+]?[0-9]{1,300}\s*$")
_NUMBER_TEXT = re2.compile(
    r"^\s*[-+]?([0-9]{1,300}(\.[0-9]{0,300})?|\.[0-9]{1,300})([eE][-+]?[0-9]{1,3})?\s*$"
)
# pydantic's lax booleans (zod's z.coerce.boolean takes any string).
_BOOLEAN_TEXT = {
    **dict.fromkeys(("true", "t", "yes", "y", "on", "1"), True),
    **dict.fromkeys(("false", "f", "no", "n", "off", "0"), False),
}


def _coerced(value: Any, wanted: str) -> tuple[bool, Any]:
    """(True, the value a lax server reads) when ``value`` is text it coerces to ``wanted``."""
    if not isinstance(value, str) or len(value) > 320:
        return False, None
    if wanted == "integer" and _INTEGER_TEXT.match(value):
        return True, int(value)
    if wanted == "number" and _NUMBER_TEXT.match(value):
        return True, float(value)
    if wanted == "boolean" and value.strip().lower() in _BOOLEAN_TEXT:
        return True, _BOOLEAN_TEXT[value.strip().lower()]
    return False, None


def _coercions(value: Any) -> list[Any]:
    found: list[Any] = []
    for wanted in ("integer", "number", "boolean"):
        ok, coerced = _coerced(value, wanted)
        if ok:
            found.append(coerced)
    return found


def _server_would_coerce(error: ValidationError, depth: int = 0) -> bool:
    """Whether ``error`` only says that a string is not yet the number or boolean the
    server reads it as (bounded: at most 8 nested ``anyOf``/``oneOf``)."""
    kind, instance, expected = error.validator, error.instance, error.validator_value
    if kind == "type":
        types = [expected] if isinstance(expected, str) else list(expected or [])
        return any(_coerced(instance, t)[0] for t in types if isinstance(t, str))
    if kind == "enum" and isinstance(expected, list):
        return any(c in expected for c in _coercions(instance))
    if kind == "const":
        return any(c == expected for c in _coercions(instance))
    if kind in ("anyOf", "oneOf") and error.context and depth < 8:
        branches: dict[Any, list[ValidationError]] = {}
        for sub in error.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        return any(
            all(_server_would_coerce(sub, depth + 1) for sub in subs) for subs in branches.values()
        )
    return False


# ---- how much work a schema can cause: measured once, when the catalogue is read
#
# Validating against a schema with ``$ref`` and combinators can take time exponential in
# the schema (``anyOf`` of two ``$ref``s to a definition that does the same, 24 levels
# deep: minutes on one small argument) or in the arguments (such a definition that
# refers to itself through ``properties``: each level of nesting doubles the work). So
# the measure below, pure and linear in the schema's size, sorts each tool's schema when
# its server's catalogue is read:
#
# - **refused** beyond a cap (size, nesting, subschemas visited with every ``$ref``
#   expanded, ``$ref`` expansions, branches of one combinator): the tool is listed but
#   cannot be called, and the reason is shown to the admin;
# - **inline** when its cost is provably linear in the arguments: no ``$ref``, no
#   combinator or conditional, nothing that evaluates one value against several
#   subschemas. Then every value of the arguments (and every property name, through
#   ``propertyNames``) meets at most one subschema, so checking ``n`` values costs at most
#   ``2 · n · heaviest`` units, where ``heaviest`` is the weight of the heaviest subschema
#   (its keywords, its enum, its property and required lists; one unit ≈ 1.5 µs of
#   jsonschema). Arguments of up to ``inline_nodes = INLINE_BUDGET // (2 · heaviest)``
#   values (``argument_nodes`` counts them from their JSON text) are checked on the event
#   loop: at most INLINE_BUDGET units, a few milliseconds at the very worst;
# - everything else is checked in a worker process with a deadline
#   (``mcp_bridge.schema_pool``), whatever it costs.

MAX_SCHEMA_CHARS = 256 * 1024
MAX_SCHEMA_DEPTH = 64  # nesting of JSON objects and arrays in the schema document
MAX_EXPANDED_SUBSCHEMAS = 50_000
MAX_REF_EXPANSIONS = 10_000
MAX_FAN_OUT = 1_000  # branches of one allOf / anyOf / oneOf
INLINE_BUDGET = 2_000  # units (≈ 1.5 µs each)
INLINE_MAX_CHARS = 8 * 1024

_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
_COMBINATORS = ("allOf", "anyOf", "oneOf")
# Keywords whose value is one subschema, a list of them, or a map of them.
_ONE_SCHEMA = frozenset(
    {
        "additionalProperties",
        "additionalItems",
        "items",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    }
)
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas", "dependencies"})
_DEFINITIONS = frozenset({"$defs", "definitions"})
# Keywords that make one value meet several subschemas, re-walk them (unevaluated*), or
# cost more than linear time (uniqueItems compares pairs of items that cannot be sorted).
_NOT_INLINE = frozenset(
    {
        *_REF_KEYWORDS,
        *_COMBINATORS,
        "not",
        "if",
        "then",
        "else",
        "contains",
        "dependentSchemas",
        "dependencies",
        "patternProperties",
        "unevaluatedItems",
        "unevaluatedProperties",
        "uniqueItems",
    }
)
# Keywords a validation never evaluates (annotations): they weigh nothing.
_ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "$anchor",
        "$comment",
        "$vocabulary",
        "$defs",
        "definitions",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "format",
        "contentMediaType",
        "contentEncoding",
    }
)


@dataclass(frozen=True)
class SchemaCost:
    """What checking arguments against a schema can cost (see above)."""

    chars: int = 0  # canonical JSON size
    depth: int = 0  # JSON nesting of the document
    subschemas: int = 0  # schema objects in the document
    expanded: int = 0  # subschemas one evaluation visits, $refs expanded (capped)
    ref_expansions: int = 0  # $refs followed doing so (capped)
    fan_out: int = 0  # branches of the widest allOf / anyOf / oneOf
    recursive: bool = False  # a $ref leads back into itself: cost grows with the arguments
    opaque_refs: bool = False  # a $ref the measure does not follow
    heaviest: int = 0  # weight of the heaviest subschema (units)
    inline_nodes: int = 0  # arguments of up to this many values are checked inline
    problem: str | None = None  # why the schema is refused, or None
    keep: bool = True  # False: too big or too deep to store; the reason is stored instead


def _refused(cost: dict[str, Any], why: str, *, keep: bool = True) -> SchemaCost:
    problem = f"the tool's input schema is too complex to check: {why}"
    return SchemaCost(**cost, problem=problem, keep=keep)


_TOO_DEEP = f"it is nested more than {MAX_SCHEMA_DEPTH} levels deep"


def _document_shape(document: Any) -> tuple[int, int]:
    """(depth, objects) of a JSON document, iteratively; stops counting past the cap."""
    depth = objects = 0
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            objects += 1
            children: Iterable[Any] = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        depth = max(depth, level)
        if depth > MAX_SCHEMA_DEPTH:
            break
        stack.extend((child, level + 1) for child in children if isinstance(child, dict | list))
    return depth, objects


def _subschemas(node: dict[str, Any]) -> Iterator[Any]:
    """The subschemas a validation may evaluate directly below ``node`` (not $defs)."""
    for key, value in node.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            yield from (each for each in value.values() if isinstance(each, dict))
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            yield from (each for each in value if isinstance(each, dict))
        elif key in _ONE_SCHEMA and isinstance(value, dict):
            yield value


def _weight(node: dict[str, Any]) -> int:
    """Units one value costs against ``node`` alone (its subschemas not included)."""
    weight = 2  # jsonschema's descent into a subschema
    for key, value in node.items():
        if key in _ANNOTATIONS:
            continue
        weight += 1
        if key in ("enum", "const"):
            members = len(value) if key == "enum" and isinstance(value, list) else 1
            weight += members // 4 + len(json.dumps(value, default=str)) // 64
        elif isinstance(value, list | dict):
            weight += len(value) // 8  # properties, required, dependentRequired, type
    return weight


def _pointer(document: Any, ref: str, anchors: Mapping[str, Any]) -> Any:
    """The target of a same-document ``$ref`` ("#", "#/json/pointer", "#anchor"), or None."""
    if not ref.startswith("#"):
        return None
    fragment = urllib.parse.unquote(ref[1:])
    if not fragment.startswith("/"):
        return anchors.get(fragment) if fragment else document
    node = document
    for token in fragment[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node if isinstance(node, dict) else None


def _anchors(document: Any) -> tuple[dict[str, Any], bool]:
    """``$anchor`` names → their subschemas, and whether a subschema below the root sets
    its own ``$id`` (then "#…" references are relative to it: not followed here)."""
    anchors: dict[str, Any] = {}
    nested_id = False
    stack: list[tuple[Any, bool]] = [(document, True)]
    while stack:
        node, is_root = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("$anchor"), str):
                anchors[node["$anchor"]] = node
            if not is_root and isinstance(node.get("$id"), str):
                nested_id = True
            stack.extend((child, False) for child in node.values())
        elif isinstance(node, list):
            stack.extend((child, False) for child in node)
    return anchors, nested_id


def _expand(document: dict[str, Any]) -> dict[str, Any]:
    """Walk the schema as a validation does, $refs expanded: how many subschemas one
    evaluation of one value can visit, how many $refs it follows, whether a $ref leads
    back into itself, and the widest combinator. Each subschema is walked once (its
    totals are remembered), so the walk is linear even when the totals are exponential;
    totals are capped just past their limits. Iterative: no recursion limit to reach."""
    anchors, nested_id = _anchors(document)
    cap_visits, cap_refs = MAX_EXPANDED_SUBSCHEMAS + 1, MAX_REF_EXPANSIONS + 1
    done: dict[int, tuple[int, int]] = {}  # id(node) → (visits, refs) below and at it
    open_nodes: set[int] = set()
    found = {"recursive": False, "opaque_refs": False, "fan_out": 0}

    def edges(node: dict[str, Any]) -> list[tuple[dict[str, Any], int]]:
        """Children of a subschema: (child, 1 if reached through a $ref else 0)."""
        out = [(child, 0) for child in _subschemas(node)]
        for keyword in _REF_KEYWORDS:
            ref = node.get(keyword)
            if ref is None:
                continue
            # $dynamicRef / $recursiveRef and $refs below a nested $id: not followed.
            target = None
            if keyword == "$ref" and isinstance(ref, str) and not nested_id:
                target = _pointer(document, ref, anchors)
            if target is None:
                found["opaque_refs"] = True
            else:
                out.append((target, 1))
        for keyword in _COMBINATORS:
            branches = node.get(keyword)
            if isinstance(branches, list):
                found["fan_out"] = max(found["fan_out"], len(branches))
        return out

    # Post-order walk: a frame is (node, its pending children, visits, refs so far).
    stack: list[tuple[dict[str, Any], list[tuple[dict[str, Any], int]], int, int]] = []
    open_nodes.add(id(document))
    stack.append((document, edges(document), 1, 0))
    while True:
        node, pending, visits, refs = stack[-1]
        if pending:
            child, via_ref = pending.pop()
            key = id(child)
            if key in done:
                child_visits, child_refs = done[key]
                stack[-1] = (
                    node,
                    pending,
                    min(visits + child_visits, cap_visits),
                    min(refs + child_refs + via_ref, cap_refs),
                )
            elif key in open_nodes:  # a $ref back into an enclosing subschema
                found["recursive"] = True
                stack[-1] = (node, pending, visits, min(refs + via_ref, cap_refs))
            else:
                open_nodes.add(key)
                # The parent's refs count the $ref to this child once it is done.
                stack[-1] = (node, pending, visits, min(refs + via_ref, cap_refs))
                stack.append((child, edges(child), 1, 0))
            continue
        stack.pop()
        open_nodes.discard(id(node))
        done[id(node)] = (visits, refs)
        if not stack:
            return {"expanded": visits, "ref_expansions": refs, **found}
        parent, parent_pending, parent_visits, parent_refs = stack[-1]
        stack[-1] = (
            parent,
            parent_pending,
            min(parent_visits + visits, cap_visits),
            min(parent_refs + refs, cap_refs),
        )


def _inline_weight(document: dict[str, Any]) -> int | None:
    """The heaviest subschema's weight if the schema may be checked inline, else None."""
    heaviest = 0
    stack: list[Any] = [document]
    while stack:
        node = stack.pop()
        if _NOT_INLINE.intersection(node):
            return None
        heaviest = max(heaviest, _weight(node))
        stack.extend(_subschemas(node))
    return heaviest


def measure_input_schema(input_schema: Any) -> SchemaCost:
    """How much work checking arguments against ``input_schema`` can cause, and whether
    it is refused (``problem``) or may run inline (``inline_nodes``). Pure and linear in
    the size of the schema; meant for the catalogue, once per tool listing."""
    if input_schema is None or input_schema == {}:
        heaviest = 2
        return SchemaCost(heaviest=heaviest, inline_nodes=INLINE_BUDGET // (2 * heaviest))
    if not isinstance(input_schema, Mapping):
        return SchemaCost()  # unusable: validation is skipped (check_input_schema says why)
    depth, subschemas = _document_shape(input_schema)
    cost: dict[str, Any] = {"depth": depth, "subschemas": subschemas}
    if depth > MAX_SCHEMA_DEPTH:
        return _refused(cost, _TOO_DEEP, keep=False)
    try:
        chars = len(json.dumps(input_schema, sort_keys=True, allow_nan=False, default=str))
    except (TypeError, ValueError, RecursionError):
        return SchemaCost(**cost)  # unusable: validation is skipped with a warning
    cost["chars"] = chars
    if chars > MAX_SCHEMA_CHARS:
        limit = MAX_SCHEMA_CHARS // 1024
        return _refused(
            cost, f"it is {chars // 1024} KB long (the limit is {limit} KB)", keep=False
        )
    document = dict(input_schema)
    cost.update(_expand(document))
    if cost["fan_out"] > MAX_FAN_OUT:
        return _refused(
            cost,
            f"one of its anyOf/allOf/oneOf has {cost['fan_out']} branches "
            f"(the limit is {MAX_FAN_OUT})",
        )
    if cost["expanded"] > MAX_EXPANDED_SUBSCHEMAS:
        return _refused(
            cost, f"its $refs expand to more than {MAX_EXPANDED_SUBSCHEMAS:,} subschemas"
        )
    if cost["ref_expansions"] > MAX_REF_EXPANSIONS:
        return _refused(cost, f"it follows more than {MAX_REF_EXPANSIONS:,} $refs")
    weight = _inline_weight(document)
    if weight is not None:
        cost.update(heaviest=weight, inline_nodes=INLINE_BUDGET // (2 * weight))
    return SchemaCost(**cost)


def argument_nodes(arguments_json: str) -> int:
    """An upper bound on the number of values (and property names) in a JSON text: each
    one past the first follows a comma or opens a container. Commas and brackets inside
    strings only make the bound looser."""
    return 1 + arguments_json.count(",") + arguments_json.count("[") + arguments_json.count("{")


def validates_inline(arguments_json: str, inline_nodes: int) -> bool:
    """Whether arguments (as JSON text) may be checked on the event loop against a schema
    whose measure allows ``inline_nodes`` values."""
    return (
        len(arguments_json) <= INLINE_MAX_CHARS and argument_nodes(arguments_json) <= inline_nodes
    )
