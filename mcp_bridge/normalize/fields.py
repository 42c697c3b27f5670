"""Server-supplied URIs, names and filenames, cleaned for display and storage (pure)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, urlsplit

from mcp_bridge.uimeta import clean_str

from .limits import MAX_FILENAME_LENGTH, MAX_URI_LENGTH

_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_FILENAME_UNSAFE_RE = re.compile(r"[\x00-\x1f\x7f-\x9f/\\:*?\"<>|]")


def clean_uri(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_URI_LENGTH:
        return None
    value = value.strip()
    if _CONTROL_RE.search(value):
        return None
    return clean_str(value)


def optional_text(value: Any, limit: int) -> str | None:
    if not isinstance(value, str):
        return None
    value = clean_str(value.strip())
    return value[:limit] if value else None


def filename_from_uri(uri: str | None) -> str | None:
    if not uri:
        return None
    try:
        path = urlsplit(uri).path
    except ValueError:
        return None
    name = unquote(path.rstrip("/").rsplit("/", 1)[-1])
    name = _FILENAME_UNSAFE_RE.sub("_", name).strip(" .")
    name = clean_str(name)
    if not name:
        return None
    if len(name) > MAX_FILENAME_LENGTH:
        stem, dot, ext = name.rpartition(".")
        keep_ext = dot and 0 < len(ext) <= 10
        name = (stem[: MAX_FILENAME_LENGTH - len(ext) - 1] + "." + ext) if keep_ext else name
        name = name[:MAX_FILENAME_LENGTH]
    return name
