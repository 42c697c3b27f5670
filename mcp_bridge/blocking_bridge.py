"""``BlockingBridge``: a ``ConnectionManager`` for synchronous code (commands, Celery tasks)."""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, Self, TypeVar

import anyio.from_thread
from anyio.from_thread import BlockingPortal

from mcp_bridge.call_watch import ProgressCallback
from mcp_bridge.connection_pool import HealthInfo
from mcp_bridge.connections import ConnectionManager
from mcp_bridge.server_spec import ServerSpec

__all__ = ["BlockingBridge"]

_T = TypeVar("_T")


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
                current = cls(**manager_options)
                current._is_shared = True
                current.start()
                cls._shared, cls._shared_pid = current, os.getpid()
                atexit.register(current.stop)
            return current

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
