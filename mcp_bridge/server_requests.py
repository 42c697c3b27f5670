"""Requests a server sends *to* Atrium (elicitation, sampling) and where they go.

Pure async Python, no Django. A server asks while it works on one of our requests — a
``tools/call`` usually — and the answer must come from the person that call runs for, under
that call's binding. The ``mcp_bridge`` layer cannot decide that; it only routes: whoever
starts a call passes an ``InboundRequestHandler`` (``chat`` builds one per call), and a
request arriving on that call's connection goes to it.

How a request finds its call:

* 2026-era connections embed the server's requests in the call's own result
  (``InputRequiredResult``); the SDK answers them inside the calling task, so the handler is
  found in a context variable set around the call.
* 2025-era connections send them as separate JSON-RPC requests that name no call (stdio has
  no place for a related request id) — except a task's, which names its task in ``_meta``
  (``io.modelcontextprotocol/related-task``) and goes to whoever is reading that task. The
  rest go to the one call with a handler in flight on that connection. With none, or with several — Atrium cannot tell whose question it is —
  the server gets an error instead of a guess: asking the wrong person is worse than asking
  nobody.

A handler answers with the result as wire JSON, or raises ``InboundRequestRefused`` to
answer with a JSON-RPC error.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "INBOUND_KINDS",
    "InboundKind",
    "InboundRequest",
    "InboundRequestHandler",
    "InboundRequestRefused",
    "InboundRoutes",
    "current_handler",
]

InboundKind = Literal["elicitation", "sampling"]
INBOUND_KINDS: frozenset[str] = frozenset({"elicitation", "sampling"})

# JSON-RPC codes for refusals (MCP uses -32600 for a request the client will not serve).
INVALID_REQUEST = -32600
RELATED_TASK_META = "io.modelcontextprotocol/related-task"
USER_REJECTED = -1  # the MCP spec's code for "the user rejected the sampling request"


@dataclass(frozen=True, kw_only=True)
class InboundRequest:
    """One request from a server: ``elicitation/create`` or ``sampling/createMessage``."""

    kind: InboundKind
    server_label: str
    server_key: str
    params: dict[str, Any]  # wire JSON (camelCase, ``_meta`` kept: the handler strips it)


InboundRequestHandler = Callable[[InboundRequest], Awaitable[dict[str, Any]]]


class InboundRequestRefused(Exception):
    """Answer the server with a JSON-RPC error (``message`` is shown to the server)."""

    def __init__(self, message: str, *, code: int = INVALID_REQUEST) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_current: contextvars.ContextVar[InboundRequestHandler | None] = contextvars.ContextVar(
    "atrium_inbound_handler", default=None
)


def current_handler() -> InboundRequestHandler | None:
    """The handler of the call running in this task (2026-era embedded requests)."""
    return _current.get()


@dataclass
class InboundRoutes:
    """The handlers of the calls in flight on one connection."""

    _handlers: dict[int, InboundRequestHandler] = field(default_factory=dict)
    _by_task: dict[str, InboundRequestHandler] = field(default_factory=dict)
    _numbers: Iterator[int] = field(default_factory=itertools.count)

    @contextlib.contextmanager
    def route(
        self, handler: InboundRequestHandler | None, *, task_id: str | None = None
    ) -> Iterator[None]:
        """While the block runs, the connection's requests may go to ``handler`` (and those
        naming task ``task_id`` do)."""
        if handler is None:
            yield
            return
        number = next(self._numbers)
        self._handlers[number] = handler
        if task_id is not None:
            self._by_task[task_id] = handler
        token = _current.set(handler)
        try:
            yield
        finally:
            _current.reset(token)
            del self._handlers[number]
            if task_id is not None and self._by_task.get(task_id) is handler:
                del self._by_task[task_id]

    def handler_for(self, kind: str, params: dict[str, Any] | None = None) -> InboundRequestHandler:
        """The handler a request of ``kind`` goes to, or ``InboundRequestRefused``."""
        handler = current_handler()
        if handler is not None:
            return handler
        related = _related_task(params)
        if related is not None and related in self._by_task:
            return self._by_task[related]
        handlers = list(self._handlers.values())
        if len(handlers) == 1:
            return handlers[0]
        if not handlers:
            raise InboundRequestRefused(
                f"Atrium accepts {kind} requests only while one of its calls to this server "
                "is running; none is."
            )
        raise InboundRequestRefused(
            f"Several calls to this server are running; Atrium cannot tell which one this "
            f"{kind} request belongs to. Try again when only one is running."
        )


def _related_task(params: dict[str, Any] | None) -> str | None:
    meta = (params or {}).get("_meta")
    related = meta.get(RELATED_TASK_META) if isinstance(meta, dict) else None
    task_id = related.get("taskId") if isinstance(related, dict) else None
    return task_id if isinstance(task_id, str) else None
