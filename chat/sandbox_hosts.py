"""Sandbox hosts: naming and parsing them (config.hosts routes requests by them).

Every MCP server's views run on an origin of their own *per workspace*,
``<label>.<SANDBOX_DOMAIN>`` (DESIGN §7, docs/sandbox.md): ``sandbox_label_for`` builds the
label, ``sandbox_origin_for`` the origin, ``sandbox_label_of`` reads it back from a Host
header; nothing else builds or parses a sandbox host. The Host header is normalized (case,
port, one trailing dot) before anything is decided. Any name under the sandbox domain but the
app's own is a sandbox host (``is_sandbox_host``): never the app, no cookies; only one DNS
label there names a view's origin (``sandbox_label_of``).
"""

from __future__ import annotations

import hashlib
import re

from django.conf import settings
from django.utils.crypto import salted_hmac

# One lower-case DNS label (≤ 63 characters): what a sandbox host's first label must be.
DNS_LABEL_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
LABEL_SALT = "atrium.sandbox-label"
LABEL_DIGEST = 20  # hex digits: 80 bits of HMAC


def server_key_for(server_slug: str) -> str:
    """A server's readable key: its slug when that is already one lower-case DNS label, else
    a digest of it (slugs may hold "_" or capitals, and "Foo" and "foo" are two servers:
    lower-casing could merge two servers' origins)."""
    if DNS_LABEL_RE.match(server_slug) and not server_slug.startswith("xn--"):
        return server_slug
    return "s-" + hashlib.sha256(server_slug.encode()).hexdigest()[:20]


def sandbox_label_for(server_slug: str, workspace_id: int) -> str:
    """The sandbox host label of one server's views in one workspace.

    One origin per (server, workspace), not per server: storage (localStorage, IndexedDB,
    cookies) belongs to an origin, so two workspaces sharing a server must not share one.
    The label is ``<server key>-<HMAC(SECRET_KEY, slug, workspace id)>``, not
    ``<key>--w<id>``: the workspace id is not exposed to the views or anyone who sees the
    URL, and no one origin tells another workspace's. It is stable while SECRET_KEY
    is (every process shares it); rotating SECRET_KEY moves every view to a new origin,
    which loses the views' storage, nothing else. The readable key prefix (cut to fit) only
    helps a person tell servers apart; the digest alone makes labels distinct. Always one
    valid lower-case DNS label: ≤ 63 characters, ending in a hex digit.
    """
    digest = salted_hmac(LABEL_SALT, f"{server_slug}\n{workspace_id}", algorithm="sha256")
    key = server_key_for(server_slug)[: 63 - 1 - LABEL_DIGEST]
    return f"{key}-{digest.hexdigest()[:LABEL_DIGEST]}"


def sandbox_origin_for(server_slug: str, workspace_id: int) -> str:
    """The sandbox origin of a server's views in a workspace: ``ATRIUM_SANDBOX_ORIGIN`` with
    its ``*.`` replaced by the label, a different site from the app and from every other
    (server, workspace) when the sandbox domain is a public suffix (docs/sandbox.md)."""
    label = sandbox_label_for(server_slug, workspace_id)
    return settings.ATRIUM_SANDBOX_ORIGIN.replace("*.", f"{label}.", 1)


def normalize_host(host: str) -> str:
    """The host name alone: lower case, no port, no trailing dot ("A.Localhost.:80" → "a.localhost")."""
    name = host.strip().lower()
    if name.startswith("["):
        return name.split("]")[0] + "]"
    name = name.rsplit(":", 1)[0] if ":" in name else name
    return name[:-1] if name.endswith(".") else name


def _under_sandbox_domain(name: str) -> bool:
    domain = settings.SANDBOX_DOMAIN
    return name == domain or name.endswith("." + domain)


def is_sandbox_host(host: str) -> bool:
    """Is this host (any name under the sandbox domain but the app's own) never the app?"""
    name = normalize_host(host)
    return name != settings.APP_HOST and _under_sandbox_domain(name)


def sandbox_label_of(host: str) -> str | None:
    """The label a sandbox host names (``sandbox_label_for``'s output when the host is a
    view's), or None when it is not one label under the sandbox domain."""
    name = normalize_host(host)
    if name == settings.APP_HOST or not _under_sandbox_domain(name):
        return None
    label = name[: -len(settings.SANDBOX_DOMAIN) - 1]
    return label if DNS_LABEL_RE.match(label) else None
