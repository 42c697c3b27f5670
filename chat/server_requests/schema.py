"""Form elicitation schemas (MCP 2025-11-25): checked, then used to check an answer. Pure.

A server may ask only for a flat object of primitive fields: strings (``minLength``,
``maxLength``, ``format`` email | uri | date | date-time), numbers and integers
(``minimum``, ``maximum``), booleans, single-select enums (``enum``, ``enum`` with the
legacy ``enumNames``, or ``oneOf`` of ``{const, title}``) and multi-select arrays (``items``
with ``enum`` or ``anyOf`` of ``{const, title}``, ``minItems``, ``maxItems``). Any field may
carry ``title``, ``description`` and ``default`` (SEP-1034: the card pre-fills it, and a
field left out of an answer takes it).

``form_fields`` turns a schema into the card's field list (or ``SchemaRefused``);
``answer_check`` validates a person's answer against it and returns the content to send.
Everything is bounded: field count, option count, text sizes.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

MAX_FIELDS = 50
MAX_OPTIONS = 200
MAX_TEXT = 2000  # a title, description or option label
MAX_VALUE_CHARS = 10_000  # one string answer
FORMATS = ("email", "uri", "date", "date-time")
_EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s.]+(\.[^@\s.]+)+$")


class SchemaRefused(ValueError):
    """The server's schema is not one Atrium can show as a form (the message says why)."""


@dataclass(frozen=True)
class Problem:
    field: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message}


def _text(value: Any, limit: int = MAX_TEXT) -> str | None:
    return value[:limit] if isinstance(value, str) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _options(raw: Any, name: str, *, titled_key: str) -> list[dict[str, str]]:
    if not isinstance(raw, list) or not raw or len(raw) > MAX_OPTIONS:
        raise SchemaRefused(f"'{name}' needs 1 to {MAX_OPTIONS} options")
    options = []
    for item in raw:
        if titled_key == "enum":
            if not isinstance(item, str):
                raise SchemaRefused(f"'{name}' has an option that is not a string")
            options.append({"value": item[:MAX_TEXT], "title": item[:MAX_TEXT]})
        else:
            if not isinstance(item, dict) or not isinstance(item.get("const"), str):
                raise SchemaRefused(f"'{name}' has an option without a string 'const'")
            value = item["const"][:MAX_TEXT]
            options.append({"value": value, "title": _text(item.get("title")) or value})
    return options


def _field(name: str, prop: Any, required: bool) -> dict[str, Any]:
    if not isinstance(prop, dict):
        raise SchemaRefused(f"'{name}' is not a schema")
    kind = prop.get("type")
    field: dict[str, Any] = {
        "name": name,
        "title": _text(prop.get("title")) or name,
        "description": _text(prop.get("description")) or "",
        "required": required,
    }
    if kind == "string":
        if "oneOf" in prop:
            field.update(type="enum", options=_options(prop["oneOf"], name, titled_key="oneOf"))
        elif "enum" in prop:
            options = _options(prop["enum"], name, titled_key="enum")
            names = prop.get("enumNames")
            if isinstance(names, list) and len(names) == len(options):
                for option, title in zip(options, names, strict=True):
                    option["title"] = _text(title) or option["value"]
            field.update(type="enum", options=options)
        else:
            fmt = prop.get("format")
            if fmt is not None and fmt not in FORMATS:
                raise SchemaRefused(f"'{name}' asks for an unknown format")
            field.update(type="string", format=fmt)
            for key in ("minLength", "maxLength"):
                value = prop.get(key)
                if value is not None:
                    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                        raise SchemaRefused(f"'{name}' has a bad {key}")
                    field[key] = value
    elif kind in ("number", "integer"):
        field["type"] = kind
        for key in ("minimum", "maximum"):
            if prop.get(key) is not None:
                value = _number(prop[key])
                if value is None:
                    raise SchemaRefused(f"'{name}' has a bad {key}")
                field[key] = int(value) if kind == "integer" and value.is_integer() else value
    elif kind == "boolean":
        field["type"] = "boolean"
    elif kind == "array":
        items = prop.get("items")
        if not isinstance(items, dict):
            raise SchemaRefused(f"'{name}' is a list without 'items'")
        if "anyOf" in items:
            options = _options(items["anyOf"], name, titled_key="anyOf")
        elif items.get("type") == "string" and "enum" in items:
            options = _options(items["enum"], name, titled_key="enum")
        else:
            raise SchemaRefused(f"'{name}' is a list of something other than options")
        field.update(type="multi", options=options)
        for key in ("minItems", "maxItems"):
            value = prop.get(key)
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise SchemaRefused(f"'{name}' has a bad {key}")
                field[key] = value
    else:
        raise SchemaRefused(f"'{name}' has a type Atrium cannot ask for ({str(kind)[:40]})")
    if "default" in prop:
        default = prop["default"]
        if not _value_problem(field, default):
            field["default"] = default
    return field


def form_fields(schema: Any) -> list[dict[str, Any]]:
    """The card's fields for a ``requestedSchema``; raises ``SchemaRefused``."""
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise SchemaRefused("the requested schema is not an object")
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        raise SchemaRefused("the requested schema has no properties")
    if len(properties) > MAX_FIELDS:
        raise SchemaRefused(f"the form has more than {MAX_FIELDS} fields")
    required = schema.get("required") or []
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise SchemaRefused("'required' is not a list of field names")
    unknown = [r for r in required if r not in properties]
    if unknown:
        raise SchemaRefused(f"'{unknown[0][:80]}' is required but not defined")
    return [_field(str(name)[:200], prop, name in required) for name, prop in properties.items()]


def _is_date(text: str, with_time: bool) -> bool:
    try:
        if with_time:
            dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
            return "T" in text or " " in text
        dt.date.fromisoformat(text)
        return True
    except ValueError:
        return False


def _string_problem(field: dict[str, Any], value: str) -> str | None:
    if len(value) > MAX_VALUE_CHARS:
        return "is too long"
    if "minLength" in field and len(value) < field["minLength"]:
        return f"needs at least {field['minLength']} characters"
    if "maxLength" in field and len(value) > field["maxLength"]:
        return f"takes at most {field['maxLength']} characters"
    fmt = field.get("format")
    if fmt == "email" and not _EMAIL.match(value):
        return "is not an email address"
    if fmt == "uri":
        parts = urlsplit(value)
        if not parts.scheme or not (parts.netloc or parts.path):
            return "is not a URL"
    if fmt == "date" and not _is_date(value, False):
        return "is not a date (YYYY-MM-DD)"
    if fmt == "date-time" and not _is_date(value, True):
        return "is not a date and time"
    return None


def _value_problem(field: dict[str, Any], value: Any) -> str | None:
    kind = field["type"]
    if kind == "string":
        return _string_problem(field, value) if isinstance(value, str) else "must be text"
    if kind in ("number", "integer"):
        number = _number(value)
        if number is None:
            return "must be a number"
        if kind == "integer" and not number.is_integer():
            return "must be a whole number"
        if "minimum" in field and number < field["minimum"]:
            return f"must be at least {field['minimum']}"
        if "maximum" in field and number > field["maximum"]:
            return f"must be at most {field['maximum']}"
        return None
    if kind == "boolean":
        return None if isinstance(value, bool) else "must be yes or no"
    values = {option["value"] for option in field["options"]}
    if kind == "enum":
        return None if isinstance(value, str) and value in values else "is not one of the choices"
    if not isinstance(value, list) or not all(isinstance(v, str) and v in values for v in value):
        return "has a choice that is not offered"
    if len(set(value)) != len(value):
        return "lists a choice twice"
    if "minItems" in field and len(value) < field["minItems"]:
        return f"needs at least {field['minItems']} choices"
    if "maxItems" in field and len(value) > field["maxItems"]:
        return f"takes at most {field['maxItems']} choices"
    return None


def answer_check(
    fields: list[dict[str, Any]], content: Any
) -> tuple[dict[str, Any], list[Problem]]:
    """The content to send for a person's answer, and what is wrong with it (if anything).

    Unknown keys are dropped; an empty or missing optional field takes its default (SEP-1034)
    or is left out; integers are sent as integers."""
    if not isinstance(content, dict):
        return {}, [Problem("", "the answer must be an object")]
    clean: dict[str, Any] = {}
    problems: list[Problem] = []
    for field in fields:
        name = field["name"]
        value = content.get(name)
        if value is None or value == "":
            if "default" in field:
                clean[name] = field["default"]
            elif field["required"]:
                problems.append(Problem(name, f"{field['title']} is required"))
            continue
        problem = _value_problem(field, value)
        if problem is not None:
            problems.append(Problem(name, f"{field['title']} {problem}"))
            continue
        if field["type"] == "integer":
            value = int(value)
        clean[name] = value
    return clean, problems
