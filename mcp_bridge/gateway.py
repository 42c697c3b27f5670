"""Async entry points the rest of Atrium uses to talk to MCP servers.

One :class:`ConnectionManager` per event loop (the web server has one; tests have one per test).
Sync code (management commands, Celery) uses :func:`blocking_bridge` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from . import oauth, schema_pool, signals
from .blocking_bridge import BlockingBridge
from .connections import ConnectionManager
from .errors import AuthorizationRequired, BridgeError, InvalidArguments, ToolNotFound
from .models import OAUTH_MODES, AuthMode, McpServer, Tool, UiResource
from .schema import SchemaRefused, validate_arguments, validates_inline
from .server_requests import INBOUND_KINDS, InboundRequestHandler
from .server_spec import ServerSpec
from .services.catalogue import CatalogueChange, catalogue_apply
from .services.oauth_grants import grant_for, grant_record_call
from .services.servers import server_record_health, spec_for
from .services.ui_resources import ui_resource_store
from .spooled_media import SPOOL_SUBDIR

ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]

_managers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ConnectionManager] = (
    weakref.WeakKeyDictionary()
)


def manager() -> ConnectionManager:
    loop = asyncio.get_running_loop()
    found = _managers.get(loop)
    if found is None:
        found = ConnectionManager(
            on_tools_changed=_tools_changed,
            on_notification=_notified,
            inbound_kinds=INBOUND_KINDS,
            # Beside the staging files it becomes: staging renames it, never copies it.
            spool_dir=Path(settings.MEDIA_STAGING_ROOT) / SPOOL_SUBDIR,
        )
        _managers[loop] = found
    return found


async def _tools_changed(spec_key: str) -> None:
    """`notifications/tools/list_changed`: refresh that server's catalogue."""
    server = await database_sync_to_async(McpServer.objects.filter(slug=_slug_of(spec_key)).first)()
    if server is not None:
        # On failure health is recorded; the next call refreshes again.
        with contextlib.suppress(BridgeError):
            await refresh_catalogue(server)


def _slug_of(spec_key: str) -> str:
    return spec_key.split(":", 1)[0].split("~", 1)[0]  # "slug~g<grant>:…" signed-in specs


async def _notified(spec_key: str, method: str, params: dict[str, Any]) -> None:
    """Any other server notification: the apps above decide (``signals.server_notified``)."""
    server = await database_sync_to_async(McpServer.objects.filter(slug=_slug_of(spec_key)).first)()
    if server is not None:
        await signals.server_notified.asend(
            sender=McpServer, server=server, spec_key=spec_key, method=method, params=params
        )


async def close_all() -> None:
    found = _managers.pop(asyncio.get_running_loop(), None)
    if found is not None:
        await found.aclose()


@database_sync_to_async
def _record_health(server_id: int, error: str | None) -> None:
    server_record_health(server_id=server_id, error=error)


@database_sync_to_async
def _grant_for(server: McpServer, user_id: int | None):
    return grant_for(server=server, user_id=user_id)


async def _spec(server: McpServer, *, user_id: int | None = None) -> ServerSpec:
    """The spec to reach ``server`` on behalf of ``user_id`` (None: anyone's grant will do,
    for listings and UI resources). ``AuthorizationRequired`` when there is no grant."""
    if server.auth_mode not in OAUTH_MODES:
        return spec_for(server)
    grant = await _grant_for(server, user_id)
    if grant is None:
        shared = server.auth_mode == AuthMode.OAUTH_SHARED
        raise AuthorizationRequired(server.name, slug=server.slug, shared=shared)
    return oauth.spec_with_grant(server, grant)


async def server_spec(server: McpServer, *, user_id: int | None = None) -> ServerSpec:
    """The spec for requests made on behalf of ``user_id`` (their grant on a per-member
    OAuth server, the shared one on a shared server; plain config otherwise)."""
    return await _spec(server, user_id=user_id)


def _signed_in_error(spec: ServerSpec, server: McpServer, exc: BridgeError) -> BridgeError:
    """A request refused because the server no longer accepts the grant (the provider
    forgot it) reads as what it is: a sign-in is needed."""
    if isinstance(exc, AuthorizationRequired) or not oauth.lost_authorization(spec):
        return exc
    return AuthorizationRequired(
        server.name, slug=server.slug, shared=server.auth_mode == AuthMode.OAUTH_SHARED
    )


async def refresh_catalogue(server: McpServer) -> CatalogueChange:
    spec = await _spec(server)
    try:
        tools = await manager().list_tools(spec)
    except BridgeError as exc:
        exc = _signed_in_error(spec, server, exc)
        if isinstance(exc, AuthorizationRequired):
            raise exc from None
        await _record_health(server.pk, exc.user_message)
        raise
    return await database_sync_to_async(catalogue_apply)(server=server, tools=tools)


async def ensure_catalogue(server: McpServer) -> None:
    """Load a server's catalogue once (its first use); later changes arrive by notification."""
    if server.catalogue_refreshed_at is None:
        # A failure is recorded as the server's health; the tool list simply lacks its tools.
        with contextlib.suppress(BridgeError):
            await refresh_catalogue(server)


@database_sync_to_async
def _tool_row(server: McpServer, name: str) -> Tool | None:
    return Tool.objects.filter(server=server, name=name, present=True).first()


async def tool_for(server: McpServer, name: str, *, refresh: bool = True) -> Tool:
    """The catalogue row of a tool, refreshing the catalogue once if it is unknown."""
    tool = await _tool_row(server, name)
    if tool is None and refresh:
        await refresh_catalogue(server)
        tool = await _tool_row(server, name)
    if tool is None:
        raise ToolNotFound(name, server=server.name)
    return tool


async def _validate(arguments: dict[str, Any], tool: Tool) -> None:
    """Check arguments against the server's schema without holding the event loop every
    socket shares. The catalogue measured the schema when it was read: a refused one
    refuses the call; a cheap one checks arguments of up to ``inline_check_values``
    values here (linear time, a few ms at worst: ``schema.measure_input_schema``); all
    else is checked in a worker process, killed past its deadline (``schema_pool``)."""
    if tool.schema_refusal:
        raise SchemaRefused(tool.schema_refusal, tool=tool.name)
    schema = tool.input_schema or None
    try:
        text = json.dumps(arguments, default=str)
    except (TypeError, ValueError, RecursionError):
        text = None
    if text is not None and validates_inline(text, tool.inline_check_values):
        validate_arguments(arguments, schema, tool=tool.name)
        return
    await schema_pool.validate(arguments, schema, tool=tool.name)


async def call_tool(
    server: McpServer,
    tool: Tool,
    arguments: dict[str, Any],
    *,
    progress: ProgressFn | None = None,
    timeout: float | None = None,
    on_behalf_of: int | None = None,
    on_server_request: InboundRequestHandler | None = None,
) -> tuple[dict[str, Any], float]:
    """Validate arguments against the tool's schema, call it; returns (raw result, ms).

    ``on_behalf_of``: the user whose grant an OAuth-per-member server's call uses.
    ``on_server_request``: answers the server's elicitation and sampling requests during
    the call (``server_requests``); without one they are refused."""
    if not isinstance(arguments, dict):
        raise InvalidArguments(["arguments must be a JSON object"], tool=tool.name)
    await _validate(arguments, tool)
    if server.auth_mode in OAUTH_MODES:
        spec = await _signed_in_spec(server, tool.name, on_behalf_of)
    else:
        spec = spec_for(server)
    started = time.perf_counter()
    try:
        raw = await manager().call_tool(
            spec,
            tool.name,
            arguments,
            timeout=timeout or server.call_timeout,
            progress=progress,
            on_server_request=on_server_request,
        )
    except BridgeError as exc:
        exc = _signed_in_error(spec, server, exc)
        if isinstance(exc, AuthorizationRequired):
            raise exc from None
        if exc.code in {"server_unavailable", "server_crashed"}:
            await _record_health(server.pk, exc.user_message)
        raise
    latency_ms = (time.perf_counter() - started) * 1000
    if server.last_error:
        # A call that works again clears a recorded failure (no write on the happy path).
        await _record_health(server.pk, None)
        server.last_error = ""
    return raw, latency_ms


@database_sync_to_async
def _call_grant(server: McpServer, tool_name: str, user_id: int | None):
    if server.auth_mode == AuthMode.OAUTH_MEMBER and user_id is None:
        grant = None  # nobody to act for: never borrow another member's grant for a call
    else:
        grant = grant_for(server=server, user_id=user_id)
    grant_record_call(server=server, user_id=user_id, grant=grant, tool_name=tool_name)
    return grant


async def _signed_in_spec(server: McpServer, tool_name: str, user_id: int | None) -> ServerSpec:
    """A call's spec with the grant of the person it runs for (audited either way)."""
    grant = await _call_grant(server, tool_name, user_id)
    if grant is None:
        raise AuthorizationRequired(
            server.name, slug=server.slug, shared=server.auth_mode == AuthMode.OAUTH_SHARED
        )
    return oauth.spec_with_grant(server, grant)


@database_sync_to_async
def _latest_resource(server: McpServer, uri: str) -> UiResource | None:
    return UiResource.objects.filter(server=server, uri=uri).order_by("-fetched_at").first()


async def ui_resource(server: McpServer, uri: str, *, refresh: bool = True) -> UiResource:
    """The current version of a UI resource: read it from the server (cached by hash)."""
    try:
        spec = await _spec(server)
    except AuthorizationRequired:
        cached = await _latest_resource(server, uri)
        if cached is not None:
            return cached  # nobody signed in now: the last version read with a grant
        raise
    if not refresh:
        cached = await _latest_resource(server, uri)
        if cached is not None:
            return cached
    try:
        read = await manager().read_resource(spec, uri)
    except BridgeError:
        cached = await _latest_resource(server, uri)
        if cached is not None:
            return cached  # the last good version beats no view at all
        raise
    listing_meta = await _listing_meta(spec, uri)
    return await database_sync_to_async(ui_resource_store)(
        server=server, uri=uri, read_result=read, listing_meta=listing_meta
    )


async def _listing_meta(spec, uri: str) -> dict[str, Any] | None:
    """`_meta` of the resources/list entry (the fallback of N5); missing is fine."""
    try:
        listing = await manager().list_resources(spec)
    except BridgeError:
        return None
    for entry in listing:
        if isinstance(entry, dict) and entry.get("uri") == uri:
            meta = entry.get("_meta")
            return meta if isinstance(meta, dict) else None
    return None


async def read_resource(server: McpServer, uri: str) -> dict[str, Any]:
    return await manager().read_resource(await _spec(server), uri)


def blocking_bridge() -> BlockingBridge:
    """For sync code: `with blocking_bridge() as bridge: bridge.call_tool(spec, ...)`."""
    return BlockingBridge.shared()
