"""Files as tool arguments: which shape a tool's input schema takes a file in, and the
values built for it (pure: no Django, no I/O; docs/files.md, "Passing files to tools").

A top-level property of a tool's ``inputSchema`` *accepts a file* when it (or a branch of
its ``anyOf`` / ``oneOf``, ``$ref`` followed into ``$defs``) is

- an object shaped like an MCP ``ResourceLink`` (``type`` is the constant
  ``"resource_link"``, or it has ``uri`` and ``name``): **resource_link** — the file's
  short-lived link, its name, type and size;
- a string with ``format: "uri"`` (``uri-reference``, ``iri``, ``url``), or a string whose
  name ends in ``url`` / ``uri`` / ``link``: **uri** — the link alone;
- an object shaped like an ``EmbeddedResource`` (``type`` is ``"resource"`` and it has a
  ``resource``): **embedded** — the file's bytes (``text`` or base64 ``blob``), only for
  files up to :data:`EMBED_MAX_BYTES`;
- a string annotated ``x-mcp-file`` (the draft SEP-2356): **data_uri** —
  ``data:<type>;base64,…``, with the same cap.

A link is preferred when both are accepted (the bytes then leave only when the server asks
for them); a person may ask for ``"as": "embedded"``.

What a person writes (``/call``, the tool picker): ``{"field": {"$file": 12}}`` (or a
file's name instead of its id). What is stored on the call, shown on its card and its
approval card: the value with the file's **normal, authenticated** Atrium URL and its name
(:func:`stored_value`); the link that serves it without a session is minted only when the
call runs (:func:`server_value`), so no token is ever stored, shown or broadcast.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

EMBED_MAX_BYTES = 256 * 1024  # the largest file passed embedded (text or base64 blob)
MAX_FILE_ARGUMENTS = 5  # files one call may take
_MAX_DEPTH = 8  # $ref / anyOf nesting followed
REFERENCE_KEY = "$file"
URI_FORMATS = frozenset({"uri", "uri-reference", "iri", "iri-reference", "url"})
_URL_NAME_RE = re.compile(r"(?:url|uri|link)$", re.IGNORECASE)
TEXT_MIMES = frozenset(
    {"application/json", "application/xml", "application/x-yaml", "application/yaml"}
)


class FileShape(StrEnum):
    RESOURCE_LINK = "resource_link"
    URI = "uri"
    EMBEDDED = "embedded"
    DATA_URI = "data_uri"


LINK_SHAPES = (FileShape.RESOURCE_LINK, FileShape.URI)
EMBED_SHAPES = (FileShape.EMBEDDED, FileShape.DATA_URI)
_PREFERENCE = (*LINK_SHAPES, *EMBED_SHAPES)


@dataclass(frozen=True)
class FileInfo:
    """What a value says about a file (from its stored row)."""

    id: int
    name: str
    mime_type: str
    size: int


@dataclass(frozen=True)
class FileField:
    """A top-level argument that takes a file, and the shapes it takes it in (best first)."""

    name: str
    shapes: tuple[FileShape, ...]
    required: bool
    title: str
    # For an embedded resource: which contents its schema allows ("text", "blob").
    encodings: frozenset[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "shapes": [str(s) for s in self.shapes],
            "required": self.required,
            "embeddedMaxBytes": EMBED_MAX_BYTES,
        }


# ----------------------------------------------------------------------------- schemas


def _resolve(schema: Any, root: Mapping[str, Any], depth: int = 0) -> dict[str, Any]:
    """``schema`` with a local ``$ref`` (``#/$defs/X``, ``#/definitions/X``) followed."""
    while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str) and depth < 8:
        ref = schema["$ref"]
        if not ref.startswith("#/"):
            return {}
        target: Any = root
        for piece in ref[2:].split("/"):
            target = target.get(piece) if isinstance(target, Mapping) else None
        schema = target
        depth += 1
    return dict(schema) if isinstance(schema, Mapping) else {}


def _branches(schema: Any, root: Mapping[str, Any], depth: int = 0) -> list[dict[str, Any]]:
    """The alternatives a value may take (``anyOf`` / ``oneOf``), ``null`` left out."""
    resolved = _resolve(schema, root)
    if depth >= _MAX_DEPTH:
        return [resolved]
    alternatives = resolved.get("anyOf") or resolved.get("oneOf")
    if isinstance(alternatives, list) and alternatives:
        out: list[dict[str, Any]] = []
        for branch in alternatives:
            out.extend(_branches(branch, root, depth + 1))
        return out
    if resolved.get("type") == "null":
        return []
    return [resolved]


def _types(schema: Mapping[str, Any]) -> set[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    return set()


def _constant(schema: Mapping[str, Any]) -> Any:
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and len(enum) == 1:
        return enum[0]
    return None


def _shape_of(schema: dict[str, Any], name: str, root: Mapping[str, Any]) -> FileShape | None:
    if "x-mcp-file" in schema and "string" in (_types(schema) or {"string"}):
        return FileShape.DATA_URI
    types = _types(schema)
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and ("object" in types or not types):
        kind = _constant(_resolve(properties.get("type"), root))
        if kind == "resource_link":
            return FileShape.RESOURCE_LINK
        if kind == "resource" and "resource" in properties:
            return FileShape.EMBEDDED
        if kind is None and "uri" in properties and "name" in properties:
            return FileShape.RESOURCE_LINK
        return None
    if (
        types
        and types <= {"string", "null"}
        and (schema.get("format") in URI_FORMATS or _URL_NAME_RE.search(name))
    ):
        return FileShape.URI
    return None


def _encodings(schema: dict[str, Any], root: Mapping[str, Any]) -> set[str]:
    """Which contents an embedded resource's ``resource`` allows (both when unsaid)."""
    properties = schema.get("properties") or {}
    found: set[str] = set()
    for branch in _branches(properties.get("resource"), root):
        inner = branch.get("properties")
        if isinstance(inner, Mapping):
            found |= {key for key in ("text", "blob") if key in inner}
    return found


def file_fields(input_schema: Any) -> dict[str, FileField]:
    """The tool's top-level arguments that take a file, by name (schema order)."""
    root = input_schema if isinstance(input_schema, Mapping) else {}
    properties = _resolve(root, root).get("properties")
    if not isinstance(properties, Mapping):
        return {}
    declared = root.get("required")
    required: list[Any] = declared if isinstance(declared, list) else []
    fields: dict[str, FileField] = {}
    for name, prop in properties.items():
        if not isinstance(name, str):
            continue
        shapes: list[FileShape] = []
        encodings: set[str] = set()
        for branch in _branches(prop, root):
            shape = _shape_of(branch, name, root)
            if shape is not None and shape not in shapes:
                shapes.append(shape)
                if shape is FileShape.EMBEDDED:
                    encodings |= _encodings(branch, root)
        if shapes:
            title = _resolve(prop, root).get("title")
            fields[name] = FileField(
                name=name,
                shapes=tuple(sorted(shapes, key=_PREFERENCE.index)),
                required=name in required,
                title=title if isinstance(title, str) else name,
                encodings=frozenset(encodings or {"text", "blob"}),
            )
    return fields


def choose_shape(
    field: FileField, *, size: int, wanted: str | None = None, embed_max: int = EMBED_MAX_BYTES
) -> tuple[FileShape | None, str]:
    """The shape a file of ``size`` bytes goes in, or None and why not. ``wanted``:
    ``"link"`` or ``"embedded"`` (a person's choice), else a link when one is accepted."""
    links = [s for s in field.shapes if s in LINK_SHAPES]
    embeds = [s for s in field.shapes if s in EMBED_SHAPES]
    if wanted == "embedded" and not embeds:
        return None, f"'{field.name}' takes a file as a link, not embedded."
    if wanted == "link" and not links:
        return None, f"'{field.name}' takes a file only embedded in the call."
    if links and wanted != "embedded":
        return links[0], ""
    if size > embed_max:
        return None, (
            f"'{field.name}' takes a file embedded in the call, and only files up to "
            f"{embed_max // 1024} KB are embedded."
        )
    return embeds[0], ""


# ------------------------------------------------------------------------------ values


def file_references(arguments: Mapping[str, Any]) -> dict[str, tuple[Any, str | None]]:
    """The top-level arguments a person wrote as ``{"$file": id-or-name, "as"?: …}``."""
    found: dict[str, tuple[Any, str | None]] = {}
    for key, value in arguments.items():
        if isinstance(value, Mapping) and REFERENCE_KEY in value:
            wanted = value.get("as")
            found[key] = (value[REFERENCE_KEY], wanted if isinstance(wanted, str) else None)
    return found


def is_text(mime_type: str) -> bool:
    mime = mime_type.split(";", 1)[0].strip().lower()
    return mime.startswith("text/") or mime in TEXT_MIMES or mime.endswith("+json")


def embedded_encoding(field: FileField, mime_type: str) -> str:
    """``text`` for a text file when the schema allows it, else ``blob``."""
    if is_text(mime_type) and "text" in field.encodings:
        return "text"
    return "blob" if "blob" in field.encodings else "text"


def _placeholder(info: FileInfo) -> str:
    return f"(the content of {info.name}, {info.size} bytes, is embedded when the call runs)"


def stored_value(shape: FileShape, info: FileInfo, *, file_url: str, encoding: str) -> Any:
    """The argument as the call stores and shows it: the file's authenticated URL and
    name, never a link that works without a session."""
    if shape is FileShape.RESOURCE_LINK:
        return {
            "type": "resource_link",
            "uri": file_url,
            "name": info.name,
            "mimeType": info.mime_type,
            "size": info.size,
        }
    if shape is FileShape.EMBEDDED:
        return {
            "type": "resource",
            "resource": {"uri": file_url, "mimeType": info.mime_type, encoding: _placeholder(info)},
        }
    return file_url  # URI, DATA_URI: replaced by the link / the data when the call runs


def server_value(
    shape: FileShape, stored: Any, info: FileInfo, *, link: str = "", content: bytes = b""
) -> Any:
    """The argument as the server receives it: the minted link, or the file's bytes."""
    if shape is FileShape.RESOURCE_LINK:
        return {**stored, "uri": link}
    if shape is FileShape.URI:
        return link
    encoded = base64.b64encode(content).decode("ascii")
    if shape is FileShape.DATA_URI:
        return f"data:{info.mime_type};base64,{encoded}"
    resource = dict(stored["resource"])
    if "text" in resource:
        resource["text"] = content.decode("utf-8", errors="replace")
    else:
        resource["blob"] = encoded
    return {**stored, "resource": resource}


# ------------------------------------------------------------------- Atrium file URLs


def atrium_file_id(value: Any, media_prefix: str) -> int | None:
    """The file an Atrium URL names — ``<origin>/media/<id>/`` or its single-file link
    ``<origin>/media/<id>/link/<token>/`` — else None. ``media_prefix``: ``<origin>/media/``."""
    if not isinstance(value, str) or not value.startswith(media_prefix):
        return None
    match = re.fullmatch(r"(\d{1,18})/(?:link/[A-Za-z0-9_:\-]+/)?", value[len(media_prefix) :])
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class StoredFile:
    """A file argument found in a call's stored arguments."""

    key: str
    asset_id: int
    shape: FileShape


def stored_files(
    arguments: Mapping[str, Any], input_schema: Any, media_prefix: str
) -> list[StoredFile]:
    """The file arguments of a stored call: top-level arguments the schema takes a file
    in whose value names an Atrium file (in the shapes :func:`stored_value` writes)."""
    if not arguments:
        return []
    found: list[StoredFile] = []
    for key, field in file_fields(input_schema).items():
        value = arguments.get(key)
        shape: FileShape | None = None
        uri: Any = None
        if isinstance(value, str):
            uri = value
            shape = FileShape.URI if FileShape.URI in field.shapes else FileShape.DATA_URI
        elif isinstance(value, Mapping) and value.get("type") == "resource_link":
            uri, shape = value.get("uri"), FileShape.RESOURCE_LINK
        elif isinstance(value, Mapping) and isinstance(value.get("resource"), Mapping):
            uri, shape = value["resource"].get("uri"), FileShape.EMBEDDED
        asset_id = atrium_file_id(uri, media_prefix)
        if shape is not None and shape in field.shapes and asset_id is not None:
            found.append(StoredFile(key=key, asset_id=asset_id, shape=shape))
    return found


def result_file_links(parts: Iterable[Any], media_prefix: str) -> list[tuple[int, int]]:
    """``(index, file id)`` of a result's link parts (normalized ``resource_link`` blocks)
    that point at an Atrium file."""
    found: list[tuple[int, int]] = []
    for index, part in enumerate(parts):
        if isinstance(part, Mapping) and part.get("type") == "link":
            asset_id = atrium_file_id(part.get("uri"), media_prefix)
            if asset_id is not None:
                found.append((index, asset_id))
    return found
