"""What the servers bound to a thread offer: prompts, resources and resource templates.

Read live from the servers (``mcp_bridge.gateway``), remembered per server and process for
``LISTING_TTL`` seconds, and forgotten at once when the server announces
``prompts/list_changed`` or ``resources/list_changed`` (``receivers``). Only servers a
binding in the thread's scope enables are asked (``bindings.selectors.bindings_for_thread``,
the selector ``offered_tools`` uses); ``ui://`` resources (app views) are left out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

from channels.db import database_sync_to_async

from bindings.selectors import bindings_for_thread
from mcp_bridge import gateway
from mcp_bridge.errors import BridgeError
from mcp_bridge.models import McpServer

from .content import is_ui_resource

LISTING_TTL = 60.0
MAX_ENTRIES = 500  # per server and kind
Kind = Literal["prompts", "resources", "templates"]

_SHOWN_PROBLEMS = {"authorization_required", "server_unavailable", "server_crashed"}

_cache: dict[tuple[int, Kind], tuple[float, list[dict[str, Any]]]] = {}


def forget(server_id: int, *kinds: Kind) -> None:
    for kind in kinds:
        _cache.pop((server_id, kind), None)


@dataclass
class Listing:
    entries: list[dict[str, Any]]
    problems: list[dict[str, str]]  # servers that could not be asked, and why


@database_sync_to_async
def bound_servers(thread: Any) -> list[McpServer]:
    return sorted((b.server for b in bindings_for_thread(thread)), key=lambda s: s.slug)


async def bound_server(thread: Any, slug: Any) -> McpServer | None:
    if not isinstance(slug, str):
        return None
    return next((s for s in await bound_servers(thread) if s.slug == slug), None)


async def _fetch(server: McpServer, kind: Kind, user_id: int) -> list[dict[str, Any]]:
    key = (server.pk, kind)
    cached = _cache.get(key)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    spec = await gateway.server_spec(server, user_id=user_id)
    manager = gateway.manager()
    if kind == "prompts":
        rows = await manager.list_prompts(spec)
    elif kind == "resources":
        rows = [r for r in await manager.list_resources(spec) if not is_ui_resource(r.get("uri"))]
    else:
        rows = [
            t
            for t in await manager.list_resource_templates(spec)
            if not is_ui_resource(t.get("uriTemplate"))
        ]
    rows = [r for r in rows if isinstance(r, dict)][:MAX_ENTRIES]
    _cache[key] = (time.monotonic() + LISTING_TTL, rows)
    return rows


async def thread_listing(thread: Any, user_id: int, kinds: tuple[Kind, ...]) -> Listing:
    """Entries of every bound server, each tagged with ``server`` (slug), ``serverName``
    and ``kind``; a server that fails (or needs a sign-in) is named in ``problems``."""
    entries: list[dict[str, Any]] = []
    problems: list[dict[str, str]] = []
    for server in await bound_servers(thread):
        for kind in kinds:
            try:
                rows = await _fetch(server, kind, user_id)
            except BridgeError as exc:
                # A server that offers no prompts (or resources) answers with an error too:
                # only the reasons a person can act on are shown.
                if exc.code in _SHOWN_PROBLEMS:
                    problems.append({"server": server.slug, "message": exc.user_message})
                continue
            for row in rows:
                entries.append(
                    {**row, "server": server.slug, "serverName": server.name, "kind": kind}
                )
    return Listing(entries=entries, problems=problems)


async def find_prompt(server: McpServer, name: str, user_id: int) -> dict[str, Any] | None:
    for row in await _fetch(server, "prompts", user_id):
        if row.get("name") == name:
            return row
    return None


async def find_resource(server: McpServer, uri: str, user_id: int) -> dict[str, Any] | None:
    """The listing entry for ``uri``: a listed resource, or a match of a template."""
    for row in await _fetch(server, "resources", user_id):
        if row.get("uri") == uri:
            return row
    for template in await _fetch(server, "templates", user_id):
        if _matches(str(template.get("uriTemplate") or ""), uri):
            return {**template, "uri": uri}
    return None


def _matches(template: str, uri: str) -> bool:
    """A URI an RFC 6570 level-1 template (``{name}`` segments) can produce."""
    head, _, _ = template.partition("{")
    return bool(head) and uri.startswith(head) and "{" in template
