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
from typing import Any, cast

import mcp_types
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
from .services.oauth_grants import grant_call_needs_sign_in, grant_for, grant_record_call
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
            # Sampling with tools (SEP-1577) is implemented (chat.providers.sampling_format);
            # includeContext is not (read as "none"), so `context` is not declared.
            sampling_capability=mcp_types.SamplingCapability(
                tools=mcp_types.SamplingToolsCapability()
            ),
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


async def _spec(
    server: McpServer, *, user_id: int | None = None, unsigned: bool = True
) -> ServerSpec:
    """The spec to reach ``server`` on behalf of ``user_id`` (None: anyone's grant will do,
    for listings and UI resources). With no grant, a spec without one: a server that lists
    its tools to anyone is read before anyone connects (sign-in on demand), and one that
    answers 401 raises ``AuthorizationRequired`` (``_signed_in_error``)."""
    if server.auth_mode == AuthMode.OAUTH_MACHINE:
        return oauth.machine_spec(server)
    if server.auth_mode not in OAUTH_MODES:
        return spec_for(server)
    grant = await _grant_for(server, user_id)
    if grant is None:
        if not unsigned:
            shared = server.auth_mode == AuthMode.OAUTH_SHARED
            raise AuthorizationRequired(server.name, slug=server.slug, shared=shared)
        return oauth.unsigned_spec(server)
    return oauth.spec_with_grant(server, grant)


async def server_spec(server: McpServer, *, user_id: int | None = None) -> ServerSpec:
    """The spec for requests made on behalf of ``user_id`` (their grant on a per-member
    OAuth server, the shared one on a shared server; plain config otherwise).
    ``AuthorizationRequired`` when there is no grant (these callers map errors
    themselves; listings and calls through this module are tried without one)."""
    return await _spec(server, user_id=user_id, unsigned=False)


def _signed_in_error(spec: ServerSpec, server: McpServer, exc: BridgeError) -> BridgeError:
    """A request refused for want of a sign-in reads as what it is: the server no longer
    accepts the grant (the provider forgot it), wants more scope than it grants (a step-up:
    the grant is kept), or answered 401 to a request made without a grant."""
    if isinstance(exc, AuthorizationRequired):
        return exc
    shared = server.auth_mode == AuthMode.OAUTH_SHARED
    if oauth.step_up_scope(spec) is not None:
        return AuthorizationRequired(
            server.name, slug=server.slug, shared=shared, reason="insufficient_scope"
        )
    if oauth.lost_authorization(spec):
        return AuthorizationRequired(server.name, slug=server.slug, shared=shared)
    if oauth.asked_for_sign_in(spec):
        return AuthorizationRequired(
            server.name, slug=server.slug, shared=shared, reason="server_asked_for_sign_in"
        )
    return exc


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
    spec = await _call_spec(server, tool.name, on_behalf_of)
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
            await _call_refused(server, tool.name, on_behalf_of, exc)
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
    grant_record_call(
        server=server, user_id=user_id, grant=grant, tool_name=tool_name, unsigned=grant is None
    )
    return grant


async def _signed_in_spec(server: McpServer, tool_name: str, user_id: int | None) -> ServerSpec:
    """A call's spec with the grant of the person it runs for (audited either way); with
    none, tried without one: the server may answer it (sign-in on demand), else its 401
    raises ``AuthorizationRequired`` and the person is asked to connect."""
    grant = await _call_grant(server, tool_name, user_id)
    if grant is None:
        return oauth.unsigned_spec(server)
    return oauth.spec_with_grant(server, grant)


async def _call_spec(server: McpServer, tool_name: str, user_id: int | None) -> ServerSpec:
    """The spec of a tool call on behalf of ``user_id``, for every auth mode."""
    if server.auth_mode in OAUTH_MODES:
        return await _signed_in_spec(server, tool_name, user_id)
    if server.auth_mode == AuthMode.OAUTH_MACHINE:
        return oauth.machine_spec(server)
    return spec_for(server)


@database_sync_to_async
def _call_refused(
    server: McpServer, tool_name: str, user_id: int | None, exc: AuthorizationRequired
) -> None:
    """A call that ended asking for a sign-in, audited with its reason (a step-up is
    audited where it is seen, with the scopes)."""
    reason = exc.details.get("reason") or "grant_refused"
    if reason != "insufficient_scope":
        grant_call_needs_sign_in(
            server=server, user_id=user_id, tool_name=tool_name, reason=str(reason)
        )


@database_sync_to_async
def _latest_resource(server: McpServer, uri: str) -> UiResource | None:
    return UiResource.objects.filter(server=server, uri=uri).order_by("-fetched_at").first()


async def ui_resource(
    server: McpServer, uri: str, *, refresh: bool = True, reuse: bool = False
) -> UiResource:
    """The current version of a UI resource: read it from the server (cached by hash).

    ``reuse``: the version this connection read last, if the server has told of no change
    to the URI since — a ``notifications/resources/updated`` for it, ``list_changed``, a
    reconnect or a gap in the listen stream read it again; a server that cannot tell
    (``ConnectionManager.keep_mark``) is read every time. Without it (and with
    ``refresh``), always read; what is read is kept for the next ``reuse``."""
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
    connections = manager()
    owner = ("ui_resource", server.pk)
    if reuse:
        kept = connections.kept(spec, owner, uri)
        if kept is not None:
            return cast(UiResource, kept)
    mark = await connections.keep_mark(spec, uri)  # before the read: a change meanwhile counts
    try:
        read = await connections.read_resource(spec, uri)
    except BridgeError as exc:
        cached = await _latest_resource(server, uri)
        if cached is not None:
            return cached  # the last good version beats no view at all
        raise _signed_in_error(spec, server, exc) from None
    listing_meta = await _listing_meta(spec, uri)
    resource = await database_sync_to_async(ui_resource_store)(
        server=server, uri=uri, read_result=read, listing_meta=listing_meta
    )
    if mark is not None:
        connections.keep(mark, owner, resource)
    return resource


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
    spec = await _spec(server)
    try:
        return await manager().read_resource(spec, uri)
    except BridgeError as exc:
        raise _signed_in_error(spec, server, exc) from None


# ---- tool calls run as MCP tasks (chat.calls.mcp_tasks; docs/mcp-client.md) -----------


async def tool_task_support(server: McpServer, tool: Tool) -> tuple[bool, str]:
    """``(the server declares tasks for tools/call, the tool's execution.taskSupport)``,
    read from the live connection's tool listing (once per connection)."""
    spec = await _spec(server)
    return await manager().tool_task_support(spec, tool.name)


async def call_tool_as_task(
    server: McpServer,
    tool: Tool,
    arguments: dict[str, Any],
    *,
    ttl_ms: int | None,
    on_behalf_of: int | None = None,
) -> dict[str, Any]:
    """Validate the arguments like ``call_tool``, then ``tools/call`` as a task; returns
    the created task as wire JSON (``ConnectionManager.call_tool_as_task``)."""
    if not isinstance(arguments, dict):
        raise InvalidArguments(["arguments must be a JSON object"], tool=tool.name)
    await _validate(arguments, tool)
    spec = await _call_spec(server, tool.name, on_behalf_of)
    try:
        return await manager().call_tool_as_task(
            spec, tool.name, arguments, ttl_ms=ttl_ms, timeout=server.call_timeout
        )
    except BridgeError as exc:
        raise _signed_in_error(spec, server, exc) from None


async def _task_spec(server: McpServer, on_behalf_of: int | None) -> ServerSpec:
    """The spec a task's follow-up requests use: the grant that created it (not audited
    per poll: its ``tools/call`` was)."""
    return await _spec(server, user_id=on_behalf_of)


async def task_get(
    server: McpServer, task_id: str, *, on_behalf_of: int | None = None
) -> dict[str, Any]:
    return await manager().task_get(await _task_spec(server, on_behalf_of), task_id)


async def task_result(
    server: McpServer,
    task_id: str,
    *,
    on_behalf_of: int | None = None,
    timeout: float | None = None,
    on_server_request: InboundRequestHandler | None = None,
) -> dict[str, Any]:
    return await manager().task_result(
        await _task_spec(server, on_behalf_of),
        task_id,
        timeout=timeout,
        on_server_request=on_server_request,
    )


async def task_cancel(
    server: McpServer, task_id: str, *, on_behalf_of: int | None = None
) -> dict[str, Any]:
    return await manager().task_cancel(await _task_spec(server, on_behalf_of), task_id)


def blocking_bridge() -> BlockingBridge:
    """For sync code: `with blocking_bridge() as bridge: bridge.call_tool(spec, ...)`."""
    return BlockingBridge.shared()
