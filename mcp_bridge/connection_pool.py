"""The lifecycle of MCP connections: at most one live connection per ``ServerSpec.key``.

Pure async Python on the ``mcp`` 2.x SDK, no Django. ``ConnectionPool`` is the part of
``mcp_bridge.connections.ConnectionManager`` that opens, holds, replaces and closes
connections and keeps each server's health; the manager runs requests on what it returns.

* The SDK's ``Client`` opens anyio task groups on entry and must be exited by the task that
  entered it, so each connection (a ``Link``) has one *owner task* that enters the client,
  waits until the connection is stopped or its transport dies, and exits it. Callers in any
  task issue requests through the entered client concurrently; they never enter or exit it.
* Connections open lazily on first use, under a per-server lock so two concurrent first
  calls share one process. A connection whose transport died is replaced on the next call.
* Every connection declares the MCP Apps extension (``io.modelcontextprotocol/ui``).
* The SDK's response cache is disabled: the catalogue above this layer decides what to keep,
  and a changed UI resource must be seen on the next read.
* A new configuration of a server (same ``slug:`` key prefix) retires the old connection once
  its running calls end; ``idle_timeout`` optionally closes unused connections.
* 2026-era servers announce list changes only on a ``subscriptions/listen`` stream, which the
  owner task keeps open; ``notifications/tools/list_changed`` fires ``on_tools_changed``.
* A link keeps what its manager was asked to keep of a resource (a UI document's stored
  version: ``ConnectionManager.keep``) only while the server can tell of a change to it —
  the listen stream names the URI (2026-era), or ``resources/subscribe`` (2025-era) — and
  drops it on ``notifications/resources/updated`` for it, ``resources/list_changed`` or a
  gap in the stream; a new link keeps nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
import time
from collections.abc import Awaitable, Callable, Hashable, Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypedDict, cast

import anyio
import mcp_types as types
from mcp import Client
from mcp.client import advertise
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated
from mcp_types import CONNECTION_CLOSED, METHOD_NOT_FOUND
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_bridge.connection_errors import connect_failure_message, lost_connection_message
from mcp_bridge.errors import ServerUnavailable
from mcp_bridge.server_requests import (
    InboundKind,
    InboundRequest,
    InboundRequestRefused,
    InboundRoutes,
)
from mcp_bridge.server_spec import ServerSpec
from mcp_bridge.transports import StderrLog, open_transport, watched
from mcp_bridge.uimeta import storable

__all__ = [
    "UI_EXTENSION_ID",
    "UI_MIME_TYPE",
    "ConnectionPool",
    "HealthCallback",
    "HealthInfo",
    "Link",
    "NotificationCallback",
    "ServerState",
    "ToolsChangedCallback",
]

logger = logging.getLogger(__name__)

UI_EXTENSION_ID = "io.modelcontextprotocol/ui"
UI_MIME_TYPE = "text/html;profile=mcp-app"

HealthState = Literal["idle", "connecting", "connected", "disconnected", "failed", "closed"]


class HealthInfo(TypedDict):
    state: HealthState
    last_error: str | None
    last_seen: datetime | None
    connected_at: datetime | None


HealthCallback = Callable[[str, HealthInfo], Awaitable[None] | None]
"""Called with ``(spec.key, health)`` when a connection's state or last error changes."""
ToolsChangedCallback = Callable[[str], Awaitable[None] | None]
"""Called with ``spec.key`` when the server announces ``notifications/tools/list_changed``."""
NotificationCallback = Callable[[str, str, dict[str, Any]], Awaitable[None] | None]
"""Called with ``(spec.key, method, params)`` for the other notifications a server sends:
``notifications/message`` (logging), ``notifications/resources/list_changed``,
``notifications/resources/updated``, ``notifications/prompts/list_changed``,
``notifications/elicitation/complete``. ``params`` is wire JSON."""

# The notifications handed to ``on_notification`` (tools/list_changed has its own callback;
# logging arrives through the SDK's logging callback).
_FORWARDED_NOTIFICATIONS = frozenset(
    {
        "notifications/resources/list_changed",
        "notifications/resources/updated",
        "notifications/prompts/list_changed",
        "notifications/elicitation/complete",
    }
)

# How long a failed call waits for its connection's owner to finish tearing down, to learn
# why the connection ended (the owner records the transport's own exception).
_FAILURE_SETTLE_SECONDS = 3.0


def utcnow() -> datetime:
    return datetime.now(UTC)


class Link:
    """One live connection (one process or one HTTP session) and its owner task."""

    def __init__(self, server: ServerState, number: int) -> None:
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
        self.stderr: StderrLog | None = None
        self.tools_listed = False
        self.tools_lock = asyncio.Lock()
        self.in_flight = 0  # requests running on this link right now
        self.last_used = time.monotonic()
        self.idle_closed = False
        self.routes = InboundRoutes()  # where the server's own requests go (server_requests)
        # What this connection read and was asked to keep (UI documents: the gateway's
        # ``ui_resource``), by ``(owner, uri)``, for as long as the server can tell it of a
        # change to the uri and has not (``ConnectionManager.kept``; bench/README.md issue 28).
        self.kept: dict[tuple[Hashable, str], Any] = {}
        self.heard: set[str] = set()  # URIs whose changes reach this connection now
        self.changes: dict[str, int] = {}  # per URI: changes heard of
        self.change_epoch = 0  # any URI may have changed: list_changed, or a gap in hearing
        self.wanted: set[str] = set()  # 2026-era: the URIs the listen stream should name
        self.asked: set[str] = set()  # 2026-era: the URIs the open listen stream asked for
        self.listening = False  # 2026-era: the owner's listen stream is kept open
        self.relisten: anyio.CancelScope | None = None  # cancelled: listen again, for `wanted`
        self.hearing_changed = asyncio.Event()  # set (and replaced) when `heard` changes

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

    @contextlib.contextmanager
    def in_use(self) -> Iterator[None]:
        """Count a request as in flight (idle and drain decisions depend on it)."""
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1
            self.last_used = time.monotonic()
            if self.server.draining and self.in_flight == 0:
                self.request_stop()

    def stderr_tail(self) -> str:
        """The last meaningful line the process wrote to stderr during this link."""
        return self.stderr.tail() if self.stderr is not None else ""

    # ---- kept resources ---------------------------------------------------------------

    def change_mark(self, uri: str) -> tuple[int, int]:
        """Changes to ``uri`` heard of so far: a keeper compares it before and after reading."""
        return self.change_epoch, self.changes.get(uri, 0)

    def resource_changed(self, uri: str | None) -> None:
        """The server said ``uri`` changed (None: any may have): what was kept of it goes."""
        if uri is None:
            self.change_epoch += 1
            self.kept.clear()
            return
        self.changes[uri] = self.changes.get(uri, 0) + 1
        for key in [key for key in self.kept if key[1] == uri]:
            del self.kept[key]

    def hear(self, uris: set[str]) -> None:
        """Changes to these URIs (only) reach the connection from now on. Whatever was
        not heard of in between may have changed: nothing kept is trusted across it."""
        self.resource_changed(None)
        self.heard = uris
        changed, self.hearing_changed = self.hearing_changed, asyncio.Event()
        changed.set()


class ServerState:
    """One server key: its current link, how many it has started, its health."""

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.lock = asyncio.Lock()
        self.link: Link | None = None
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


class ConnectionPool:
    """The connections of one ``ConnectionManager`` (one event loop), by spec key."""

    def __init__(
        self,
        *,
        on_tools_changed: ToolsChangedCallback | None,
        on_health: HealthCallback | None,
        stderr_dir: Path,
        spool_dir: Path | None,
        idle_timeout: float | None,
        client_info: types.Implementation,
        on_notification: NotificationCallback | None = None,
        inbound_kinds: frozenset[str] = frozenset(),
        sampling_capability: types.SamplingCapability | None = None,
    ) -> None:
        """``inbound_kinds``: the server requests Atrium answers (``"elicitation"``,
        ``"sampling"``); only those capabilities are declared to servers."""
        self.on_tools_changed = on_tools_changed
        self.on_notification = on_notification
        self.inbound_kinds = inbound_kinds
        self.sampling_capability = sampling_capability
        self.on_health = on_health
        self.stderr_dir = stderr_dir
        self.spool_dir = spool_dir
        self.idle_timeout = idle_timeout
        self._client_info = client_info
        self._servers: dict[str, ServerState] = {}
        self._owner_tasks: set[asyncio.Task[None]] = set()
        self._callback_tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    def server(self, spec: ServerSpec) -> ServerState:
        """The state of ``spec``'s server; a new config of a server drains the old one."""
        if self._closed:
            raise ServerUnavailable(spec.label, reason="the connection manager is closed")
        server = self._servers.get(spec.key)
        if server is None:
            server = self._servers[spec.key] = ServerState(spec)
            self._drain_superseded(spec)
        return server

    async def ensure_link(self, server: ServerState) -> Link:
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

    async def retire(self, link: Link) -> BaseException | None:
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

    def live_link(self, key: str) -> Link | None:
        """The server's connection, if it is open and usable now (nothing is started)."""
        server = self._servers.get(key)
        link = server.link if server is not None else None
        return link if link is not None and link.usable else None

    def health(self, key: str) -> HealthInfo:
        server = self._servers.get(key)
        if server is None:
            return HealthInfo(state="idle", last_error=None, last_seen=None, connected_at=None)
        return server.health()

    async def close(self, key: str) -> None:
        """Close one connection (stops the process / ends the HTTP session). Idempotent."""
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
        """Close every connection; the pool refuses new work afterwards."""
        self._closed = True
        keys = list(self._servers)
        await asyncio.gather(*(self.close(key) for key in keys), return_exceptions=True)
        if self._owner_tasks:
            await asyncio.gather(*list(self._owner_tasks), return_exceptions=True)

    def record_error(self, server: ServerState, message: str) -> None:
        server.last_error = message
        self._notify_health(server)

    # ---- the owner task ------------------------------------------------------------

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

    def _start_link(self, server: ServerState) -> Link:
        server.links_started += 1
        link = Link(server, server.links_started)
        server.link = link
        self._set_state(server, "connecting")
        task = asyncio.get_running_loop().create_task(
            self._own(link), name=f"mcp-connection {server.spec.key} #{link.number}"
        )
        link.task = task
        self._owner_tasks.add(task)
        task.add_done_callback(self._owner_tasks.discard)
        return link

    async def _own(self, link: Link) -> None:
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
                    server.connected_at = server.last_seen = utcnow()
                    await self._set_log_level(link, client)  # before the first request
                    self._set_state(server, "connected")
                    link.settled.set()
                    async with anyio.create_task_group() as tg:
                        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                            link.listening = True  # before any request can ask (kept)
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
                link.failure_message = connect_failure_message(
                    spec, link.failure, stderr_tail=link.stderr_tail()
                )
                self.record_error(server, link.failure_message)
                if not server.closed:
                    self._set_state(server, "failed")
            elif link.failure is not None and not link.stopping:
                self.record_error(server, lost_connection_message(spec, link.failure))
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

    async def _hold(self, link: Link) -> None:
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

    def _make_client(self, link: Link) -> Client:
        spec = link.server.spec
        if spec.transport == "stdio":
            link.stderr = StderrLog(self.stderr_dir, spec.key)
        transport = open_transport(
            spec, stderr=link.stderr, number=link.number, spool_dir=self.spool_dir
        )
        return Client(
            watched(transport, link.mark_dead),
            mode=spec.mode,
            cache=None,  # never serve a stale listing or resource; see module docstring
            read_timeout_seconds=spec.call_timeout,  # the default; calls pass their own
            client_info=self._client_info,
            extensions=[advertise(UI_EXTENSION_ID, {"mimeTypes": [UI_MIME_TYPE]})],
            message_handler=partial(self._on_message, link),
            logging_callback=partial(self._on_log, link),
            # Only what is implemented is declared: the SDK declares a capability exactly when
            # its callback is given. Roots are never declared (Atrium exposes no files).
            elicitation_callback=(
                partial(self._on_elicitation, link) if "elicitation" in self.inbound_kinds else None
            ),
            sampling_callback=(
                partial(self._on_sampling, link) if "sampling" in self.inbound_kinds else None
            ),
            sampling_capabilities=self.sampling_capability,
            log_level=cast(types.LoggingLevel, spec.log_level) if spec.log_level else None,
        )

    async def _set_log_level(self, link: Link, client: Client) -> None:
        """`logging/setLevel` on a handshake-era connection whose server declares logging
        (2026-era requests carry the level as their opt-in: ``log_level`` above)."""
        level = link.server.spec.log_level
        if (
            level
            and client.protocol_version not in MODERN_PROTOCOL_VERSIONS
            and client.server_capabilities.logging is not None
        ):
            with contextlib.suppress(Exception):
                await client.set_logging_level(cast(types.LoggingLevel, level))

    async def _inbound(self, link: Link, kind: InboundKind, params: Any) -> dict[str, Any]:
        """Route a server's request to the handler of the call it belongs to."""
        wire = _wire(params)
        handler = link.routes.handler_for(kind, wire)
        spec = link.server.spec
        return await handler(
            InboundRequest(kind=kind, server_label=spec.label, server_key=spec.key, params=wire)
        )

    async def _on_elicitation(
        self, link: Link, _context: Any, params: Any
    ) -> types.ElicitResult | types.ErrorData:
        try:
            wire = await self._inbound(link, "elicitation", params)
        except InboundRequestRefused as exc:
            return types.ErrorData(code=exc.code, message=exc.message)
        return types.ElicitResult.model_validate(wire)

    async def _on_sampling(
        self, link: Link, _context: Any, params: Any
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        try:
            wire = await self._inbound(link, "sampling", params)
        except InboundRequestRefused as exc:
            return types.ErrorData(code=exc.code, message=exc.message)
        if isinstance(wire.get("content"), list):
            return types.CreateMessageResultWithTools.model_validate(wire)
        return types.CreateMessageResult.model_validate(wire)

    async def _on_log(self, link: Link, params: Any) -> None:
        link.server.last_seen = utcnow()
        if self.on_notification is not None:
            wire = _wire(params)
            self._fire(self.on_notification, link.server.spec.key, "notifications/message", wire)

    async def _listen_for_changes(self, link: Link, client: Client) -> None:
        """2026-era servers announce list changes only on a ``subscriptions/listen`` stream.

        The stream's events are also delivered to the message handler, which fires the
        callbacks; this task keeps the subscription open (and reopens it if dropped), and
        opens it again naming the resources the link is asked to hear of (``wanted``:
        ``ConnectionManager.keep_mark``). Since issue 28 it also asks for
        ``resources/list_changed``, which then reaches ``on_notification`` as on 2025-era
        connections."""
        failures = 0
        link.listening = True
        try:
            while not link.wake.is_set():
                uris = set(link.wanted)
                relisten = False
                try:
                    async with client.listen(
                        tools_list_changed=True,
                        resources_list_changed=True,
                        resource_subscriptions=sorted(uris),
                    ) as subscription:
                        failures = 0
                        honored = subscription.honored
                        link.asked = uris
                        link.hear(set(honored.resource_subscriptions or ()) & uris)
                        with anyio.CancelScope() as scope:
                            link.relisten = scope
                            if link.wanted - uris:
                                scope.cancel()  # asked for more while this one opened
                            async for event in subscription:
                                _heard_event(link, event)
                        link.relisten = None
                        relisten = scope.cancelled_caught
                except MCPError as exc:
                    if exc.code in (METHOD_NOT_FOUND, CONNECTION_CLOSED):
                        return
                    failures += 1
                except Exception as exc:  # noqa: BLE001 — a lost stream is retried below
                    logger.debug("listen stream on %s ended: %r", link.server.spec.label, exc)
                    failures += 1
                finally:
                    link.relisten = None
                    link.hear(set())  # a gap: nothing heard until the next stream is open
                if relisten:
                    continue
                if failures >= 5:
                    logger.warning(
                        "Giving up tools/list_changed subscription on %s", link.server.spec.label
                    )
                    return
                await anyio.sleep(min(30.0, 0.5 * 2**failures))
        finally:
            link.listening = False
            link.hear(set())

    async def _on_message(self, link: Link, message: Any) -> None:
        server = link.server
        if isinstance(message, Exception):
            logger.info("Transport error on %s: %r", server.spec.label, message)
            return
        server.last_seen = utcnow()
        if isinstance(message, types.ToolListChangedNotification):
            link.tools_listed = False  # output schemas may have changed
            if self.on_tools_changed is not None:
                self._fire(self.on_tools_changed, server.spec.key)
            return
        method = getattr(message, "method", None)
        if self.on_notification is not None and method in _FORWARDED_NOTIFICATIONS:
            params = getattr(message, "params", None)
            wire = _wire(params) if params is not None else {}
            _heard_change(link, method, wire)
            self._fire(self.on_notification, server.spec.key, method, wire)
        elif method in _FORWARDED_NOTIFICATIONS:
            params = getattr(message, "params", None)
            _heard_change(link, method, {"uri": str(getattr(params, "uri", "") or "")})

    # ---- health --------------------------------------------------------------------

    def _set_state(self, server: ServerState, state: HealthState) -> None:
        if server.state == state:
            return
        server.state = state
        self._notify_health(server)

    def _notify_health(self, server: ServerState) -> None:
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


def _heard_event(link: Link, event: Any) -> None:
    """An event of the 2026-era listen stream (tools/list_changed reaches the message
    handler as a notification too)."""
    if isinstance(event, ResourceUpdated):
        link.resource_changed(event.uri or None)
    elif isinstance(event, ResourcesListChanged):
        link.resource_changed(None)


def _heard_change(link: Link, method: str | None, params: dict[str, Any]) -> None:
    """A resource notification drops what the connection kept of what it names."""
    if method == "notifications/resources/list_changed":
        link.resource_changed(None)
    elif method == "notifications/resources/updated":
        uri = params.get("uri")
        link.resource_changed(uri if isinstance(uri, str) and uri else None)


def _key_family(key: str) -> str | None:
    """The ``slug`` of a ``slug:confighash`` key (``ServerSpec.create``); None otherwise."""
    family, separator, _ = key.partition(":")
    return family if separator and family else None


async def _log_failure(awaitable: Awaitable[Any], callback: Callable[..., Any]) -> None:
    try:
        await awaitable
    except Exception:
        logger.exception("MCP connection callback %r raised", callback)


def _wire(params: Any) -> dict[str, Any]:
    """A server's request or notification params as wire JSON every database can store."""
    return cast(
        dict[str, Any], storable(params.model_dump(by_alias=True, mode="json", exclude_none=True))
    )
