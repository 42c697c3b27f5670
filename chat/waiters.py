"""Futures that resolve when a tool call reaches a final state.

A view's `tools/call` (or a model turn) waits for its call to finish, which may happen in
another process (an approval decided elsewhere) or in a worker thread of this one. Final
`toolcall` events resolve the waiters of this process from both paths: the broadcast after
commit (same process, even with no socket open) and every consumer's group event (any
process). Resolving twice is harmless.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

FINAL = {"success", "error", "rejected", "cancelled"}

_lock = threading.Lock()
_waiters: dict[int, list[tuple[asyncio.AbstractEventLoop, asyncio.Future[dict[str, Any]]]]] = {}


def wait_for(call_id: int) -> asyncio.Future[dict[str, Any]]:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[dict[str, Any]] = loop.create_future()
    with _lock:
        _waiters.setdefault(call_id, []).append((loop, future))
    return future


def _set(future: asyncio.Future[dict[str, Any]], payload: dict[str, Any]) -> None:
    if not future.done():
        future.set_result(payload)


def resolve(payload: dict[str, Any]) -> None:
    """Called with `toolcall` payloads; safe from any thread."""
    if payload.get("status") not in FINAL:
        return
    with _lock:
        entries = _waiters.pop(payload.get("id"), [])
    for loop, future in entries:
        if loop.is_closed():
            continue
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            _set(future, payload)
        else:
            loop.call_soon_threadsafe(_set, future, payload)


def is_waiting(call_id: Any) -> bool:
    """Whether anything in this process waits for that call (a cheap check before decoding
    an event to resolve it)."""
    return call_id in _waiters


def discard(call_id: int, future: asyncio.Future[Any]) -> None:
    with _lock:
        entries = _waiters.get(call_id, [])
        _waiters[call_id] = [(lp, f) for lp, f in entries if f is not future]
        if not _waiters[call_id]:
            _waiters.pop(call_id, None)
