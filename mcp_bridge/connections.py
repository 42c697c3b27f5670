"""Requests to MCP servers: ``ConnectionManager``, one long-lived connection per server config.

Pure async Python on the ``mcp`` 2.x SDK — no Django here, so this module runs the same in
the ASGI process, a management command or a Celery worker (through
``mcp_bridge.blocking_bridge.BlockingBridge``).

The parts, each in its own module:

* ``mcp_bridge.server_spec`` — ``ServerSpec``, how to reach one server. Its ``key`` names the
  connection; a changed configuration gets a new key and therefore a new connection.
* ``mcp_bridge.connection_pool`` — opening, holding, replacing and closing connections (one
  owner task each), and each server's health.
* ``mcp_bridge.transports`` — stdio, streamable HTTP and SSE under a connection.
* ``mcp_bridge.connection_errors`` — which ``mcp_bridge.errors`` error a failure becomes.
* ``mcp_bridge.call_watch`` — a call's progress relayed, and the caller's cancellation.
* this module — the requests: run one on a live connection, retry it when that is safe,
  honour timeouts, and make what the server said storable (``uimeta.storable``).

How a request goes:

* The connection opens lazily on first use. A call that was in flight when its connection
  died raises ``ServerCrashed``; requests that provably never reached the server, and
  idempotent requests (listings, reads, pings), are retried once on a fresh connection.
* Timeouts and caller cancellation (``asyncio`` task cancellation or ``cancel_event``) make the
  SDK abandon the request and tell the server (``notifications/cancelled``, or an aborted
  POST on 2026-era streamable HTTP); the connection stays usable.
* The full tool listing is walked once per connection before its first call (see
  ``_ensure_tool_listing``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, TypeVar, cast

import anyio
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcp_bridge.call_watch import ProgressCallback, ProgressRelay, unless_set
from mcp_bridge.connection_errors import (
    Request,
    error_text,
    is_session_lost,
    lost_connection_error,
    malformed_result_error,
    never_reached_server,
    protocol_error,
    reports_unknown_tool,
)
from mcp_bridge.connection_pool import (
    ConnectionPool,
    HealthCallback,
    HealthInfo,
    Link,
    NotificationCallback,
    ServerState,
    ToolsChangedCallback,
    utcnow,
)
from mcp_bridge.errors import (
    BridgeError,
    ServerUnavailable,
    TaskNotFound,
    TaskUnsupported,
    ToolNotFound,
)
from mcp_bridge.server_requests import InboundRequestHandler
from mcp_bridge.server_spec import ServerSpec
from mcp_bridge.uimeta import storable

__all__ = [
    "ConnectionManager",
    "KeepMark",
    "TaskNotFound",
    "TaskUnsupported",
]

logger = logging.getLogger(__name__)

_MAX_PAGES = 1000
_WARM_UP_SECONDS = 10.0
_HEAR_SECONDS = 5.0  # how long a first read to keep waits for the listen stream to name it
_KEPT_PER_CONNECTION = 64  # resources kept per connection (each is one UI document's row)

_T = TypeVar("_T")


class ConnectionManager:
    """Connections to many MCP servers, for one event loop.

    Usage::

        manager = ConnectionManager(on_tools_changed=refresh_catalogue)
        result = await manager.call_tool(spec, "echo", {"text": "hi"})
        ...
        await manager.aclose()

    All methods take the ``ServerSpec``; the connection is opened on first use. Results are
    returned in MCP wire JSON (camelCase, ``_meta``), exactly as the server sent them.
    """

    def __init__(
        self,
        *,
        on_tools_changed: ToolsChangedCallback | None = None,
        on_health: HealthCallback | None = None,
        on_notification: NotificationCallback | None = None,
        inbound_kinds: frozenset[str] = frozenset(),
        sampling_capability: types.SamplingCapability | None = None,
        stderr_dir: str | os.PathLike[str] | None = None,
        spool_dir: str | os.PathLike[str] | None = None,
        idle_timeout: float | None = None,
        client_name: str = "atrium",
        client_version: str = "0.1.0",
    ) -> None:
        """``stderr_dir``: where stdio servers' stderr logs go (default: a temp folder).
        ``idle_timeout``: close a connection unused for that many seconds (it reopens on the
        next call); ``None`` keeps connections until closed. ``spool_dir``: where stdio
        servers' long media literals are streamed as they arrive (``mcp_bridge.spooled_media``;
        ``None``: held in memory). ``inbound_kinds``: the server requests answered
        (``mcp_bridge.server_requests``), declared as capabilities; ``on_notification``:
        logging, resource, prompt and elicitation-complete notifications."""
        self._pool = ConnectionPool(
            on_tools_changed=on_tools_changed,
            on_health=on_health,
            stderr_dir=(
                Path(stderr_dir)
                if stderr_dir is not None
                else Path(tempfile.gettempdir()) / "atrium-mcp"
            ),
            spool_dir=Path(spool_dir) if spool_dir is not None else None,
            idle_timeout=idle_timeout,
            client_info=types.Implementation(name=client_name, version=client_version),
            on_notification=on_notification,
            inbound_kinds=inbound_kinds,
            sampling_capability=sampling_capability,
        )
        # Each connection's tools' execution.taskSupport (``tool_task_support``).
        self._task_modes: weakref.WeakKeyDictionary[Link, dict[str, str]] = (
            weakref.WeakKeyDictionary()
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # ---- public API ----------------------------------------------------------------

    async def call_tool(
        self,
        spec: ServerSpec,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressCallback | None = None,
        cancel_event: asyncio.Event | None = None,
        on_server_request: InboundRequestHandler | None = None,
    ) -> dict[str, Any]:
        """Call a tool; returns the ``CallToolResult`` as wire JSON (``isError`` results too).

        ``on_server_request`` answers the elicitation and sampling requests the server sends
        while this call runs (``mcp_bridge.server_requests``).

        Raises ``ToolTimeout`` after ``timeout`` (default ``spec.call_timeout``) seconds,
        ``Cancelled`` when ``cancel_event`` is set first, ``ServerCrashed`` when the server
        died during the call, ``ServerUnavailable`` when it cannot be reached,
        ``ToolNotFound`` / ``InvalidArguments`` when the server rejects the call. Cancelling
        the awaiting task cancels the request on the server too.
        """
        budget = spec.call_timeout if timeout is None else timeout
        relay = ProgressRelay(spec.label, name, progress) if progress else None
        args = dict(arguments or {})
        request = Request("tools/call", name, idempotent=False)

        async def op(link: Link, client: Client) -> types.CallToolResult:
            await self._ensure_tool_listing(link, client)
            with link.routes.route(on_server_request):
                return await client.call_tool(
                    name, args, read_timeout_seconds=budget, progress_callback=relay
                )

        work = self._run(spec, request, op, timeout=budget)
        try:
            if cancel_event is None:
                result = await work
            else:
                result = await unless_set(work, cancel_event)
        finally:
            if relay is not None:
                # Progress is delivered before the result: let running callbacks finish.
                await relay.drain()
        wire = _dump_result(result)
        if reports_unknown_tool(wire, name):
            raise ToolNotFound(name, server=spec.label)
        return wire

    async def list_tools(self, spec: ServerSpec) -> list[dict[str, Any]]:
        """All tools of the server (every page), as wire JSON."""

        async def op(link: Link, client: Client) -> list[dict[str, Any]]:
            tools = await self._walk_tools(client)
            link.tools_listed = True
            return tools

        return await self._run(spec, Request("tools/list"), op)

    async def list_resources(self, spec: ServerSpec) -> list[dict[str, Any]]:
        """All resources of the server (every page), as wire JSON."""

        async def op(link: Link, client: Client) -> list[dict[str, Any]]:
            resources: list[dict[str, Any]] = []
            async for page in _pages(
                lambda cursor: client.list_resources(cursor=cursor, cache_mode="bypass")
            ):
                resources.extend(_dump(resource) for resource in page.resources)
            return resources

        return await self._run(spec, Request("resources/list"), op)

    async def read_resource(self, spec: ServerSpec, uri: str) -> dict[str, Any]:
        """Read one resource (always from the server, never a cache); wire JSON."""

        async def op(link: Link, client: Client) -> types.ReadResourceResult:
            return await client.read_resource(uri, cache_mode="bypass")

        result = await self._run(spec, Request("resources/read", uri), op)
        return _dump(result)

    async def list_resource_templates(self, spec: ServerSpec) -> list[dict[str, Any]]:
        """All resource templates of the server (every page), as wire JSON."""

        async def op(link: Link, client: Client) -> list[dict[str, Any]]:
            templates: list[dict[str, Any]] = []
            async for page in _pages(
                lambda cursor: client.list_resource_templates(cursor=cursor, cache_mode="bypass")
            ):
                templates.extend(_dump(template) for template in page.resource_templates)
            return templates

        return await self._run(spec, Request("resources/templates/list"), op)

    async def subscribe_resource(self, spec: ServerSpec, uri: str) -> None:
        """``resources/subscribe``: the server sends ``notifications/resources/updated``."""

        async def op(link: Link, client: Client) -> None:
            await client.subscribe_resource(uri)

        await self._run(spec, Request("resources/subscribe", uri), op)

    # ---- what a connection keeps (UI documents; bench/README.md issue 28) -------------

    def kept(self, spec: ServerSpec, owner: Hashable, uri: str) -> Any | None:
        """What ``keep`` stored for ``(owner, uri)`` on ``spec``'s open connection, if the
        server has told of no change to ``uri`` since (and can: ``keep_mark``); else None.
        A reconnect keeps nothing; ``notifications/resources/updated`` for the URI,
        ``resources/list_changed`` and a gap in the listen stream drop it."""
        link = self._pool.live_link(spec.key)
        if link is None or uri not in link.heard:
            return None
        return link.kept.get((owner, uri))

    async def keep_mark(self, spec: ServerSpec, uri: str) -> KeepMark | None:
        """Before reading ``uri`` to keep what it gives: the connection is made to hear of
        changes to it — a 2026-era connection names it in its ``subscriptions/listen``
        stream; a 2025-era one sends ``resources/subscribe`` if the server declares it —
        and the changes heard so far are marked. None: the server cannot tell of a change
        (nothing is kept: the caller reads every time)."""

        async def op(link: Link, client: Client) -> KeepMark | None:
            if not await _hear(link, client, uri):
                return None
            return KeepMark(link, uri, link.change_mark(uri))

        try:
            return await self._run(spec, Request("resources/subscribe", uri, idempotent=True), op)
        except BridgeError:
            return None

    def keep(self, mark: KeepMark, owner: Hashable, value: Any) -> bool:
        """Keep ``value`` for ``(owner, mark.uri)`` on the connection the mark was taken on,
        unless that connection has ended or heard of a change to the URI since the mark (a
        read that raced a change is not kept)."""
        link = mark.link
        if (
            not link.usable
            or mark.uri not in link.heard
            or link.change_mark(mark.uri) != mark.changes
        ):
            return False
        if (owner, mark.uri) not in link.kept and len(link.kept) >= _KEPT_PER_CONNECTION:
            link.kept.pop(next(iter(link.kept)))  # the oldest
        link.kept[(owner, mark.uri)] = value
        return True

    async def list_prompts(self, spec: ServerSpec) -> list[dict[str, Any]]:
        """All prompts of the server (every page), as wire JSON."""

        async def op(link: Link, client: Client) -> list[dict[str, Any]]:
            prompts: list[dict[str, Any]] = []
            async for page in _pages(
                lambda cursor: client.list_prompts(cursor=cursor, cache_mode="bypass")
            ):
                prompts.extend(_dump(prompt) for prompt in page.prompts)
            return prompts

        return await self._run(spec, Request("prompts/list"), op)

    async def get_prompt(
        self,
        spec: ServerSpec,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        on_server_request: InboundRequestHandler | None = None,
    ) -> dict[str, Any]:
        """``prompts/get``; the ``GetPromptResult`` as wire JSON."""

        async def op(link: Link, client: Client) -> types.GetPromptResult:
            with link.routes.route(on_server_request):
                return await client.get_prompt(name, dict(arguments or {}))

        return _dump(await self._run(spec, Request("prompts/get", name, idempotent=True), op))

    async def complete(
        self,
        spec: ServerSpec,
        ref: dict[str, Any],
        argument: dict[str, str],
        context_arguments: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """``completion/complete`` for a prompt's or a resource template's argument.

        ``ref``: ``{"type": "ref/prompt", "name": ...}`` or
        ``{"type": "ref/resource", "uri": ...}``; ``argument``: ``{"name", "value"}``.
        Returns the ``completion`` object (``values``, ``total``, ``hasMore``)."""
        reference: types.PromptReference | types.ResourceTemplateReference
        if ref.get("type") == "ref/prompt":
            reference = types.PromptReference(type="ref/prompt", name=str(ref.get("name", "")))
        else:
            reference = types.ResourceTemplateReference(
                type="ref/resource", uri=str(ref.get("uri", ""))
            )

        async def op(link: Link, client: Client) -> types.CompleteResult:
            return await client.complete(
                reference,
                dict(argument),
                context_arguments=dict(context_arguments) if context_arguments else None,
            )

        result = await self._run(spec, Request("completion/complete", idempotent=True), op)
        return _dump(result.completion)

    async def set_logging_level(self, spec: ServerSpec, level: str) -> None:
        """``logging/setLevel`` (2025-era connections; 2026-era ones opt in per request)."""

        async def op(link: Link, client: Client) -> None:
            await client.set_logging_level(cast(types.LoggingLevel, level))

        await self._run(spec, Request("logging/setLevel", idempotent=True), op)

    async def ping(self, spec: ServerSpec) -> float:
        """Round-trip one request; returns the latency in seconds.

        2025-era connections send ``ping``; the 2026 protocol removed it, so those connections
        send ``server/discover`` instead.
        """

        async def op(link: Link, client: Client) -> float:
            started = time.perf_counter()
            if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                await client.session.send_discover(client.protocol_version)
            else:
                await client.session.send_ping()
            return time.perf_counter() - started

        return await self._run(spec, Request("ping"), op)

    async def connect(self, spec: ServerSpec) -> dict[str, Any]:
        """Open the connection now (if needed); returns what the server said about itself:
        ``protocolVersion``, ``serverInfo``, ``capabilities``, ``instructions``."""

        async def op(link: Link, client: Client) -> dict[str, Any]:
            info = client.server_info
            described = {
                "protocolVersion": client.protocol_version,
                "serverInfo": info.model_dump(by_alias=True, mode="json", exclude_none=True)
                if info is not None
                else None,
                "capabilities": _dump_result(client.server_capabilities),
                "instructions": client.instructions,
            }
            return cast(dict[str, Any], storable(described))

        return await self._run(spec, Request("connect"), op)

    # ---- tasks (MCP 2025-11-25: task-augmented tools/call) ---------------------------
    #
    # The SDK has the types but no client methods for tasks (its method tables leave
    # tasks/* out, and it validates a tools/call answer as a CallToolResult), so these send
    # the requests raw on the connection's session and validate the answers here.

    async def tool_task_support(self, spec: ServerSpec, name: str) -> tuple[bool, str]:
        """``(server declares tasks.requests.tools.call, the tool's execution.taskSupport)``;
        taskSupport is ``"forbidden"`` when absent. The listing is read once per connection
        (again after ``notifications/tools/list_changed``)."""

        async def op(link: Link, client: Client) -> tuple[bool, str]:
            modes = self._task_modes.get(link)
            if modes is None or not link.tools_listed:
                tools = await self._walk_tools(client)
                link.tools_listed = True
                modes = {
                    str(tool.get("name")): str(
                        (tool.get("execution") or {}).get("taskSupport") or "forbidden"
                    )
                    for tool in tools
                }
                self._task_modes[link] = modes
            return _declares_tool_tasks(client), modes.get(name, "forbidden")

        return await self._run(spec, Request("tools/list"), op)

    async def call_tool_as_task(
        self,
        spec: ServerSpec,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        ttl_ms: int | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """``tools/call`` with ``params.task``: returns the ``CreateTaskResult``'s ``task`` as
        wire JSON (``taskId``, ``status``, ``statusMessage``, ``ttl``, ``pollInterval`` …).

        A server that answered with the tool's result at once (it may, for a tool whose
        taskSupport is ``optional``) gives ``{"taskId": "", "status": "completed",
        "result": <CallToolResult>}``. Raises ``TaskUnsupported`` when the server does not
        declare ``tasks.requests.tools.call`` (nothing is sent), and the errors of
        ``call_tool``."""
        budget = spec.call_timeout if timeout is None else timeout
        params: dict[str, Any] = {
            "name": name,
            "arguments": dict(arguments or {}),
            "task": {"ttl": int(ttl_ms)} if ttl_ms is not None else {},
        }
        request = Request("tools/call", name, idempotent=False)

        async def op(link: Link, client: Client) -> dict[str, Any]:
            await self._ensure_tool_listing(link, client)
            if not _declares_tool_tasks(client):
                raise TaskUnsupported(name, server=spec.label)
            return await _send_raw(client, "tools/call", params, timeout=budget)

        raw = await self._run(spec, request, op, timeout=budget)
        if "task" not in raw:
            result = _dump(types.CallToolResult.model_validate(raw, by_name=False))
            if reports_unknown_tool(result, name):
                raise ToolNotFound(name, server=spec.label)
            return {"taskId": "", "status": "completed", "result": result}
        created = types.CreateTaskResult.model_validate(raw, by_name=False)
        return _dump(created.task)

    async def task_get(
        self, spec: ServerSpec, task_id: str, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """``tasks/get``: the task's state as wire JSON. ``TaskNotFound`` when the server
        no longer knows it (expired, or the server restarted)."""
        raw = await self._task_request(spec, "tasks/get", task_id, timeout=timeout)
        return _dump(types.GetTaskResult.model_validate(raw, by_name=False))

    async def task_result(
        self,
        spec: ServerSpec,
        task_id: str,
        *,
        timeout: float | None = None,
        on_server_request: InboundRequestHandler | None = None,
    ) -> dict[str, Any]:
        """``tasks/result``: the final ``CallToolResult`` as wire JSON. The server holds the
        request until the task ends; requests it sends meanwhile (the elicitation of an
        ``input_required`` task) go to ``on_server_request``."""
        raw = await self._task_request(
            spec, "tasks/result", task_id, timeout=timeout, on_server_request=on_server_request
        )
        return _dump(types.CallToolResult.model_validate(raw, by_name=False))

    async def task_cancel(
        self, spec: ServerSpec, task_id: str, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """``tasks/cancel``: the task's state after the cancel, as wire JSON."""
        raw = await self._task_request(spec, "tasks/cancel", task_id, timeout=timeout)
        return _dump(types.CancelTaskResult.model_validate(raw, by_name=False))

    async def _task_request(
        self,
        spec: ServerSpec,
        method: str,
        task_id: str,
        *,
        timeout: float | None = None,
        on_server_request: InboundRequestHandler | None = None,
    ) -> dict[str, Any]:
        budget = spec.call_timeout if timeout is None else timeout
        # A read (tasks/get, tasks/result) may be resent on a fresh connection; a cancel
        # is harmless to repeat too (a finished task just says so).
        request = Request(method, task_id, idempotent=True)

        async def op(link: Link, client: Client) -> dict[str, Any]:
            try:
                with link.routes.route(on_server_request, task_id=task_id):
                    return await _send_raw(client, method, {"taskId": task_id}, timeout=budget)
            except MCPError as exc:
                if exc.code != CONNECTION_CLOSED and _names_missing_task(exc):
                    raise TaskNotFound(task_id, server=spec.label, detail=exc.message) from exc
                raise

        return await self._run(spec, request, op, timeout=budget)

    def health(self, spec: ServerSpec | str) -> HealthInfo:
        return self._pool.health(spec if isinstance(spec, str) else spec.key)

    async def close(self, spec: ServerSpec | str) -> None:
        """Close one connection (stops the process / ends the HTTP session). Idempotent."""
        await self._pool.close(spec if isinstance(spec, str) else spec.key)

    async def aclose(self) -> None:
        """Close every connection; the manager refuses new work afterwards."""
        await self._pool.aclose()

    # ---- requests ------------------------------------------------------------------

    async def _run(
        self,
        spec: ServerSpec,
        request: Request,
        op: Callable[[Link, Client], Awaitable[_T]],
        *,
        timeout: float | None = None,
    ) -> _T:
        """Run ``op`` on a live connection, reconnecting and retrying once when that is safe.

        Safe means: the request is idempotent (listings, reads, pings), or it provably never
        reached the server (the connection was already gone, the HTTP server refused the
        connection, or a restarted HTTP server rejected our stale session).
        """
        pool = self._pool
        server = pool.server(spec)
        budget = spec.call_timeout if timeout is None else timeout
        for attempt in (1, 2):
            last_attempt = attempt == 2
            link = await pool.ensure_link(server)
            client = link.client
            if client is None or not link.usable:
                if last_attempt:
                    break
                continue  # died between connecting and now: nothing was sent
            try:
                with link.in_use():
                    result = await op(link, client)
            except MCPError as exc:
                if exc.code == CONNECTION_CLOSED:
                    failure = await pool.retire(link)
                    unsent = not link.stopping and never_reached_server(failure)
                    if (request.idempotent or unsent) and not last_attempt:
                        continue
                    error = self._lost_connection(server, link, request, failure, exc.message)
                    raise error from exc
                if is_session_lost(exc):
                    # A restarted HTTP server forgot our session and rejected the request
                    # without running it: reconnect and resend.
                    link.mark_dead()
                    pool.record_error(server, f"HTTP session lost: {exc.message}")
                    if not last_attempt:
                        continue
                error = protocol_error(spec, request, exc, budget)
                if isinstance(error, ServerUnavailable):
                    pool.record_error(server, error_text(error))
                raise error from exc
            except ValidationError as exc:
                raise malformed_result_error(spec, request, exc) from exc
            except RuntimeError as exc:
                if link.dead or link.client is None:
                    # The client was exited under us: the connection died before sending.
                    if not last_attempt:
                        continue
                    raise self._lost_connection(server, link, request, link.failure) from exc
                # Otherwise the SDK rejected the result (output schema re-validation).
                raise malformed_result_error(spec, request, exc) from exc
            else:
                server.last_seen = utcnow()
                return result
        error = ServerUnavailable(
            spec.label, reason=f"the connection was lost twice during {request}"
        )
        pool.record_error(server, error_text(error))
        raise error

    def _lost_connection(
        self,
        server: ServerState,
        link: Link,
        request: Request,
        failure: BaseException | None,
        detail: str | None = None,
    ) -> BridgeError:
        """The error for a request whose connection ended before it was answered (also the
        server's last error)."""
        error = lost_connection_error(
            server.spec,
            request,
            failure,
            closed_by_us=link.stopping,
            stderr_tail=link.stderr_tail(),
            detail=detail,
        )
        self._pool.record_error(server, error_text(error))
        return error

    async def _ensure_tool_listing(self, link: Link, client: Client) -> None:
        """Walk the full tool listing once per connection before the first call.

        ``Client.call_tool`` re-validates structured content against the tool's output
        schema; for a tool it has not seen listed it re-fetches *page one* of ``tools/list``
        on every call (and warns when the tool is on a later page). Listing every page once
        per connection keeps calls to a single round trip.
        """
        if link.tools_listed:
            return
        async with link.tools_lock:
            if link.tools_listed:
                return
            # Best effort and bounded: a server that cannot list its tools may still run them.
            with anyio.move_on_after(_WARM_UP_SECONDS):
                try:
                    await self._walk_tools(client)
                except MCPError as exc:
                    if exc.code == CONNECTION_CLOSED:
                        raise
                    logger.debug("tools/list warm-up failed on %s: %s", link.server.spec.label, exc)
            link.tools_listed = True

    async def _walk_tools(self, client: Client) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        async for page in _pages(
            lambda cursor: client.list_tools(cursor=cursor, cache_mode="bypass")
        ):
            tools.extend(_dump(tool) for tool in page.tools)
        return tools


@dataclass(frozen=True)
class KeepMark:
    """Where and when a read to keep began (``ConnectionManager.keep_mark``)."""

    link: Link
    uri: str
    changes: tuple[int, int]


async def _hear(link: Link, client: Client, uri: str) -> bool:
    """Have the connection hear of changes to ``uri``; False if it cannot."""
    if uri in link.heard:
        return True
    if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
        # The owner's listen stream (``ConnectionPool._listen_for_changes``) opens again
        # naming the URI too; the server's acknowledgment says whether it will tell.
        link.wanted.add(uri)
        with anyio.move_on_after(_HEAR_SECONDS):
            while link.listening and uri not in link.heard:
                changed = link.hearing_changed
                if link.relisten is not None:
                    if uri in link.asked:
                        return False  # asked for, not honored
                    link.relisten.cancel()
                await changed.wait()
        return uri in link.heard
    capabilities = client.server_capabilities
    resources = capabilities.resources if capabilities is not None else None
    if resources is None or not resources.subscribe:
        return False  # no `notifications/resources/updated` is promised
    await client.subscribe_resource(uri)
    link.heard.add(uri)
    return True


async def _pages(fetch: Callable[[str | None], Awaitable[Any]]) -> AsyncIterator[Any]:
    """Follow ``nextCursor`` until the last page (bounded, and never loops on a cursor)."""
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(_MAX_PAGES):
        page = await fetch(cursor)
        yield page
        cursor = page.next_cursor
        if not cursor or cursor in seen:
            return
        seen.add(cursor)


def _dump(model: Any) -> dict[str, Any]:
    """What a server said, as wire JSON every database can store (``uimeta.storable``):
    a NUL in one tool's description must not fail the whole listing's write."""
    return cast(dict[str, Any], storable(_dump_result(model)))


def _dump_result(model: Any) -> dict[str, Any]:
    """Wire JSON as the server sent it: for a call's result, which ``mcp_bridge.normalize``
    makes storable field by field on its way (not walked twice on every call's path)."""
    return cast(dict[str, Any], model.model_dump(by_alias=True, mode="json", exclude_none=True))


def _declares_tool_tasks(client: Client) -> bool:
    """Whether the server declared ``capabilities.tasks.requests.tools.call``."""
    capabilities = client.server_capabilities
    tasks = capabilities.tasks if capabilities is not None else None
    requests = tasks.requests if tasks is not None else None
    tools = requests.tools if requests is not None else None
    return tools is not None and tools.call is not None


def _names_missing_task(exc: MCPError) -> bool:
    message = (exc.message or "").lower()
    return exc.code == types.INVALID_PARAMS or ("task" in message and "not found" in message)


async def _send_raw(
    client: Client, method: str, params: dict[str, Any], *, timeout: float
) -> dict[str, Any]:
    """Send a request the SDK has no method for, stamped like its own (protocol version
    headers); the answer is the raw result dict, validated by the caller. The SDK itself
    reaches its dispatcher this way (``mcp.client.subscriptions``)."""
    session = client.session
    data: dict[str, Any] = {"method": method, "params": params}
    opts: Any = {"timeout": timeout}
    session._stamp(data, opts)  # noqa: SLF001 — see the docstring
    raw = await session._dispatcher.send_raw_request(  # noqa: SLF001
        method, data.get("params"), opts
    )
    return dict(raw)
