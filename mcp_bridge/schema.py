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
from collections.abc import Iterable, Iterator, Mapping
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
    if errors:
        raise InvalidArguments([_problem(error) for error in errors], tool=tool)
    return []
