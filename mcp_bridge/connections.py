"""Connections to MCP servers: one long-lived client connection per server configuration.

Pure async Python on the ``mcp`` 2.x SDK — no Django here, so this module runs the same in
the ASGI process, a management command or a Celery worker (through ``BlockingBridge``).

How it works:

* A ``ServerSpec`` describes how to reach one server. Its ``key`` names the connection; a
  changed configuration gets a new key (``ServerSpec.create`` derives one from a hash of the
  config) and therefore a new connection.
* ``ConnectionManager`` keeps at most one live connection per key. The SDK's ``Client`` opens
  anyio task groups on entry and must be exited by the task that entered it, so each
  connection has one *owner task* that enters the client, waits until the connection is
  stopped or its transport dies, and exits it. Callers in any task issue requests through the
  entered client concurrently; they never enter or exit it themselves.
* Connections open lazily on first use, under a per-server lock so two concurrent first
  calls share one process. A connection whose transport died (stdio process exited, SSE
  stream dropped, HTTP server unreachable, HTTP session forgotten by a restarted server) is
  replaced on the next call. A call that was in flight when the connection died raises
  ``ServerCrashed``; requests that provably never reached the server, and idempotent
  requests (listings, reads, pings), are retried once on a fresh connection.
* Every connection declares the MCP Apps extension (``io.modelcontextprotocol/ui``).
* Timeouts and caller cancellation (``asyncio`` task cancellation or ``cancel_event``) make the
  SDK abandon the request and tell the server (``notifications/cancelled``, or an aborted
  POST on 2026-era streamable HTTP); the connection stays usable.
* The SDK's response cache is disabled: the catalogue above this layer decides what to keep,
  and a changed UI resource must be seen on the next read.
* A new configuration of a server (same ``slug:`` key prefix) retires the old connection once
  its running calls end; ``idle_timeout`` optionally closes unused connections.
* A stdio server's stderr goes to ``<stderr_dir>/<key>.stderr.log``; its environment is the
  SDK's short safe list (HOME, PATH, …) plus a few locale variables plus ``spec.env``.
* stdio uses our own transport (``mcp_bridge.stdio_transport``): the SDK's reader is
  quadratic in message size, which made a 50 MiB result take minutes.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import inspect
import json
import logging
import math
import os
import re
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import IO, Any, Literal, Self, TypedDict, TypeVar, cast

import anyio
import anyio.from_thread
import httpx2
import mcp_types as types
from anyio.from_thread import BlockingPortal
from mcp import Client, StdioServerParameters
from mcp.client import advertise
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    REQUEST_TIMEOUT,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcp_bridge.egress import GuardedTransport
from mcp_bridge.errors import (
    BridgeError,
    Cancelled,
    InvalidArguments,
    InvalidResource,
    ResourceNotFound,
    ServerCrashed,
    ServerUnavailable,
    ToolNotFound,
    ToolReturnedError,
    ToolTimeout,
)
from mcp_bridge.stdio_transport import stdio_client

__all__ = [
    "UI_EXTENSION_ID",
    "UI_MIME_TYPE",
    "BlockingBridge",
    "ConnectionManager",
    "HealthCallback",
    "HealthInfo",
    "ProgressCallback",
    "ServerSpec",
    "ToolsChangedCallback",
]

logger = logging.getLogger(__name__)

UI_EXTENSION_ID = "io.modelcontextprotocol/ui"
UI_MIME_TYPE = "text/html;profile=mcp-app"

TransportName = Literal["stdio", "streamable_http", "sse"]
ConnectMode = Literal["auto", "legacy"]
HealthState = Literal["idle", "connecting", "connected", "disconnected", "failed", "closed"]

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None] | None]
"""``(progress, total, message)``; may be sync or async."""
ToolsChangedCallback = Callable[[str], Awaitable[None] | None]
"""Called with ``spec.key`` when the server announces ``notifications/tools/list_changed``."""


class HealthInfo(TypedDict):
    state: HealthState
    last_error: str | None
    last_seen: datetime | None
    connected_at: datetime | None


HealthCallback = Callable[[str, HealthInfo], Awaitable[None] | None]
"""Called with ``(spec.key, health)`` when a connection's state or last error changes."""

# Variables a stdio server inherits from our environment on top of the SDK's own short list
# (HOME, LOGNAME, PATH, SHELL, TERM, USER). Nothing else leaks: our secrets stay ours.
_INHERITED_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
_STDERR_LOG_MAX_BYTES = 5 * 1024 * 1024
_STDERR_TAIL_BYTES = 2048
# How long a failed call waits for its connection's owner to finish tearing down, to learn
# why the connection ended (the owner records the transport's own exception).
_FAILURE_SETTLE_SECONDS = 3.0
_MAX_PAGES = 1000
_WARM_UP_SECONDS = 10.0
_PROGRESS_DRAIN_SECONDS = 5.0
_RESOURCE_NOT_FOUND = -32002  # the spec's resources/read error code
_SESSION_LOST_MESSAGES = ("session not found", "session terminated")

_T = TypeVar("_T")


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class _Request:
    """What a request is about, for retry decisions and error messages."""

    method: str  # "tools/call", "tools/list", "resources/list", "resources/read", "ping", "connect"
    target: str | None = None  # the tool name or resource URI
    idempotent: bool = True

    def __str__(self) -> str:
        return f"{self.method} '{self.target}'" if self.target else self.method


@dataclass(frozen=True)
class ServerSpec:
    """How to reach one MCP server. Immutable; ``key`` identifies the connection.

    ``env`` and ``headers`` are kept out of ``repr`` (they often carry secrets) and out of
    the hash (mappings are not hashable); two specs with the same key are expected to be the
    same configuration — ``ServerSpec.create`` guarantees that by hashing the config into the
    key.
    """

    key: str
    transport: TransportName = "stdio"
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False, hash=False)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False, hash=False)
    call_timeout: float = 60.0
    connect_timeout: float = 20.0
    # "auto" speaks the 2026 stateless protocol to servers that offer it and falls back to the
    # 2025-11-25 handshake; "legacy" forces the handshake (needed for server→client sampling,
    # elicitation and roots on older SDKs).
    mode: ConnectMode = "auto"
    # Human-readable name for messages; defaults to the key.
    name: str = ""
    # An httpx Auth for HTTP transports (OAuth: ``mcp_bridge.oauth``); like headers, kept
    # out of repr, hash and key: whoever builds the spec puts the grant into the key.
    auth: httpx2.Auth | None = field(default=None, repr=False, hash=False, compare=False)

    def __post_init__(self) -> None:
        if not self.key:
            raise ValueError("ServerSpec.key must not be empty")
        if self.transport not in ("stdio", "streamable_http", "sse"):
            raise ValueError(f"Unknown transport {self.transport!r}")
        if self.transport == "stdio" and not self.command:
            raise ValueError("A stdio server needs a command")
        if self.transport != "stdio" and not self.url:
            raise ValueError(f"A {self.transport} server needs a url")
        if self.mode not in ("auto", "legacy"):
            raise ValueError(f"Unknown mode {self.mode!r}")
        if self.call_timeout <= 0 or self.connect_timeout <= 0:
            raise ValueError("Timeouts must be positive")
        # Freeze the mutable inputs so a caller editing its dict cannot change a live spec.
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))
        object.__setattr__(self, "headers", MappingProxyType(dict(self.headers)))

    @classmethod
    def create(cls, slug: str, **config: Any) -> ServerSpec:
        """Build a spec whose key is ``"<slug>:<hash of config>"``.

        Any change to the configuration (command, env, url, timeouts…) yields a new key and
        thus a new connection. The manager treats keys with the same ``<slug>:`` prefix as
        versions of one server: when a new one is first used, the old connection finishes
        its running calls and stops.
        """
        material = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in config.items()}
        if "args" in material:
            material["args"] = list(material["args"])
        digest = hashlib.sha256(
            json.dumps(material, sort_keys=True, default=str).encode()
        ).hexdigest()[:16]
        config.setdefault("name", slug)
        return cls(key=f"{slug}:{digest}", **config)

    @property
    def label(self) -> str:
        return self.name or self.key


# --------------------------------------------------------------------------------------
# Transport plumbing


class _EofWatchingStream:
    """Proxy for a transport's read stream that reports when the stream ends.

    The SDK gives no public signal that a connection died between requests (the stdio
    process exited, the SSE stream dropped); the end of the read stream is that signal.
    """

    def __init__(self, inner: Any, on_eof: Callable[[], None]) -> None:
        self._inner = inner
        self._on_eof = on_eof

    @property
    def last_context(self) -> Any:
        # The dispatcher reads the sender's contextvars snapshot from HTTP transports' streams.
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_eof()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _EofWatchingStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


@asynccontextmanager
async def _watched(
    transport: AbstractAsyncContextManager[tuple[Any, Any]], on_eof: Callable[[], None]
) -> AsyncIterator[tuple[Any, Any]]:
    async with transport as (read_stream, write_stream):
        yield _EofWatchingStream(read_stream, on_eof), write_stream


def _child_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """The environment on top of the SDK's defaults: a few locale/time vars plus the spec's."""
    env = {name: os.environ[name] for name in _INHERITED_ENV if name in os.environ}
    env.update(extra)
    return env


def _leaf_exceptions(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaf_exceptions(inner)
    else:
        yield exc


def _first_cause(exc: BaseException) -> BaseException:
    """The most telling leaf of an exception group (transport errors over cancellations)."""
    leaves = list(_leaf_exceptions(exc))
    for leaf in leaves:
        if not isinstance(leaf, asyncio.CancelledError):
            return leaf
    return leaves[0] if leaves else exc


def _never_reached_server(exc: BaseException | None) -> bool:
    """Whether the connection ended because the server could not be reached at all."""
    if exc is None:
        return False
    return any(
        isinstance(leaf, httpx2.ConnectError | httpx2.ConnectTimeout | ConnectionRefusedError)
        for leaf in _leaf_exceptions(exc)
    )


# --------------------------------------------------------------------------------------
# Connection state


class _Link:
    """One live connection (one process or one HTTP session) and its owner task."""

    def __init__(self, server: _ServerState, number: int) -> None:
        self.server = server
        self.number = number
        self.client: Client | None = None
        self.settled = asyncio.Event()  # connect attempt finished, either way
        self.finished = asyncio.Event()  # owner task done, transport torn down
        self.wake = asyncio.Event()  # owner: stop waiting (close requested or transport dead)
        self.dead = False
        self.stopping = False
        self.failure: BaseException | None = None
        self.failure_message: str | None = None
        self.scope: anyio.CancelScope | None = None
        self.task: asyncio.Task[None] | None = None
        self.stderr_path: Path | None = None
        self.stderr_offset = 0
        self.tools_listed = False
        self.tools_lock = asyncio.Lock()
        self.in_flight = 0  # requests running on this link right now
        self.last_used = time.monotonic()
        self.idle_closed = False

    @property
    def usable(self) -> bool:
        return self.client is not None and not self.dead and not self.stopping

    def mark_dead(self) -> None:
        self.dead = True
        self.wake.set()

    def request_stop(self) -> None:
        self.stopping = True
        self.wake.set()
        if self.client is None and self.scope is not None:
            self.scope.cancel()  # still connecting: abandon the handshake

    def stderr_tail(self) -> str:
        """The last meaningful line the process wrote to stderr during this link."""
        if self.stderr_path is None:
            return ""
        try:
            with self.stderr_path.open("rb") as log:
                log.seek(0, os.SEEK_END)
                size = log.tell()
                start = max(self.stderr_offset, size - _STDERR_TAIL_BYTES)
                log.seek(start)
                text = log.read().decode("utf-8", "replace")
        except OSError:
            return ""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[-1][:300] if lines else ""


class _ServerState:
    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.lock = asyncio.Lock()
        self.link: _Link | None = None
        self.links_started = 0
        self.state: HealthState = "idle"
        self.last_error: str | None = None
        self.last_seen: datetime | None = None
        self.connected_at: datetime | None = None
        self.closed = False
        self.draining = False  # superseded by a newer config: stop once in-flight calls end

    def health(self) -> HealthInfo:
        return HealthInfo(
            state=self.state,
            last_error=self.last_error,
            last_seen=self.last_seen,
            connected_at=self.connected_at,
        )


# --------------------------------------------------------------------------------------
# The manager


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
        ``None``: held in memory)."""
        self.on_tools_changed = on_tools_changed
        self.on_health = on_health
        self.idle_timeout = idle_timeout
        self.stderr_dir = (
            Path(stderr_dir)
            if stderr_dir is not None
            else Path(tempfile.gettempdir()) / "atrium-mcp"
        )
        self.spool_dir = Path(spool_dir) if spool_dir is not None else None
        self._client_info = types.Implementation(name=client_name, version=client_version)
        self._servers: dict[str, _ServerState] = {}
        self._owner_tasks: set[asyncio.Task[None]] = set()
        self._callback_tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

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
    ) -> dict[str, Any]:
        """Call a tool; returns the ``CallToolResult`` as wire JSON (``isError`` results too).

        Raises ``ToolTimeout`` after ``timeout`` (default ``spec.call_timeout``) seconds,
        ``Cancelled`` when ``cancel_event`` is set first, ``ServerCrashed`` when the server
        died during the call, ``ServerUnavailable`` when it cannot be reached,
        ``ToolNotFound`` / ``InvalidArguments`` when the server rejects the call. Cancelling
        the awaiting task cancels the request on the server too.
        """
        budget = spec.call_timeout if timeout is None else timeout
        relay = _ProgressRelay(spec.label, name, progress) if progress else None
        args = dict(arguments or {})
        request = _Request("tools/call", name, idempotent=False)

        async def op(link: _Link, client: Client) -> types.CallToolResult:
            await self._ensure_tool_listing(link, client)
            return await client.call_tool(
                name, args, read_timeout_seconds=budget, progress_callback=relay
            )

        work = self._run(spec, request, op, timeout=budget)
        try:
            if cancel_event is None:
                result = await work
            else:
                result = await _unless_set(work, cancel_event)
        finally:
            if relay is not None:
                # Progress is delivered before the result: let running callbacks finish.
                await relay.drain()
        wire = _dump(result)
        if _reports_unknown_tool(wire, name):
            raise ToolNotFound(name, server=spec.label)
        return wire

    async def list_tools(self, spec: ServerSpec) -> list[dict[str, Any]]:
        """All tools of the server (every page), as wire JSON."""

        async def op(link: _Link, client: Client) -> list[dict[str, Any]]:
            tools = await self._walk_tools(client)
            link.tools_listed = True
            return tools

        return await self._run(spec, _Request("tools/list"), op)

    async def list_resources(self, spec: ServerSpec) -> list[dict[str, Any]]:
        """All resources of the server (every page), as wire JSON."""

        async def op(link: _Link, client: Client) -> list[dict[str, Any]]:
            resources: list[dict[str, Any]] = []
            async for page in _pages(
                lambda cursor: client.list_resources(cursor=cursor, cache_mode="bypass")
            ):
                resources.extend(_dump(resource) for resource in page.resources)
            return resources

        return await self._run(spec, _Request("resources/list"), op)

    async def read_resource(self, spec: ServerSpec, uri: str) -> dict[str, Any]:
        """Read one resource (always from the server, never a cache); wire JSON."""

        async def op(link: _Link, client: Client) -> types.ReadResourceResult:
            return await client.read_resource(uri, cache_mode="bypass")

        result = await self._run(spec, _Request("resources/read", uri), op)
        return _dump(result)

    async def ping(self, spec: ServerSpec) -> float:
        """Round-trip one request; returns the latency in seconds.

        2025-era connections send ``ping``; the 2026 protocol removed it, so those connections
        send ``server/discover`` instead.
        """

        async def op(link: _Link, client: Client) -> float:
            started = time.perf_counter()
            if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                await client.session.send_discover(client.protocol_version)
            else:
                await client.session.send_ping()
            return time.perf_counter() - started

        return await self._run(spec, _Request("ping"), op)

    async def connect(self, spec: ServerSpec) -> dict[str, Any]:
        """Open the connection now (if needed); returns what the server said about itself:
        ``protocolVersion``, ``serverInfo``, ``capabilities``, ``instructions``."""

        async def op(link: _Link, client: Client) -> dict[str, Any]:
            info = client.server_info
            return {
                "protocolVersion": client.protocol_version,
                "serverInfo": _dump(info) if info is not None else None,
                "capabilities": _dump(client.server_capabilities),
                "instructions": client.instructions,
            }

        return await self._run(spec, _Request("connect"), op)

    def health(self, spec: ServerSpec | str) -> HealthInfo:
        key = spec if isinstance(spec, str) else spec.key
        server = self._servers.get(key)
        if server is None:
            return HealthInfo(state="idle", last_error=None, last_seen=None, connected_at=None)
        return server.health()

    async def close(self, spec: ServerSpec | str) -> None:
        """Close one connection (stops the process / ends the HTTP session). Idempotent."""
        key = spec if isinstance(spec, str) else spec.key
        server = self._servers.pop(key, None)
        if server is None:
            return
        server.closed = True
        link = server.link
        if link is not None:
            link.request_stop()
            await link.finished.wait()
        self._set_state(server, "closed")

    async def aclose(self) -> None:
        """Close every connection; the manager refuses new work afterwards."""
        self._closed = True
        keys = list(self._servers)
        await asyncio.gather(*(self.close(key) for key in keys), return_exceptions=True)
        if self._owner_tasks:
            await asyncio.gather(*list(self._owner_tasks), return_exceptions=True)

    # ---- requests ------------------------------------------------------------------

    async def _run(
        self,
        spec: ServerSpec,
        request: _Request,
        op: Callable[[_Link, Client], Awaitable[_T]],
        *,
        timeout: float | None = None,
    ) -> _T:
        """Run ``op`` on a live connection, reconnecting and retrying once when that is safe.

        Safe means: the request is idempotent (listings, reads, pings), or it provably never
        reached the server (the connection was already gone, the HTTP server refused the
        connection, or a restarted HTTP server rejected our stale session).
        """
        server = self._server(spec)
        budget = spec.call_timeout if timeout is None else timeout
        for attempt in (1, 2):
            last_attempt = attempt == 2
            link = await self._ensure_link(server)
            client = link.client
            if client is None or not link.usable:
                if last_attempt:
                    break
                continue  # died between connecting and now: nothing was sent
            try:
                result = await self._tracked(link, client, op)
            except MCPError as exc:
                if exc.code == CONNECTION_CLOSED:
                    failure = await self._retire(link)
                    unsent = not link.stopping and _never_reached_server(failure)
                    if (request.idempotent or unsent) and not last_attempt:
                        continue
                    raise self._lost_connection_error(link, request, failure, exc.message) from exc
                if _is_session_lost(exc):
                    # A restarted HTTP server forgot our session and rejected the request
                    # without running it: reconnect and resend.
                    link.mark_dead()
                    self._record_error(server, f"HTTP session lost: {exc.message}")
                    if not last_attempt:
                        continue
                raise self._protocol_error(server, request, exc, budget) from exc
            except ValidationError as exc:
                raise self._malformed_result_error(spec, request, exc) from exc
            except RuntimeError as exc:
                if link.dead or link.client is None:
                    # The client was exited under us: the connection died before sending.
                    if not last_attempt:
                        continue
                    raise self._lost_connection_error(link, request, link.failure) from exc
                # Otherwise the SDK rejected the result (output schema re-validation).
                raise self._malformed_result_error(spec, request, exc) from exc
            else:
                server.last_seen = _utcnow()
                return result
        error = ServerUnavailable(
            spec.label, reason=f"the connection was lost twice during {request}"
        )
        self._record_error(server, _error_text(error))
        raise error

    async def _tracked(
        self, link: _Link, client: Client, op: Callable[[_Link, Client], Awaitable[_T]]
    ) -> _T:
        """Run ``op`` counting it as in flight (idle and drain decisions depend on it)."""
        link.in_flight += 1
        try:
            return await op(link, client)
        finally:
            link.in_flight -= 1
            link.last_used = time.monotonic()
            if link.server.draining and link.in_flight == 0:
                link.request_stop()

    async def _ensure_tool_listing(self, link: _Link, client: Client) -> None:
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

    # ---- connection lifecycle --------------------------------------------------------

    def _server(self, spec: ServerSpec) -> _ServerState:
        if self._closed:
            raise ServerUnavailable(spec.label, reason="the connection manager is closed")
        server = self._servers.get(spec.key)
        if server is None:
            server = self._servers[spec.key] = _ServerState(spec)
            self._drain_superseded(spec)
        return server

    def _drain_superseded(self, spec: ServerSpec) -> None:
        """A new config of a server (same ``slug:`` key prefix, see ``ServerSpec.create``)
        replaces the old one: the old connection takes no new calls and stops as soon as its
        running calls end, so an edited server never leaves its old process behind."""
        family = _key_family(spec.key)
        if family is None:
            return
        for key, other in list(self._servers.items()):
            if key == spec.key or _key_family(key) != family:
                continue
            del self._servers[key]
            other.closed = other.draining = True
            link = other.link
            if link is not None and link.in_flight == 0:
                link.request_stop()
            self._set_state(other, "closed")

    async def _ensure_link(self, server: _ServerState) -> _Link:
        """The server's live (or connecting) link; starts one if there is none.

        Concurrent first callers find the same connecting link and wait for it together, so
        a server is started once however many calls arrive at the same moment.
        """
        link = server.link
        if link is None or link.dead or link.stopping:
            async with server.lock:
                if server.closed:
                    raise ServerUnavailable(server.spec.label, reason="the connection is closed")
                link = server.link
                if link is None or link.dead or link.stopping:
                    link = self._start_link(server)
        if not link.settled.is_set():
            # Shielded: a cancelled caller must not abort a connect that others wait for.
            await asyncio.shield(link.settled.wait())
        if link.failure_message is not None:  # the connect attempt itself failed
            raise ServerUnavailable(
                server.spec.label, reason=link.failure_message, user_message=link.failure_message
            )
        return link

    def _start_link(self, server: _ServerState) -> _Link:
        server.links_started += 1
        link = _Link(server, server.links_started)
        server.link = link
        self._set_state(server, "connecting")
        task = asyncio.get_running_loop().create_task(
            self._own(link), name=f"mcp-connection {server.spec.key} #{link.number}"
        )
        link.task = task
        self._owner_tasks.add(task)
        task.add_done_callback(self._owner_tasks.discard)
        return link

    async def _own(self, link: _Link) -> None:
        """The owner task: enter the client, hold it until stopped or dead, exit it."""
        server = link.server
        spec = server.spec
        connected = False
        scope = anyio.CancelScope(deadline=anyio.current_time() + spec.connect_timeout)
        link.scope = scope
        try:
            with scope:
                async with self._make_client(link) as client:
                    connected = True
                    scope.deadline = math.inf
                    link.client = client
                    link.last_used = time.monotonic()  # the idle clock starts now
                    server.connected_at = server.last_seen = _utcnow()
                    self._set_state(server, "connected")
                    link.settled.set()
                    async with anyio.create_task_group() as tg:
                        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                            tg.start_soon(self._listen_for_changes, link, client)
                        await self._hold(link)
                        tg.cancel_scope.cancel()
            if scope.cancelled_caught and not connected:
                link.failure = TimeoutError(f"no answer within {spec.connect_timeout:g} s")
        except Exception as exc:  # noqa: BLE001 — recorded as the connection's failure
            link.failure = exc
        finally:
            link.client = None
            link.dead = True
            if not connected and link.stopping:
                link.failure_message = (
                    f"The connection to '{spec.label}' was closed while connecting"
                )
            elif not connected:
                link.failure_message = self._connect_failure_message(link)
                self._record_error(server, link.failure_message)
                if not server.closed:
                    self._set_state(server, "failed")
            elif link.failure is not None and not link.stopping:
                self._record_error(server, self._describe_failure(link, link.failure))
            current = server.link is link and not server.closed
            if connected and current and link.idle_closed:
                self._set_state(server, "idle")
            elif connected and current and not link.stopping:
                self._set_state(server, "disconnected")
            if link.failure is not None:
                logger.info(
                    "MCP connection %s #%d ended: %r", spec.label, link.number, link.failure
                )
            link.settled.set()
            link.finished.set()

    async def _hold(self, link: _Link) -> None:
        """Keep the connection until it is stopped or dies (or idles out, if configured)."""
        idle_timeout = self.idle_timeout
        if idle_timeout is None:
            await link.wake.wait()
            return
        while not link.wake.is_set():
            remaining = link.last_used + idle_timeout - time.monotonic()
            if link.in_flight == 0 and remaining <= 0:
                link.idle_closed = True
                link.request_stop()
                return
            with anyio.move_on_after(max(remaining, 0.05) if link.in_flight == 0 else idle_timeout):
                await link.wake.wait()

    def _make_client(self, link: _Link) -> Client:
        spec = link.server.spec
        transport: AbstractAsyncContextManager[tuple[Any, Any]]
        if spec.transport == "stdio":
            transport = self._stdio_transport(link)
        elif spec.transport == "streamable_http":
            transport = _http_transport(spec)
        else:
            transport = sse_client(
                spec.url or "",
                headers=dict(spec.headers) or None,
                timeout=spec.connect_timeout,
                auth=spec.auth,
            )
        return Client(
            _watched(transport, link.mark_dead),  # type: ignore[arg-type]
            mode=spec.mode,
            cache=None,  # never serve a stale listing or resource; see module docstring
            read_timeout_seconds=spec.call_timeout,  # the default; calls pass their own
            client_info=self._client_info,
            extensions=[advertise(UI_EXTENSION_ID, {"mimeTypes": [UI_MIME_TYPE]})],
            message_handler=partial(self._on_message, link),
        )

    @asynccontextmanager
    async def _stdio_transport(self, link: _Link) -> AsyncIterator[tuple[Any, Any]]:
        spec = link.server.spec
        errlog = self._open_stderr_log(link)
        try:
            params = StdioServerParameters(
                command=spec.command or "",
                args=list(spec.args),
                env=_child_environment(spec.env),
                cwd=spec.cwd,
            )
            async with stdio_client(params, errlog=errlog, spool_dir=self.spool_dir) as streams:
                yield streams
        finally:
            errlog.close()

    def _open_stderr_log(self, link: _Link) -> IO[str]:
        """The child's stderr goes to a per-server log file, never to our own stdout/stderr."""
        self.stderr_dir.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", link.server.spec.key)[:120]
        path = self.stderr_dir / f"{safe}.stderr.log"
        with contextlib.suppress(OSError):
            if path.stat().st_size > _STDERR_LOG_MAX_BYTES:
                path.unlink()
        errlog = path.open("a", encoding="utf-8")
        errlog.write(f"--- connection #{link.number} started {_utcnow().isoformat()} ---\n")
        errlog.flush()
        link.stderr_path = path
        link.stderr_offset = errlog.tell()
        return errlog

    async def _listen_for_changes(self, link: _Link, client: Client) -> None:
        """2026-era servers announce list changes only on a ``subscriptions/listen`` stream.

        The stream's events are also delivered to the message handler, which fires the
        callback; this task only keeps the subscription open (and reopens it if dropped).
        """
        failures = 0
        while not link.wake.is_set():
            try:
                async with client.listen(tools_list_changed=True) as subscription:
                    failures = 0
                    async for _event in subscription:
                        pass
            except MCPError as exc:
                if exc.code in (METHOD_NOT_FOUND, CONNECTION_CLOSED):
                    return
                failures += 1
            except Exception as exc:  # noqa: BLE001 — a lost stream is retried below
                logger.debug("listen stream on %s ended: %r", link.server.spec.label, exc)
                failures += 1
            if failures >= 5:
                logger.warning(
                    "Giving up tools/list_changed subscription on %s", link.server.spec.label
                )
                return
            await anyio.sleep(min(30.0, 0.5 * 2**failures))

    async def _on_message(self, link: _Link, message: Any) -> None:
        server = link.server
        if isinstance(message, Exception):
            logger.info("Transport error on %s: %r", server.spec.label, message)
            return
        server.last_seen = _utcnow()
        if isinstance(message, types.ToolListChangedNotification):
            link.tools_listed = False  # output schemas may have changed
            if self.on_tools_changed is not None:
                self._fire(self.on_tools_changed, server.spec.key)

    async def _retire(self, link: _Link) -> BaseException | None:
        """Give up on a link whose request ended with "connection closed"; return why it died.

        Usually the transport is already gone. Streamable HTTP, though, answers a request
        whose response stream broke with a synthesized "connection closed" and keeps the
        session open: retire the link anyway, so the next call starts afresh. Then wait
        (bounded) for the owner task to record the transport's own exception, if any.
        """
        link.mark_dead()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_FAILURE_SETTLE_SECONDS):
                await asyncio.shield(link.finished.wait())
        return link.failure

    # ---- errors and health -----------------------------------------------------------

    def _connect_failure_message(self, link: _Link) -> str:
        spec = link.server.spec
        failure = link.failure
        tail = link.stderr_tail()
        suffix = f" (stderr: {tail})" if tail else ""
        if failure is None:
            return f"Server {spec.label!r} closed the connection during startup{suffix}"
        cause = _first_cause(failure)
        # TimeoutError is an OSError: test it first.
        if isinstance(cause, TimeoutError):
            return f"Server {spec.label!r} did not answer within {spec.connect_timeout:g} s{suffix}"
        if (
            spec.transport == "stdio"
            and isinstance(cause, OSError)
            and not isinstance(cause, ConnectionError)
        ):
            reason = cause.strerror or str(cause)
            return f"Could not start {spec.command!r}: {reason}"
        if isinstance(cause, MCPError):
            if cause.code == CONNECTION_CLOSED:
                return f"Server {spec.label!r} exited during startup{suffix}"
            return f"Server {spec.label!r} refused the handshake: {cause.message}{suffix}"
        if isinstance(cause, httpx2.HTTPStatusError):
            return f"Could not connect to {spec.url}: HTTP {cause.response.status_code}"
        if isinstance(cause, httpx2.HTTPError | OSError):
            return f"Could not connect to {spec.url}: {cause or type(cause).__name__}"
        return f"Could not connect to {spec.label!r}: {cause!r}{suffix}"

    def _describe_failure(self, link: _Link, failure: BaseException) -> str:
        cause = _first_cause(failure)
        return f"Connection to {link.server.spec.label!r} lost: {cause or type(cause).__name__}"

    def _lost_connection_error(
        self,
        link: _Link,
        request: _Request,
        failure: BaseException | None,
        detail: str | None = None,
    ) -> BridgeError:
        """The error for a request whose connection ended before it was answered."""
        server = link.server
        spec = server.spec
        tool = request.target if request.method == "tools/call" else None
        error: BridgeError
        if link.stopping:
            error = ServerUnavailable(
                spec.label, reason=f"the connection was closed during {request}"
            )
        elif failure is not None and _never_reached_server(failure):
            reason = f"Could not reach {spec.url}: {_first_cause(failure)}"
            error = ServerUnavailable(spec.label, reason=reason, user_message=reason)
        elif spec.transport == "stdio":
            tail = link.stderr_tail()
            reason = f"the process exited during {request}" + (f" (stderr: {tail})" if tail else "")
            error = ServerCrashed(spec.label, tool=tool, reason=reason)
        else:
            why = _first_cause(failure) if failure is not None else detail
            cause = f": {why}" if why else ""
            error = ServerCrashed(
                spec.label, tool=tool, reason=f"the connection dropped during {request}{cause}"
            )
        self._record_error(server, _error_text(error))
        return error

    def _protocol_error(
        self, server: _ServerState, request: _Request, exc: MCPError, timeout: float
    ) -> BridgeError:
        """Map an MCP error answer (or the SDK's request timeout) onto the taxonomy."""
        spec = server.spec
        message = exc.message
        if request.method == "tools/call":
            tool = request.target
            if exc.code == REQUEST_TIMEOUT:
                return ToolTimeout(tool, timeout_seconds=timeout, server=spec.label)
            if _mentions_unknown_tool(message):
                return ToolNotFound(tool, server=spec.label)
            if exc.code == INVALID_PARAMS:
                return InvalidArguments([message], tool=tool)
            return ToolReturnedError(tool, detail=message)
        if exc.code == REQUEST_TIMEOUT:
            reason = f"no answer to {request} within {timeout:g} s"
            error: BridgeError = ServerUnavailable(spec.label, reason=reason)
            self._record_error(server, _error_text(error))
            return error
        if request.method == "resources/read" and (
            exc.code == _RESOURCE_NOT_FOUND or _mentions_not_found(message)
        ):
            return ResourceNotFound(request.target, server=spec.label)
        return BridgeError(
            f"The tool server '{spec.label}' could not handle {request}: {message}",
            details={"server": spec.label, "method": request.method, "mcpCode": exc.code},
        )

    def _malformed_result_error(
        self, spec: ServerSpec, request: _Request, exc: Exception
    ) -> BridgeError:
        reason = f"malformed answer to {request}: {_short(exc)}"
        if request.method == "resources/read":
            return InvalidResource(request.target, reason=reason)
        if request.method == "tools/call":
            return ToolReturnedError(request.target, detail=reason)
        return BridgeError(
            f"The tool server '{spec.label}' sent a {reason}",
            details={"server": spec.label, "method": request.method},
        )

    def _record_error(self, server: _ServerState, message: str) -> None:
        server.last_error = message
        self._notify_health(server)

    def _set_state(self, server: _ServerState, state: HealthState) -> None:
        if server.state == state:
            return
        server.state = state
        self._notify_health(server)

    def _notify_health(self, server: _ServerState) -> None:
        if self.on_health is not None:
            self._fire(self.on_health, server.spec.key, server.health())

    def _fire(self, callback: Callable[..., Any], *args: Any) -> None:
        """Run a user callback without letting it block or break the connection."""
        try:
            outcome = callback(*args)
        except Exception:
            logger.exception("MCP connection callback %r raised", callback)
            return
        if inspect.isawaitable(outcome):
            task = asyncio.ensure_future(_log_failure(outcome, callback))
            self._callback_tasks.add(task)
            task.add_done_callback(self._callback_tasks.discard)


# --------------------------------------------------------------------------------------
# Helpers


def _http_transport(spec: ServerSpec) -> AbstractAsyncContextManager[tuple[Any, Any]]:
    @asynccontextmanager
    async def transport() -> AsyncIterator[tuple[Any, Any]]:
        # Our own httpx client, for the spec's headers and connect timeout; we close it.
        timeout = httpx2.Timeout(spec.connect_timeout, read=300.0)
        # Signed in (OAuth): a refresh or a new discovery goes only where a sign-in may.
        guard = GuardedTransport([spec.url or ""]) if spec.auth is not None else None
        async with (
            httpx2.AsyncClient(
                headers=dict(spec.headers), timeout=timeout, auth=spec.auth, transport=guard
            ) as http,
            streamable_http_client(spec.url or "", http_client=http) as streams,
        ):
            yield streams

    return transport()


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
    return cast(dict[str, Any], model.model_dump(by_alias=True, mode="json", exclude_none=True))


class _ProgressRelay:
    """The SDK's progress callback for one call: runs the caller's callback (sync or async),
    contains its errors, and lets ``call_tool`` wait until every update has been handled.

    The SDK runs each progress callback in its own task, started as the notification is read
    and so before the result is read; ``drain`` waits for the ones still running.
    """

    def __init__(self, label: str, tool: str, callback: ProgressCallback) -> None:
        self._label, self._tool, self._callback = label, tool, callback
        self._running = 0
        self._idle = asyncio.Event()
        self._idle.set()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self._running += 1
        self._idle.clear()
        try:
            outcome = self._callback(progress, total, message)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:
            logger.exception("Progress callback for %r on %s raised", self._tool, self._label)
        finally:
            self._running -= 1
            if not self._running:
                self._idle.set()

    async def drain(self, timeout: float = _PROGRESS_DRAIN_SECONDS) -> None:
        await asyncio.sleep(0)  # let callbacks scheduled with the result start
        if self._idle.is_set():
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._idle.wait()


def _key_family(key: str) -> str | None:
    """The ``slug`` of a ``slug:confighash`` key (``ServerSpec.create``); None otherwise."""
    family, separator, _ = key.partition(":")
    return family if separator and family else None


def _is_session_lost(exc: MCPError) -> bool:
    return exc.code == INVALID_REQUEST and exc.message.strip().lower() in _SESSION_LOST_MESSAGES


_UNKNOWN_TOOL = re.compile(r"unknown tool|tool\b.*\bnot found", re.IGNORECASE)


def _mentions_unknown_tool(message: str) -> bool:
    return bool(_UNKNOWN_TOOL.search(message))


def _mentions_not_found(message: str) -> bool:
    lowered = message.lower()
    return "not found" in lowered or "unknown resource" in lowered or "no resource" in lowered


def _reports_unknown_tool(wire: dict[str, Any], name: str) -> bool:
    """Some SDKs answer an unknown tool with an ``isError`` result instead of an error.

    Only the exact phrasings of the Python and TypeScript SDKs count, so a tool's own error
    text that happens to say "not found" is returned as the result it is.
    """
    if not wire.get("isError"):
        return False
    content = wire.get("content") or []
    if len(content) != 1 or content[0].get("type") != "text":
        return False
    text = str(content[0].get("text", "")).strip()
    text = re.sub(r"^MCP error -?\d+:\s*", "", text)
    return text in (f"Unknown tool: {name}", f"Tool {name} not found")


def _error_text(error: BridgeError) -> str:
    """A one-line description for ``health.last_error``: the message plus the reason."""
    reason = error.details.get("reason")
    if reason and str(reason) not in error.user_message:
        return f"{error.user_message} ({reason})"
    return error.user_message


def _short(exc: Exception, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def _unless_set(work: Coroutine[Any, Any, _T], cancel_event: asyncio.Event) -> _T:
    """Await ``work``; if ``cancel_event`` is set first, cancel it and raise ``Cancelled``.

    Cancelling the work cancels the MCP request, which the SDK forwards to the server.
    """
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(cancel_event.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
        if not task.done():
            # The event fired, or our own task is being cancelled: cancel the request and
            # wait until it has unwound (the courtesy cancel goes out while it does).
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
    if task.cancelled():
        raise Cancelled(reason="cancelled by the caller")
    return task.result()


async def _log_failure(awaitable: Awaitable[Any], callback: Callable[..., Any]) -> None:
    try:
        await awaitable
    except Exception:
        logger.exception("MCP connection callback %r raised", callback)


# --------------------------------------------------------------------------------------
# Blocking variant for sync code


class BlockingBridge:
    """``ConnectionManager`` for synchronous code (management commands, Celery tasks).

    Runs an event loop in a background thread (an anyio blocking portal) and forwards each
    call to a ``ConnectionManager`` living there::

        with BlockingBridge() as bridge:
            tools = bridge.list_tools(spec)
            result = bridge.call_tool(spec, "echo", {"text": "hi"})

    For long-lived processes use ``BlockingBridge.shared()``: one bridge (one portal) per
    process, started on first use and closed at interpreter exit; a forked child (Celery
    prefork) gets its own. Leaving a ``with`` block does not stop the shared bridge (other
    threads may be using it); only an explicit ``stop()`` does.
    """

    _shared: BlockingBridge | None = None
    _shared_pid: int | None = None
    _shared_lock = threading.Lock()

    def __init__(self, **manager_options: Any) -> None:
        self._manager_options = manager_options
        self._portal_cm: AbstractContextManager[BlockingPortal] | None = None
        self._portal: BlockingPortal | None = None
        self._manager: ConnectionManager | None = None
        self._lock = threading.Lock()
        self._is_shared = False

    @classmethod
    def shared(cls, **manager_options: Any) -> BlockingBridge:
        """The process-wide bridge (options apply only when it is first created)."""
        with cls._shared_lock:
            current = cls._shared
            if current is None or current._portal is None or cls._shared_pid != os.getpid():
                bridge = cls(**manager_options)
                bridge._is_shared = True
                bridge.start()
                cls._shared, cls._shared_pid = bridge, os.getpid()
                atexit.register(bridge.stop)
            return cls._shared

    def start(self) -> None:
        with self._lock:
            if self._portal is not None:
                return
            portal_cm = anyio.from_thread.start_blocking_portal()
            portal = portal_cm.__enter__()
            self._manager = portal.call(self._create_manager)
            self._portal_cm, self._portal = portal_cm, portal

    def stop(self) -> None:
        with self._lock:
            portal, portal_cm, manager = self._portal, self._portal_cm, self._manager
            self._portal = self._portal_cm = self._manager = None
        if portal is None or portal_cm is None:
            return
        try:
            if manager is not None:
                portal.call(manager.aclose)
        finally:
            portal_cm.__exit__(None, None, None)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if not self._is_shared:  # the shared bridge outlives any one user of it
            self.stop()

    @property
    def manager(self) -> ConnectionManager:
        """The wrapped manager (use it only from inside the portal's event loop)."""
        if self._manager is None:
            raise RuntimeError("BlockingBridge is not started")
        return self._manager

    def _create_manager(self) -> ConnectionManager:
        return ConnectionManager(**self._manager_options)

    def _call(self, func: Callable[..., Awaitable[_T]], *args: Any, **kwargs: Any) -> _T:
        portal = self._portal
        if portal is None:
            raise RuntimeError("BlockingBridge is not started (use it as a context manager)")
        return portal.call(partial(func, *args, **kwargs))

    def call_tool(
        self,
        spec: ServerSpec,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        """Blocking ``call_tool``; a sync ``progress`` callback runs in the portal thread."""
        return self._call(
            self.manager.call_tool, spec, name, arguments, timeout=timeout, progress=progress
        )

    def list_tools(self, spec: ServerSpec) -> list[dict[str, Any]]:
        return self._call(self.manager.list_tools, spec)

    def list_resources(self, spec: ServerSpec) -> list[dict[str, Any]]:
        return self._call(self.manager.list_resources, spec)

    def read_resource(self, spec: ServerSpec, uri: str) -> dict[str, Any]:
        return self._call(self.manager.read_resource, spec, uri)

    def ping(self, spec: ServerSpec) -> float:
        return self._call(self.manager.ping, spec)

    def connect(self, spec: ServerSpec) -> dict[str, Any]:
        return self._call(self.manager.connect, spec)

    def close(self, spec: ServerSpec | str) -> None:
        self._call(self.manager.close, spec)

    def health(self, spec: ServerSpec | str) -> HealthInfo:
        portal = self._portal
        if portal is None:
            raise RuntimeError("BlockingBridge is not started")
        return portal.call(self.manager.health, spec)
