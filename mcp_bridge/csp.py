"""Content-Security-Policy and permission-policy construction for tool UI views (pure).

The policy is sent as an HTTP header on the sandbox proxy page (DESIGN §7). Its sources
come from a UI resource's declared ``_meta.ui.csp`` intersected with the domains the app
binding allows. Everything a server declares is untrusted: a source is accepted only if it
is exactly ``scheme://host[:port]`` (optionally ``*.``-wildcarded) with scheme http, https,
ws or wss. Paths are rejected rather than kept: CSP path matching is ignored after
redirects anyway, and a host is what an admin reviews.

Inside the sandbox the policy limits where a view can talk, not which JavaScript features
it may use: 'unsafe-inline' is allowed anyway, so eval, blob: workers and blob:/data: media
(what real apps need: three.js, PDF.js, video players) open no network path and are
allowed. Network sources never name the app, a sandbox origin, loopback / private /
link-local / unique-local addresses or a wildcard over a public suffix, unless the admin's
allowed list names that exact source (docs/sandbox.md).

This module imports nothing from the project but the pure ``public_suffix``, so every
other module may use it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from . import public_suffix
from .public_suffix import PublicSuffixList

CSP_CATEGORIES: tuple[str, ...] = (
    "connectDomains",
    "resourceDomains",
    "frameDomains",
    "baseUriDomains",
)
ALLOWED_SCHEMES: tuple[str, ...] = ("https", "http", "wss", "ws")
PERMISSION_NAMES: tuple[str, ...] = ("camera", "microphone", "geolocation", "clipboardWrite")
PERMISSION_POLICY_FEATURES: dict[str, str] = {
    "camera": "camera",
    "microphone": "microphone",
    "geolocation": "geolocation",
    "clipboardWrite": "clipboard-write",
}
MAX_SOURCE_LENGTH = 300
MAX_HOST_LENGTH = 253
MAX_SOURCES_PER_CATEGORY = 64

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_LABEL_RE = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
# WHATWG URL parsing treats a host whose last label looks numeric (decimal or 0x-hex) as
# an IPv4 address ("0x7f.1" is loopback), so such hosts must be canonical dotted quads.
_NUMERIC_LABEL_RE = re.compile(r"^(?:0x[0-9a-f]*|\d+)$")
_SCHEME_RE = re.compile(r"^([a-z][a-z0-9+.-]*):")
_CSP_KEYWORDS = frozenset(
    {
        "self",
        "none",
        "unsafe-inline",
        "unsafe-eval",
        "unsafe-hashes",
        "unsafe-allow-redirects",
        "strict-dynamic",
        "report-sample",
        "wasm-unsafe-eval",
        "inline-speculation-rules",
    }
)
_HASH_OR_NONCE_RE = re.compile(r"^(?:nonce|sha256|sha384|sha512)-", re.IGNORECASE)


# --------------------------------------------------------------------------- sources


class _Source(NamedTuple):
    scheme: str
    wildcard: bool
    host: str
    port: int | None  # None = the scheme's default port

    def render(self) -> str:
        prefix = "*." if self.wildcard else ""
        port = f":{self.port}" if self.port is not None else ""
        return f"{self.scheme}://{prefix}{self.host}{port}"


def _escape(value: Any, limit: int = 200) -> str:
    """Printable, bounded rendering of an untrusted value for audit records."""
    text = value if isinstance(value, str) else repr(value)
    text = text[: limit * 2]
    escaped = "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape", "backslashreplace").decode("ascii")
        for ch in text
    )
    # Lone surrogates are printable=False above, so they are escaped already.
    return escaped if len(escaped) <= limit else escaped[: limit - 1] + "…"


def _parse_source(value: Any) -> tuple[_Source | None, str | None]:
    if not isinstance(value, str):
        return None, "not a string"
    if not value:
        return None, "empty value"
    if len(value) > MAX_SOURCE_LENGTH:
        return None, "value too long"
    if any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in value):
        return None, "contains control characters"
    if any(ch.isspace() for ch in value) or "\u200b" in value or "\ufeff" in value:
        return None, "contains whitespace"
    if any(ch in value for ch in "'\"`"):
        return None, "contains quotes (CSP keywords are not allowed)"
    if ";" in value or "," in value:
        return None, "contains a directive or list separator"
    if "\\" in value:
        return None, "contains a backslash"
    if not value.isascii():
        return None, "contains non-ASCII characters (internationalized names must be punycode)"
    lowered = value.lower()
    if lowered in _CSP_KEYWORDS or _HASH_OR_NONCE_RE.match(lowered):
        return None, "CSP keywords, nonces and hashes are not allowed"
    if lowered == "*":
        return None, "a bare wildcard is not allowed"
    scheme_match = _SCHEME_RE.match(lowered)
    if scheme_match is None:
        return None, "missing scheme (expected https://host)"
    scheme = scheme_match.group(1)
    if scheme not in ALLOWED_SCHEMES:
        return None, f"scheme '{scheme}:' is not allowed"
    if not lowered.startswith(f"{scheme}://"):
        return None, "missing '//' after the scheme"
    rest = lowered[len(scheme) + 3 :]
    if rest.endswith("/"):
        rest = rest[:-1]
    if "@" in rest:
        return None, "credentials (user@host) are not allowed"
    if "?" in rest or "#" in rest:
        return None, "query strings and fragments are not allowed"
    if "/" in rest:
        return None, "paths are not allowed (use scheme://host[:port])"

    if rest.startswith("["):
        return _parse_ipv6_source(scheme, rest)
    if rest.count(":") > 1:
        return None, "malformed host or port"
    host, has_port, port_text = rest.partition(":")
    port, reason = _parse_port(scheme, port_text) if has_port else (None, None)
    if reason:
        return None, reason

    wildcard = host.startswith("*.")
    if wildcard:
        host = host[2:]
    if "*" in host:
        return None, "a wildcard is only allowed as the leftmost label ('*.example.com')"
    if not host:
        return None, "missing host"
    if len(host) > MAX_HOST_LENGTH:
        return None, "host name too long"
    labels = host.split(".")
    if any(not label for label in labels):
        return None, "empty label in host name"
    if _NUMERIC_LABEL_RE.match(labels[-1]):
        if wildcard:
            return None, "a wildcard cannot be combined with an IP address"
        if not _is_canonical_ipv4(host):
            return None, "ambiguous numeric host (only canonical IPv4 addresses are accepted)"
        return _Source(scheme, False, host, port), None
    for label in labels:
        if not _LABEL_RE.match(label):
            return None, "invalid character in host name"
        if label.startswith("xn--") and not _is_valid_punycode(label):
            return None, "invalid punycode label"
    if wildcard and len(labels) < 2:
        return None, "wildcard is too broad (needs at least '*.name.tld')"
    return _Source(scheme, wildcard, host, port), None


def _parse_ipv6_source(scheme: str, rest: str) -> tuple[_Source | None, str | None]:
    end = rest.find("]")
    if end == -1:
        return None, "malformed IPv6 address"
    address_text, after = rest[1:end], rest[end + 1 :]
    if "%" in address_text:
        return None, "IPv6 zone identifiers are not allowed"
    try:
        address = ipaddress.IPv6Address(address_text)
    except ValueError:
        return None, "malformed IPv6 address"
    port: int | None = None
    if after:
        if not after.startswith(":"):
            return None, "malformed host or port"
        port, reason = _parse_port(scheme, after[1:])
        if reason:
            return None, reason
    return _Source(scheme, False, f"[{address.compressed}]", port), None


def _parse_port(scheme: str, text: str) -> tuple[int | None, str | None]:
    if text == "*":
        return None, "port wildcards are not allowed"
    if not text.isdigit() or len(text) > 5 or not 1 <= int(text) <= 65535:
        return None, "invalid port"
    port = int(text)
    return (None if port == _DEFAULT_PORTS[scheme] else port), None


def _is_canonical_ipv4(host: str) -> bool:
    parts = host.split(".")
    if len(parts) != 4:
        return False
    for part in parts:
        if not part.isdigit() or (len(part) > 1 and part[0] == "0") or int(part) > 255:
            return False
    return True


def _is_valid_punycode(label: str) -> bool:
    try:
        decoded = label[4:].encode("ascii").decode("punycode")
        round_trip = decoded.encode("punycode").decode("ascii")
    except (UnicodeError, ValueError):
        return False
    # Must be a real IDN label: non-empty, printable, no spaces, and re-encodes the same.
    return (
        bool(decoded)
        and round_trip == label[4:]
        and all(ch.isprintable() and not ch.isspace() for ch in decoded)
    )


def validate_domain(value: Any) -> tuple[str | None, str | None]:
    """Validate one CSP source a server (or an admin) declared.

    Returns ``(normalized, None)`` — lower-cased ``scheme://host[:port]`` with the scheme's
    default port and a trailing ``/`` removed — or ``(None, reason)``.
    """
    source, reason = _parse_source(value)
    if source is None:
        return None, reason
    return source.render(), None


def _under(host: str, parent: str) -> bool:
    return host == parent or host.endswith("." + parent)


def _restricted_reason(
    source: _Source, reserved_hosts: Iterable[str], suffixes: PublicSuffixList | None
) -> tuple[str, str] | None:
    """Why a valid source may not reach a view's network directives, as ``(code, reason)``;
    None when it may (the admin list can still name it exactly)."""
    host = source.host
    address: ipaddress.IPv4Address | ipaddress.IPv6Address | None
    if host.startswith("["):
        literal = ipaddress.IPv6Address(host[1:-1])
        address = literal.ipv4_mapped or literal
    elif _is_canonical_ipv4(host):
        address = ipaddress.IPv4Address(host)
    else:
        address = None
    if address is not None:
        if not address.is_global:
            return "private_address", "a loopback, private, link-local or unique-local address"
        return None
    if host == "localhost" or host.endswith(".localhost") or "." not in host:
        return "private_address", "a loopback or local-network name"
    for reserved in reserved_hosts:
        reserved = reserved.lower().rstrip(".")
        if reserved and (_under(host, reserved) or (source.wildcard and _under(reserved, host))):
            return "reserved", "the app's own or a sandbox origin"
    if source.wildcard:
        if suffixes is None:
            return "public_suffix", "no Public Suffix List to check the wildcard against"
        if suffixes.is_public_suffix(host):
            return "public_suffix", "a wildcard over a public suffix"
    return None


_SYSTEM_LIST: Any = object()


def _covers(allowed: _Source, declared: _Source) -> bool:
    """Does an allowed source include everything a declared source would permit?"""
    if allowed.scheme != declared.scheme or allowed.port != declared.port:
        return False
    if not allowed.wildcard:
        return not declared.wildcard and allowed.host == declared.host
    # "*.example.com" covers "a.example.com" and "*.a.example.com" and "*.example.com",
    # but (as in CSP itself) not "example.com".
    if declared.wildcard and declared.host == allowed.host:
        return True
    return declared.host.endswith("." + allowed.host)


# --------------------------------------------------------------------------- policy


@dataclass
class CspResult:
    """The effective policy for one view.

    ``effective`` — validated declared ∩ allowed sources per category.
    ``dropped`` — every rejected input as ``{"category", "value", "reason", "code"}`` where
    ``code`` is ``"invalid"`` (bad syntax / hostile), ``"not_allowed"`` (valid but outside
    the binding's allowed domains), ``"too_many"``, or — for valid sources no view may reach
    unless the admin names them exactly — ``"private_address"``, ``"reserved"`` (the app or
    a sandbox origin) and ``"public_suffix"`` (``*.co.uk``).
    """

    directives: dict[str, list[str]]
    effective: dict[str, list[str]]
    dropped: list[dict[str, str]] = field(default_factory=list)

    def header(self) -> str:
        return "; ".join(f"{name} {' '.join(values)}" for name, values in self.directives.items())

    @property
    def needs_external_domains(self) -> bool:
        """True when the view may reach anything beyond the sandbox origin (tell the user)."""
        return any(self.effective.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "directives": {name: list(values) for name, values in self.directives.items()},
            "effective": {name: list(values) for name, values in self.effective.items()},
            "dropped": [dict(item) for item in self.dropped],
            "header": self.header(),
        }


def _allowed_sources(allowed: Any) -> dict[str, list[_Source]] | None:
    """Parse the binding's allowed domains; invalid admin entries are ignored (deny)."""
    if allowed is None:
        return None
    if isinstance(allowed, Mapping):
        per_category = {category: allowed.get(category) for category in CSP_CATEGORIES}
    elif isinstance(allowed, list | tuple | set | frozenset):
        per_category = {category: allowed for category in CSP_CATEGORIES}
    else:
        # Unknown shape: fail closed rather than open.
        per_category = {category: None for category in CSP_CATEGORIES}
    parsed: dict[str, list[_Source]] = {}
    for category, values in per_category.items():
        sources: list[_Source] = []
        if isinstance(values, list | tuple | set | frozenset):
            for value in values:
                source, _ = _parse_source(value)
                if source is not None:
                    sources.append(source)
        parsed[category] = sources
    return parsed


def build_csp(
    declared: Any,
    *,
    allowed: Any = None,
    reserved_hosts: Iterable[str] = (),
    suffixes: PublicSuffixList | None = _SYSTEM_LIST,
) -> CspResult:
    """Build the sandbox policy from ``_meta.ui.csp`` (``declared``) and the binding's
    allowed domains (``allowed``: same shape, or a flat list for every category; ``None``
    means no admin restriction).

    A declared concrete host is kept when an allowed source equals it or an allowed
    wildcard covers it; a declared wildcard is kept only under the same or a wider allowed
    wildcard. Nothing else from the input can reach the header. Sources on loopback,
    private networks, ``reserved_hosts`` (the app host and the sandbox domain, with every
    name under them) or wildcards over a public suffix (``suffixes``: the system's list by
    default) are kept only when ``allowed`` names that exact source.
    """
    if suffixes is _SYSTEM_LIST:
        suffixes = public_suffix.load()
    reserved_hosts = tuple(reserved_hosts)
    dropped: list[dict[str, str]] = []
    if declared is not None and not isinstance(declared, Mapping):
        dropped.append(
            {
                "category": "*",
                "value": _escape(declared),
                "reason": "invalid: declared CSP is not an object",
                "code": "invalid",
            }
        )
        declared = None
    declared = declared or {}
    allowed_sources = _allowed_sources(allowed)

    effective: dict[str, list[str]] = {}
    for category in CSP_CATEGORIES:
        kept: list[str] = []
        values = declared.get(category)
        if values is None:
            effective[category] = kept
            continue
        if not isinstance(values, list | tuple):
            dropped.append(
                {
                    "category": category,
                    "value": _escape(values),
                    "reason": "invalid: expected a list of domains",
                    "code": "invalid",
                }
            )
            effective[category] = kept
            continue
        for index, value in enumerate(values):
            if index >= MAX_SOURCES_PER_CATEGORY:
                dropped.append(
                    {
                        "category": category,
                        "value": _escape(value),
                        "reason": f"more than {MAX_SOURCES_PER_CATEGORY} domains declared",
                        "code": "too_many",
                    }
                )
                continue
            source, reason = _parse_source(value)
            if source is None:
                dropped.append(
                    {
                        "category": category,
                        "value": _escape(value),
                        "reason": f"invalid: {reason}",
                        "code": "invalid",
                    }
                )
                continue
            restricted = _restricted_reason(source, reserved_hosts, suffixes)
            if restricted and not (
                allowed_sources is not None and source in allowed_sources[category]
            ):
                dropped.append(
                    {
                        "category": category,
                        "value": _escape(value),
                        "reason": f"refused: {restricted[1]}",
                        "code": restricted[0],
                    }
                )
                continue
            if allowed_sources is not None and not any(
                _covers(candidate, source) for candidate in allowed_sources[category]
            ):
                dropped.append(
                    {
                        "category": category,
                        "value": _escape(value),
                        "reason": "not allowed by the app binding",
                        "code": "not_allowed",
                    }
                )
                continue
            rendered = source.render()
            if rendered not in kept:
                kept.append(rendered)
        effective[category] = kept

    resource = effective["resourceDomains"]
    # The spec's defaults, plus what opens no network path (module docstring): eval, and
    # blob:/data: for scripts, workers, images and media.
    directives: dict[str, list[str]] = {
        "default-src": ["'none'"],
        "script-src": ["'self'", "'unsafe-inline'", "'unsafe-eval'", "blob:", "data:", *resource],
        "worker-src": ["'self'", "blob:"],
        "style-src": ["'self'", "'unsafe-inline'", *resource],
        "img-src": ["'self'", "data:", "blob:", *resource],
        "font-src": ["'self'", *resource],
        "media-src": ["'self'", "data:", "blob:", *resource],
        "connect-src": list(effective["connectDomains"]) or ["'none'"],
        "frame-src": list(effective["frameDomains"]) or ["'none'"],
        "object-src": ["'none'"],
        "base-uri": list(effective["baseUriDomains"]) or ["'self'"],
    }
    return CspResult(directives=directives, effective=effective, dropped=dropped)


def binding_allowed(allowed: Any, *, listed_only: bool) -> Any:
    """``build_csp``'s ``allowed`` for a binding: its admin list (declared ∩ listed). With
    no list (``None``) every valid public declared domain is kept — unless the binding
    allows only listed domains (``csp_domain_mode`` "listed"): then nothing is."""
    if allowed is None and listed_only:
        return []
    return allowed


def csp_from_openai(meta: Any) -> dict[str, Any]:
    """Map the Apps SDK ``openai/widgetCSP`` object onto ``_meta.ui.csp`` keys.

    Accepts either the widgetCSP object itself or a whole ``_meta`` holding it.
    ``redirect_domains`` is carried as ``redirectDomains`` but is *not* a CSP category
    (it lists where ``openExternal`` may go), so ``build_csp`` ignores it.
    """
    if isinstance(meta, Mapping) and "openai/widgetCSP" in meta:
        meta = meta["openai/widgetCSP"]
    if not isinstance(meta, Mapping):
        return {}
    mapping = (
        ("connect_domains", "connectDomains"),
        ("resource_domains", "resourceDomains"),
        ("frame_domains", "frameDomains"),
        ("base_uri_domains", "baseUriDomains"),
        ("redirect_domains", "redirectDomains"),
    )
    converted: dict[str, Any] = {}
    for snake, camel in mapping:
        value = meta.get(snake, meta.get(camel))
        if value is not None:
            converted[camel] = value
    return converted


# --------------------------------------------------------------------------- permissions


def parse_permissions(
    raw: Any, problems: list[str] | None = None, label: str = "permissions"
) -> tuple[str, ...] | None:
    """Declared permission names in canonical order.

    Accepts the spec form ``{"camera": {}, ...}`` (a key counts when its value is an object
    or ``true``) and a list of names. Returns ``None`` when ``raw`` is neither.
    """
    problems = problems if problems is not None else []
    declared: set[str] = set()
    if isinstance(raw, Mapping):
        for name, value in raw.items():
            if name not in PERMISSION_NAMES:
                problems.append(f"{label}: unknown permission {_escape(name, 60)} ignored")
            elif isinstance(value, Mapping) or value is True:
                declared.add(name)
            elif value not in (None, False):
                problems.append(f"{label}.{name} is not an object; ignored")
    elif isinstance(raw, list | tuple | set | frozenset):
        for name in raw:
            if isinstance(name, str) and name in PERMISSION_NAMES:
                declared.add(name)
            else:
                problems.append(f"{label}: unknown permission {_escape(name, 60)} ignored")
    else:
        problems.append(f"{label} is not an object")
        return None
    return tuple(name for name in PERMISSION_NAMES if name in declared)


def permissions_allow_attribute(declared: Any, granted: Iterable[str]) -> tuple[str, list[str]]:
    """The iframe ``allow`` attribute for permissions both declared and granted.

    Returns ``("camera; clipboard-write", ["camera", "clipboardWrite"])``; names are in a
    fixed order so the attribute is stable.
    """
    declared_names = parse_permissions(declared) or ()
    try:
        granted_names = {name for name in granted if isinstance(name, str)}
    except TypeError:
        granted_names = set()
    effective = [name for name in declared_names if name in granted_names]
    attribute = "; ".join(PERMISSION_POLICY_FEATURES[name] for name in effective)
    return attribute, effective
