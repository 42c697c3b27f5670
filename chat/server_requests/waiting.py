"""Waiting for a person's answer to a server request, in this process or another.

The handler of a call (``handler.py``) waits on a key it makes before the request's row is
stored; the answer (``services.server_request_answer``) is delivered on commit to this
process's waiters and, through the channel layer, to a group named by the key — the wire
result (a form's values included) crosses processes that way and is never stored. With the
in-memory layer of the embedded profile (one process) the local delivery is the path; a
bounded poll of the row's state covers an answer from elsewhere (it cannot carry values).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer

log = logging.getLogger(__name__)

POLL_WITHOUT_EVENTS = 1.0
MESSAGE_TYPE = "server_request.answer"

_lock = threading.Lock()
_waiters: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Future[dict[str, Any]]]]] = {}
# Keys a handler of this process will wait on: an answer arriving while no future is
# registered (before the wait starts, between two steps) is kept here for it.
_mailbox: dict[str, list[dict[str, Any]]] = {}


def reserve(key: str) -> None:
    """Say that this process will wait on ``key`` (before the request's row exists)."""
    with _lock:
        _mailbox.setdefault(key, [])


def release(key: str) -> None:
    with _lock:
        _mailbox.pop(key, None)


def _take_mail(key: str) -> list[dict[str, Any]]:
    with _lock:
        mail = _mailbox.get(key)
        if not mail:
            return []
        _mailbox[key] = []
        return mail


def group_name(key: str) -> str:
    return f"srq.{key}"


def _set(future: asyncio.Future[dict[str, Any]], message: dict[str, Any]) -> None:
    if not future.done():
        future.set_result(message)


def _resolve_local(key: str, message: dict[str, Any]) -> bool:
    with _lock:
        entries = list(_waiters.get(key, []))
        if key in _mailbox:
            _mailbox[key].append(message)  # a future may be between two steps
            if not entries:
                return True
    for loop, future in entries:
        if loop.is_closed():
            continue
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            _set(future, message)
        else:
            loop.call_soon_threadsafe(_set, future, message)
    return bool(entries)


def deliver(key: str, message: dict[str, Any]) -> None:
    """Hand an answer (``{"status", "result"?, "completed"?}``) to whoever waits on ``key``
    (called on commit, from any thread)."""
    if _resolve_local(key, message):
        return
    layer = get_channel_layer()
    if layer is None or isinstance(layer, InMemoryChannelLayer):
        return
    try:
        async_to_sync(layer.group_send)(group_name(key), {"type": MESSAGE_TYPE, **message})
    except Exception:  # the waiter's poll or timeout still ends its wait
        log.exception("could not deliver the answer of server request %s", key)


def waiting(key: str | None = None) -> int:
    with _lock:
        if key is not None:
            return len(_waiters.get(key, []))
        return sum(len(v) for v in _waiters.values())


async def wait_answer(
    *,
    key: str,
    timeout: float,
    read_state: Callable[[], Awaitable[dict[str, Any] | None]],
    until: Callable[[dict[str, Any]], bool] = lambda message: True,
) -> dict[str, Any] | None:
    """The first delivered message for ``key`` that ``until`` accepts, or None after
    ``timeout`` seconds. ``read_state`` reads the row: a message if it is decided already
    (called after the group is joined, then at a bounded interval where no message
    crosses processes)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    layer = get_channel_layer()
    crossing = layer is not None and not isinstance(layer, InMemoryChannelLayer)
    channel = None
    if crossing:
        channel = await layer.new_channel()
        await layer.group_add(group_name(key), channel)
    try:
        while True:
            future: asyncio.Future[dict[str, Any]] = loop.create_future()
            with _lock:
                _waiters.setdefault(key, []).append((loop, future))
            try:
                for mail in _take_mail(key):
                    if until(mail):
                        return mail
                state = await read_state()
                if state is not None and until(state):
                    return state
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return None
                waits: list[asyncio.Future[Any]] = [future]
                receiver = None
                if crossing:
                    receiver = asyncio.ensure_future(layer.receive(channel))
                    waits.append(receiver)
                step = remaining if crossing else min(remaining, POLL_WITHOUT_EVENTS)
                done, _ = await asyncio.wait(waits, timeout=step, return_when="FIRST_COMPLETED")
                if receiver is not None and not receiver.done():
                    receiver.cancel()
                message = None
                if future in done:
                    message = future.result()
                elif receiver is not None and receiver in done and not receiver.cancelled():
                    received = receiver.result()
                    if received.get("type") == MESSAGE_TYPE:
                        message = {k: v for k, v in received.items() if k != "type"}
                if message is not None and until(message):
                    return message
            finally:
                with _lock:
                    entries = [(lp, f) for lp, f in _waiters.get(key, []) if f is not future]
                    if entries:
                        _waiters[key] = entries
                    else:
                        _waiters.pop(key, None)
    finally:
        if crossing and channel is not None:
            leave = asyncio.ensure_future(layer.group_discard(group_name(key), channel))
            leave.add_done_callback(lambda t: t.cancelled() or t.exception())
