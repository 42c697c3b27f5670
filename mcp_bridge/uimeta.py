"""Parsing of MCP Apps / MCP-UI / Apps SDK UI metadata (pure, no Django).

Everything here reads untrusted data sent by an MCP server: every accessor checks types,
drops what it cannot use and records a human-readable problem instead of raising.

Shared helpers that the rest of ``mcp_bridge`` builds on also live here:
``normalize_mime`` / ``parse_mime`` (MIME matching with normalized parameters),
``ui_flavor`` (which kind of UI a resource is), ``first_http_url`` (RFC 2483 uri-list)
and ``json_safe`` (turn arbitrary Python data into bounded, JSON-serializable data).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from mcp_bridge.csp import CSP_CATEGORIES, csp_from_openai, parse_permissions

APP_MIME = "text/html;profile=mcp-app"
HTML_MIME = "text/html"
SKYBRIDGE_MIME = "text/html+skybridge"
URI_LIST_MIME = "text/uri-list"
REMOTE_DOM_MIME = "application/vnd.mcp-ui.remote-dom+javascript"
OCTET_STREAM = "application/octet-stream"

VISIBILITY_VALUES: tuple[str, ...] = ("model", "app")
BOOLEAN_ANNOTATIONS: tuple[str, ...] = (
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
)

MAX_URI_LENGTH = 2048
MAX_MIME_LENGTH = 255
MAX_TITLE_LENGTH = 200
MAX_DOMAIN_LENGTH = 255
MAX_DOMAINS_PER_CATEGORY = 64
MAX_RENDER_DATA_NODES = 20_000
# Depth limit for data we copy out of hostile payloads: deep enough for real data,
# shallow enough that recursion (and later json.dumps) can never blow the stack.
MAX_JSON_DEPTH = 64
MAX_JSON_NODES = 1_000_000

# RFC 7230 "token" characters, used for MIME type, subtype and parameter names.
_TOKEN_RE = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
_CONTROL_OR_SPACE_RE = re.compile(r"[\x00-\x20\x7f-\x9f]")
_CSS_LENGTH_RE = re.compile(r"^(?:auto|\d{1,5}(?:\.\d{1,3})?(?:px|%|em|rem|vh|vw|vmin|vmax)?)$")
# MIME parameters whose values are case-insensitive; only these are lower-cased.
_CASE_INSENSITIVE_PARAMS = frozenset({"charset", "profile", "framework"})


# --------------------------------------------------------------------------- JSON safety


class _Budget:
    """Node counter shared by one json_safe() walk (bounds work on shared sub-trees)."""

    __slots__ = ("remaining",)

    def __init__(self, nodes: int) -> None:
        self.remaining = nodes


def clean_str(value: str) -> str:
    """Return ``value`` storable anywhere: no NUL, no lone surrogates (PostgreSQL jsonb
    and UTF-8 encoders reject both)."""
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value


def unstorable(value: Any) -> bool:
    """Whether a string anywhere in a decoded JSON value, keys included, holds U+0000 or a
    lone surrogate (what ``clean_str`` replaces): PostgreSQL's text and jsonb store neither
    (the write fails) and SQLite stores both. Iterative: deep nesting is walked without
    recursion."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if clean_str(item) != item:
                return True
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and clean_str(key) != key:
                    return True
                pending.append(child)
        elif isinstance(item, list):
            pending.extend(item)
    return False


def storable(value: Any) -> Any:
    """``value`` with every string (keys included) made storable by ``clean_str``; the
    value itself, not a copy, when nothing needs it (the common case: one walk)."""
    if not unstorable(value):
        return value
    copy, _ = json_safe(value)
    return copy


def json_safe(
    value: Any,
    *,
    max_depth: int = MAX_JSON_DEPTH,
    max_nodes: int = MAX_JSON_NODES,
) -> tuple[Any, list[str]]:
    """Copy ``value`` into plain JSON data (dict/list/str/int/float/bool/None).

    Returns ``(copy, problems)``. Non-JSON values (bytes, objects, NaN, cycles, non-string
    keys other than numbers) become ``None`` or are dropped; containers nested deeper than
    ``max_depth`` or beyond ``max_nodes`` are cut. Never raises.
    """
    problems: list[str] = []
    budget = _Budget(max_nodes)
    copy = _json_copy(value, 0, max_depth, budget, set(), problems)
    # Keep each distinct problem once: a hostile payload may repeat the same one a lot.
    return copy, list(dict.fromkeys(problems))


def _json_copy(
    value: Any,
    depth: int,
    max_depth: int,
    budget: _Budget,
    on_path: set[int],
    problems: list[str],
) -> Any:
    budget.remaining -= 1
    if budget.remaining < 0:
        problems.append("data too large: truncated")
        return None
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        problems.append("non-finite number replaced by null")
        return None
    if isinstance(value, str):
        return clean_str(value)
    if isinstance(value, Mapping | list | tuple):
        if depth >= max_depth:
            problems.append(f"data nested deeper than {max_depth} levels: truncated")
            return None
        if id(value) in on_path:
            problems.append("circular reference replaced by null")
            return None
        on_path.add(id(value))
        try:
            if isinstance(value, Mapping):
                out: dict[str, Any] = {}
                for key, item in list(value.items()):
                    if isinstance(key, str):
                        safe_key = clean_str(key)
                    elif isinstance(key, int | float) and not isinstance(key, bool):
                        safe_key = str(key)
                    else:
                        problems.append("non-string object key dropped")
                        continue
                    out[safe_key] = _json_copy(
                        item, depth + 1, max_depth, budget, on_path, problems
                    )
                    if budget.remaining < 0:
                        break
                return out
            items: list[Any] = []
            for item in value:
                items.append(_json_copy(item, depth + 1, max_depth, budget, on_path, problems))
                if budget.remaining < 0:
                    break
            return items
        finally:
            on_path.discard(id(value))
    problems.append(f"unsupported value of type {type(value).__name__} replaced by null")
    return None


def describe_type(value: Any) -> str:
    """JSON-ish name of a value's type, for messages ("array", "string"...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def printable(value: Any, limit: int = 80) -> str:
    """Short, single-line, escaped rendering of an untrusted value for messages and logs."""
    text = value if isinstance(value, str) else repr(value)
    text = text[: limit * 4]
    escaped = "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape", "backslashreplace").decode("ascii")
        for ch in text
    )
    escaped = clean_str(escaped)
    return escaped if len(escaped) <= limit else escaped[: limit - 1] + "…"


# --------------------------------------------------------------------------- MIME types


@dataclass(frozen=True)
class MimeType:
    """A parsed MIME type: lower-cased ``type/subtype`` plus normalized parameters."""

    essence: str
    params: tuple[tuple[str, str], ...] = ()

    @property
    def type(self) -> str:
        return self.essence.split("/", 1)[0]

    @property
    def subtype(self) -> str:
        return self.essence.split("/", 1)[1]

    def param(self, name: str) -> str | None:
        for key, value in self.params:
            if key == name:
                return value
        return None

    def __str__(self) -> str:
        rendered = [self.essence]
        for key, value in self.params:
            rendered.append(f"{key}={_quote_param(value)}")
        return ";".join(rendered)


def _quote_param(value: str) -> str:
    if value and _TOKEN_RE.match(value):
        return value
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _split_params(text: str) -> list[str]:
    """Split on ``;`` outside double quotes."""
    pieces: list[str] = []
    current: list[str] = []
    in_quotes = False
    escaped = False
    for ch in text:
        if escaped:
            current.append(ch)
            escaped = False
        elif ch == "\\" and in_quotes:
            current.append(ch)
            escaped = True
        elif ch == '"':
            current.append(ch)
            in_quotes = not in_quotes
        elif ch == ";" and not in_quotes:
            pieces.append("".join(current))
            current = []
        else:
            current.append(ch)
    pieces.append("".join(current))
    return pieces


def parse_mime(value: Any) -> MimeType | None:
    """Parse a MIME type string; ``None`` if it is not one.

    ``text/html; profile=mcp-app`` and ``TEXT/HTML;Profile="mcp-app"`` parse to the same
    value. Malformed parameters are dropped, a malformed type/subtype rejects the whole.
    """
    if not isinstance(value, str) or not value or len(value) > MAX_MIME_LENGTH:
        return None
    pieces = _split_params(value)
    essence = pieces[0].strip().lower()
    if essence.count("/") != 1:
        return None
    major, minor = essence.split("/")
    if not (_TOKEN_RE.match(major) and _TOKEN_RE.match(minor)):
        return None
    params: dict[str, str] = {}
    for piece in pieces[1:]:
        if "=" not in piece:
            continue
        name, raw_value = piece.split("=", 1)
        name = name.strip().lower()
        raw_value = raw_value.strip()
        if not _TOKEN_RE.match(name):
            continue
        if len(raw_value) >= 2 and raw_value[0] == '"' and raw_value[-1] == '"':
            raw_value = re.sub(r"\\(.)", r"\1", raw_value[1:-1])
        elif not _TOKEN_RE.match(raw_value):
            continue
        if _CONTROL_OR_SPACE_RE.search(raw_value.replace(" ", "")):
            continue
        if name in _CASE_INSENSITIVE_PARAMS:
            raw_value = raw_value.lower()
        params.setdefault(name, raw_value)  # first occurrence wins, like browsers
    return MimeType(essence=essence, params=tuple(sorted(params.items())))


def normalize_mime(value: Any, default: str = OCTET_STREAM) -> str:
    """Canonical MIME string (``type/subtype;k=v`` sorted, no spaces), ``default`` if invalid."""
    parsed = parse_mime(value)
    return str(parsed) if parsed is not None else default


def mime_essence(value: Any) -> str | None:
    """Just ``type/subtype`` (lower-case) or ``None``."""
    parsed = parse_mime(value)
    return parsed.essence if parsed is not None else None


def first_http_url(text: Any) -> str | None:
    """First valid absolute http(s) URL in a ``text/uri-list`` body (RFC 2483).

    Lines starting with ``#`` are comments. URLs with credentials, whitespace or control
    characters are skipped.
    """
    if not isinstance(text, str):
        return None
    for line in text.splitlines():
        candidate = line.strip()
        if not candidate or candidate.startswith("#"):
            continue
        if is_http_url(candidate):
            return candidate
    return None


def is_http_url(value: Any) -> bool:
    """True for an absolute ``http``/``https`` URL with a host and no userinfo."""
    if not isinstance(value, str) or not value or len(value) > MAX_URI_LENGTH:
        return False
    if _CONTROL_OR_SPACE_RE.search(value) or "\\" in value:
        return False
    try:
        parts = urlsplit(value)
        hostname = parts.hostname
        _ = parts.port  # raises ValueError on a malformed port
    except ValueError:
        return False
    if parts.scheme.lower() not in ("http", "https") or not hostname:
        return False
    return "@" not in parts.netloc


def ui_flavor(mime: Any, text: Any) -> str | None:
    """Which kind of UI a ``ui://`` resource is, from its MIME type (and text).

    - ``text/html;profile=mcp-app`` → ``"mcp-app"`` (or ``"url"`` when the text is a
      single http(s) URL, as ``@mcp-ui/server`` 6.x sends external URLs)
    - ``text/html+skybridge`` → ``"skybridge"`` (OpenAI Apps SDK)
    - ``text/html`` (any other profile) → ``"html"`` (legacy MCP-UI rawHtml)
    - ``text/uri-list`` → ``"url"`` (legacy MCP-UI externalUrl)
    - ``application/vnd.mcp-ui.remote-dom[+javascript]`` → ``"remote-dom"``
    - anything else → ``None`` (not a UI resource)
    """
    parsed = mime if isinstance(mime, MimeType) else parse_mime(mime)
    if parsed is None:
        return None
    essence = parsed.essence
    if essence == "text/html":
        if parsed.param("profile") == "mcp-app":
            if isinstance(text, str) and _is_single_url(text):
                return "url"
            return "mcp-app"
        return "html"
    if essence == SKYBRIDGE_MIME:
        return "skybridge"
    if essence == URI_LIST_MIME:
        return "url"
    if essence in ("application/vnd.mcp-ui.remote-dom", REMOTE_DOM_MIME):
        return "remote-dom"
    return None


def _is_single_url(text: str) -> bool:
    stripped = text.strip()
    return "\n" not in stripped and is_http_url(stripped)


def is_ui_uri(value: Any) -> bool:
    """True for a syntactically sane ``ui://`` URI (scheme compared case-insensitively)."""
    if not isinstance(value, str) or len(value) > MAX_URI_LENGTH:
        return False
    if value[:5].lower() != "ui://" or len(value) <= 5:
        return False
    return not (_CONTROL_OR_SPACE_RE.search(value) or "\\" in value)


# --------------------------------------------------------------------------- tool _meta.ui


@dataclass
class ToolUi:
    """What a tool's ``_meta`` / ``annotations`` say about its UI and audiences."""

    resource_uri: str | None = None
    visibility: tuple[str, ...] = VISIBILITY_VALUES
    annotations: dict[str, Any] = field(default_factory=dict)
    is_app_sdk: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def model_visible(self) -> bool:
        return "model" in self.visibility

    @property
    def app_callable(self) -> bool:
        return "app" in self.visibility

    def to_dict(self) -> dict[str, Any]:
        return {
            "resourceUri": self.resource_uri,
            "visibility": list(self.visibility),
            "annotations": dict(self.annotations),
            "isAppSdk": self.is_app_sdk,
            "problems": list(self.problems),
        }


def parse_tool_ui(tool: Any) -> ToolUi:
    """Read a wire-form tool (``name``, ``_meta``, ``annotations``).

    Resource URI: ``_meta.ui.resourceUri``, else the deprecated ``_meta["ui/resourceUri"]``,
    else Apps SDK ``_meta["openai/outputTemplate"]``; the first *valid* ``ui://`` value in
    that order wins, invalid ones are recorded as problems.

    Visibility: ``_meta.ui.visibility`` when present. Otherwise, when the Apps SDK keys
    ``openai/visibility`` / ``openai/widgetAccessible`` are present, their semantics apply
    (model unless ``"private"``; app only when ``widgetAccessible is True``). Otherwise the
    MCP Apps default, both.
    """
    result = ToolUi()
    if not isinstance(tool, Mapping):
        result.problems.append(f"tool definition is a {describe_type(tool)}, not an object")
        return result

    meta = tool.get("_meta")
    if meta is not None and not isinstance(meta, Mapping):
        result.problems.append(f"tool _meta is a {describe_type(meta)}, not an object")
        meta = None
    meta = meta or {}
    ui = meta.get("ui")
    if ui is not None and not isinstance(ui, Mapping):
        result.problems.append(f"_meta.ui is a {describe_type(ui)}, not an object")
        ui = None
    ui = ui or {}

    result.is_app_sdk = any(isinstance(key, str) and key.startswith("openai/") for key in meta)
    result.resource_uri = _pick_resource_uri(
        [
            ("_meta.ui.resourceUri", ui.get("resourceUri")),
            ('_meta["ui/resourceUri"]', meta.get("ui/resourceUri")),
            ('_meta["openai/outputTemplate"]', meta.get("openai/outputTemplate")),
        ],
        result.problems,
    )
    result.visibility = _parse_visibility(ui, meta, result.problems)
    result.annotations = _parse_annotations(tool.get("annotations"), result.problems)
    return result


def _pick_resource_uri(candidates: list[tuple[str, Any]], problems: list[str]) -> str | None:
    chosen: str | None = None
    for label, value in candidates:
        if value is None:
            continue
        if not is_ui_uri(value):
            problems.append(f"{label} is not a ui:// URI and was ignored: {printable(value)}")
            continue
        if chosen is None:
            chosen = value
        elif value != chosen:
            problems.append(f"{label} disagrees with the preferred resource URI; ignored")
    return chosen


def _parse_visibility(
    ui: Mapping[str, Any], meta: Mapping[str, Any], problems: list[str]
) -> tuple[str, ...]:
    if "visibility" in ui:
        raw = ui["visibility"]
        if not isinstance(raw, list | tuple):
            problems.append(
                f"_meta.ui.visibility is a {describe_type(raw)}, not a list; default used"
            )
            return VISIBILITY_VALUES
        kept: list[str] = []
        for item in raw:
            if item in VISIBILITY_VALUES and isinstance(item, str):
                if item not in kept:
                    kept.append(item)
            else:
                problems.append(f"unknown visibility value dropped: {printable(item)}")
        # Canonical order so ("app", "model") == ("model", "app").
        return tuple(value for value in VISIBILITY_VALUES if value in kept)

    has_sdk_visibility = "openai/visibility" in meta or "openai/widgetAccessible" in meta
    if not has_sdk_visibility:
        return VISIBILITY_VALUES
    sdk_visibility = meta.get("openai/visibility")
    if sdk_visibility is not None and sdk_visibility not in ("public", "private"):
        problems.append(f"unknown openai/visibility value: {printable(sdk_visibility)}")
    widget_accessible = meta.get("openai/widgetAccessible")
    if widget_accessible is not None and not isinstance(widget_accessible, bool):
        problems.append("openai/widgetAccessible is not a boolean; treated as false")
    audiences: list[str] = []
    if sdk_visibility != "private":
        audiences.append("model")
    if widget_accessible is True:
        audiences.append("app")
    return tuple(audiences)


def _parse_annotations(raw: Any, problems: list[str]) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append(f"annotations is a {describe_type(raw)}, not an object")
        return {}
    kept: dict[str, Any] = {}
    for key in BOOLEAN_ANNOTATIONS:
        if key not in raw:
            continue
        if isinstance(raw[key], bool):
            kept[key] = raw[key]
        else:
            problems.append(f"annotation {key} is not a boolean and was ignored")
    title = raw.get("title")
    if isinstance(title, str) and title.strip():
        kept["title"] = clean_str(title.strip())[:MAX_TITLE_LENGTH]
    elif title is not None:
        problems.append("annotation title is not a non-empty string and was ignored")
    return kept


# --------------------------------------------------------------------------- resource _meta.ui


@dataclass
class ResourceUi:
    """A UI resource's own metadata, merged from the content item and the listing entry.

    ``csp`` holds the *declared* (not yet validated) domain lists; validation and the
    intersection with the binding happen in ``mcp_bridge.csp.build_csp``.
    """

    csp: dict[str, list[str]] | None = None
    permissions: tuple[str, ...] = ()
    domain: str | None = None
    prefers_border: bool | None = None
    preferred_frame_size: list[str] | None = None
    initial_render_data: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The ``meta`` object of a canonical UI part (camelCase, JSON-ready)."""
        out: dict[str, Any] = {
            "csp": {key: list(values) for key, values in self.csp.items()}
            if self.csp is not None
            else None,
            "permissions": list(self.permissions),
            "domain": self.domain,
            "prefersBorder": self.prefers_border,
        }
        if self.problems:
            out["problems"] = list(self.problems)
        return out


def parse_resource_ui(content_meta: Any, listing_meta: Any) -> ResourceUi:
    """Merge resource UI metadata: content item ``_meta`` wins over the listing entry's,
    key by key. At each level ``_meta.ui.<key>`` is preferred over the Apps SDK alias.
    """
    result = ResourceUi()
    levels: list[tuple[str, Mapping[str, Any], Mapping[str, Any]]] = []
    for label, meta in (("content", content_meta), ("listing", listing_meta)):
        if meta is None:
            continue
        if not isinstance(meta, Mapping):
            result.problems.append(f"{label} _meta is a {describe_type(meta)}, not an object")
            continue
        ui = meta.get("ui")
        if ui is not None and not isinstance(ui, Mapping):
            result.problems.append(f"{label} _meta.ui is a {describe_type(ui)}, not an object")
            ui = None
        levels.append((label, meta, ui or {}))

    result.csp = _first_valid(levels, _read_csp, result.problems)
    result.permissions = _first_valid(levels, _read_permissions, result.problems) or ()
    result.domain = _first_valid(levels, _read_domain, result.problems)
    result.prefers_border = _first_valid(levels, _read_prefers_border, result.problems)
    result.preferred_frame_size = _first_valid(levels, _read_frame_size, result.problems)
    result.initial_render_data = _first_valid(levels, _read_render_data, result.problems)
    return result


_MISSING = object()


def _first_valid(
    levels: list[tuple[str, Mapping[str, Any], Mapping[str, Any]]],
    reader: Any,
    problems: list[str],
) -> Any:
    """First level whose reader yields a usable value (readers return _MISSING if absent
    or unusable, and append problems for unusable values)."""
    for label, meta, ui in levels:
        value = reader(label, meta, ui, problems)
        if value is not _MISSING:
            return value
    return None


def _read_csp(
    label: str, meta: Mapping[str, Any], ui: Mapping[str, Any], problems: list[str]
) -> Any:
    if "csp" in ui:
        raw = ui["csp"]
        if isinstance(raw, Mapping):
            return _clean_csp(raw, f"{label} _meta.ui.csp", problems)
        problems.append(f"{label} _meta.ui.csp is a {describe_type(raw)}, not an object")
    if "openai/widgetCSP" in meta:
        raw = meta["openai/widgetCSP"]
        if isinstance(raw, Mapping):
            return _clean_csp(csp_from_openai(raw), f"{label} openai/widgetCSP", problems)
        problems.append(f"{label} openai/widgetCSP is a {describe_type(raw)}, not an object")
    return _MISSING


def _clean_csp(raw: Mapping[str, Any], label: str, problems: list[str]) -> dict[str, list[str]]:
    """Keep only string entries of known categories (syntax is validated later)."""
    cleaned: dict[str, list[str]] = {}
    for category in CSP_CATEGORIES:
        if category not in raw or raw[category] is None:
            continue
        values = raw[category]
        if not isinstance(values, list | tuple):
            problems.append(f"{label}.{category} is a {describe_type(values)}, not a list")
            continue
        kept = [clean_str(v) for v in values if isinstance(v, str)]
        if len(kept) != len(values):
            problems.append(f"{label}.{category}: non-string entries dropped")
        if len(kept) > MAX_DOMAINS_PER_CATEGORY:
            problems.append(
                f"{label}.{category}: more than {MAX_DOMAINS_PER_CATEGORY} entries, rest dropped"
            )
            kept = kept[:MAX_DOMAINS_PER_CATEGORY]
        cleaned[category] = kept
    return cleaned


def _read_permissions(
    label: str, meta: Mapping[str, Any], ui: Mapping[str, Any], problems: list[str]
) -> Any:
    if "permissions" not in ui:
        return _MISSING
    parsed = parse_permissions(ui["permissions"], problems, f"{label} _meta.ui.permissions")
    return _MISSING if parsed is None else parsed


def _read_domain(
    label: str, meta: Mapping[str, Any], ui: Mapping[str, Any], problems: list[str]
) -> Any:
    for key_label, present, value in (
        (f"{label} _meta.ui.domain", "domain" in ui, ui.get("domain")),
        (
            f"{label} openai/widgetDomain",
            "openai/widgetDomain" in meta,
            meta.get("openai/widgetDomain"),
        ),
    ):
        if not present or value is None:
            continue
        if (
            isinstance(value, str)
            and value.strip()
            and len(value) <= MAX_DOMAIN_LENGTH
            and not _CONTROL_OR_SPACE_RE.search(value.strip())
            and not any(ch in value for ch in "\"'<>;,\\")
        ):
            return value.strip()
        problems.append(f"{key_label} is not a usable domain and was ignored")
    return _MISSING


def _read_prefers_border(
    label: str, meta: Mapping[str, Any], ui: Mapping[str, Any], problems: list[str]
) -> Any:
    for key_label, present, value in (
        (f"{label} _meta.ui.prefersBorder", "prefersBorder" in ui, ui.get("prefersBorder")),
        (
            f"{label} openai/widgetPrefersBorder",
            "openai/widgetPrefersBorder" in meta,
            meta.get("openai/widgetPrefersBorder"),
        ),
    ):
        if not present or value is None:
            continue
        if isinstance(value, bool):
            return value
        problems.append(f"{key_label} is not a boolean and was ignored")
    return _MISSING


def _read_frame_size(
    label: str, meta: Mapping[str, Any], ui: Mapping[str, Any], problems: list[str]
) -> Any:
    key = "mcpui.dev/ui-preferred-frame-size"
    if meta.get(key) is None:
        return _MISSING
    size = parse_frame_size(meta[key])
    if size is None:
        problems.append(f"{label} {key} is not a [width, height] pair of CSS lengths")
        return _MISSING
    return size


def parse_frame_size(raw: Any) -> list[str] | None:
    """``[width, height]`` as CSS length strings (numbers become ``px``), or ``None``.

    Accepts ``["800px", "600px"]``, ``[800, 600]`` and ``{"width": 800, "height": 600}``.
    Only plain lengths pass, so the values are safe to put into a style attribute.
    """
    if isinstance(raw, Mapping):
        raw = [raw.get("width"), raw.get("height")]
    if not isinstance(raw, list | tuple) or len(raw) != 2:
        return None
    size: list[str] = []
    for item in raw:
        if isinstance(item, bool):
            return None
        if isinstance(item, int | float):
            if not math.isfinite(item) or item < 0 or item > 100_000:
                return None
            text = f"{item:g}px"
        elif isinstance(item, str):
            text = item.strip().lower()
            if re.fullmatch(r"\d{1,5}(?:\.\d{1,3})?", text):
                text += "px"
        else:
            return None
        if not _CSS_LENGTH_RE.match(text):
            return None
        size.append(text)
    return size


def _read_render_data(
    label: str, meta: Mapping[str, Any], ui: Mapping[str, Any], problems: list[str]
) -> Any:
    key = "mcpui.dev/ui-initial-render-data"
    if meta.get(key) is None:
        return _MISSING
    raw = meta[key]
    if not isinstance(raw, Mapping):
        problems.append(f"{label} {key} is a {describe_type(raw)}, not an object")
        return _MISSING
    data, data_problems = json_safe(raw, max_nodes=MAX_RENDER_DATA_NODES)
    if data_problems:
        problems.append(f"{label} {key}: " + "; ".join(data_problems))
    return data
