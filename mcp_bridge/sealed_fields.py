"""Model fields whose values are sealed at rest (``mcp_bridge.sealing``: the same Fernet
keys as OAuth grants, one implementation).

``SealedJSONField`` holds a JSON object (an MCP server's literal ``env`` and ``headers``),
``SealedTextField`` a string (a workspace's provider API key). Python code reads and writes
plain values; the database column holds only the sealed token (an empty value is stored as
``""``). A token that no key opens (``SECRET_KEY`` / ``ATRIUM_OAUTH_KEYS`` changed without
the old key) reads as empty, like an unreadable OAuth grant: the admin sets it again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from cryptography.fernet import InvalidToken
from django.db import models
from django.db.models import Value
from django.db.models.expressions import Combinable
from django.db.models.functions import Cast

from .sealing import reseal, seal, unseal

log = logging.getLogger(__name__)

_TEXT_KEY = "text"


def _open(token: str, field: models.Field) -> dict[str, Any] | None:
    opened = unseal(token)
    if opened is None:
        log.warning("%s: a sealed value could not be opened; it reads as empty", field)
    return opened


class SealedJSONField(models.TextField):
    """A JSON object, sealed at rest."""

    description = "A JSON object, sealed at rest"
    # For django-stubs: the Python value is a dict, not the column's text.
    _pyi_private_set_type: Mapping[str, Any] | Combinable  # type: ignore[assignment]
    _pyi_private_get_type: dict[str, Any]  # type: ignore[assignment]

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> dict[str, Any]:
        # Strict: the column holds a sealed token or nothing, never a plain object.
        opened = _open(str(value), self) if value else None
        return opened if isinstance(opened, dict) else {}

    def to_python(self, value: Any) -> dict[str, Any]:
        """A mapping as it is; a sealed token (a fixture, ``value_to_string``) opened."""
        if isinstance(value, Mapping):
            return dict(value)
        opened = unseal(str(value)) if value else None
        return opened if isinstance(opened, dict) else {}

    def get_prep_value(self, value: Any) -> str:
        plain = self.to_python(value)
        return seal(plain) if plain else ""

    def value_to_string(self, obj: models.Model) -> str:
        return self.get_prep_value(self.value_from_object(obj))


class SealedTextField(models.TextField):
    """A string, sealed at rest."""

    description = "A string, sealed at rest"

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> str:
        # Strict: the column holds a sealed token or nothing, never the plain string.
        opened = _open(str(value), self) if value else None
        text = opened.get(_TEXT_KEY) if opened else None
        return text if isinstance(text, str) else ""

    def to_python(self, value: Any) -> str:
        """A plain string as it is; a sealed token (a fixture, ``value_to_string``) opened."""
        if value is None:
            return ""
        opened = unseal(str(value)) if value else None
        text = opened.get(_TEXT_KEY) if opened else None
        return text if isinstance(text, str) else str(value)

    def get_prep_value(self, value: Any) -> str:
        text = "" if value is None else str(value)
        return seal({_TEXT_KEY: text}) if text else ""

    def value_to_string(self, obj: models.Model) -> str:
        return self.get_prep_value(self.value_from_object(obj))


def reseal_column(model: type[models.Model], field_name: str) -> int:
    """Re-encrypt one sealed column of every row with the newest key (``reseal``), without
    opening values into Python objects; a value no key opens is left as it is. Returns how
    many values were resealed (``manage.py mcp reseal-grants``; docs/oauth.md)."""
    count = 0
    rows = model._default_manager.annotate(
        _sealed=Cast(field_name, output_field=models.TextField())
    ).values_list("pk", "_sealed")
    for pk, token in rows:
        if not token:
            continue
        try:
            fresh = reseal(token)
        except InvalidToken:
            continue
        model._default_manager.filter(pk=pk).update(
            **{field_name: Value(fresh, output_field=models.TextField())}
        )
        count += 1
    return count
