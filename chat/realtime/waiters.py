"""Waiting for a tool call to reach a final state: one strategy, on events.

A view's `tools/call` and a model turn wait for their call to finish, which may happen in
this process (its task, a worker thread) or in another one (an approval decided through
another server, the text channel, a cancellation). ``wait_final`` waits on the call's final
`toolcall` event from both: this process's broadcast after commit resolves it directly, and
the thread's channel-layer group — which the waiter joins itself, so no open socket is
needed — brings the events of every other process. The call's state is read once, after
joining the group, for a call that ended before. Only where no event crosses processes (the
in-memory layer of the embedded profile) is that read repeated, at a bounded interval.
Resolving twice is harmless.

Many waiters of one call (a view that asked the same question again joins the pending
request, docs/consent.md) share ONE watcher per call and event loop: one group membership,
one read, one poll. A waiter whose request ends (its socket closed: the view-call task is
cancelled) leaves; the last one to leave stops the watcher. ``waiting()`` and
``watching()`` say what is registered (tests assert on them).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer

from .groups import thread_group

log = logging.getLogger(__name__)

FINAL = {"success", "error", "rejected", "cancelled"}
POLL_WITHOUT_EVENTS = 1.0  # seconds; only where no event crosses processes (see _watch)

_lock = threading.Lock()
_waiters: dict[int, list[tuple[asyncio.AbstractEventLoop, asyncio.Future[dict[str, Any]]]]] = {}
# One watcher task per (call, event loop), shared by that loop's waiters of the call.
_watchers: dict[tuple[int, asyncio.AbstractEventLoop], asyncio.Task[None]] = {}


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


def waiting(call_id: int | None = None) -> int:
    """How many waiters are registered (for one call, or in all)."""
    with _lock:
        if call_id is not None:
            return len(_waiters.get(call_id, []))
        return sum(len(entries) for entries in _waiters.values())


def watching(call_id: int | None = None) -> int:
    """How many watchers run (for one call, or in all)."""
    with _lock:
        return sum(
            1
            for (watched, _loop), task in _watchers.items()
            if not task.done() and (call_id is None or watched == call_id)
        )


def _has_waiters(call_id: int, loop: asyncio.AbstractEventLoop) -> bool:
    with _lock:
        return any(lp is loop for lp, _f in _waiters.get(call_id, []))


def discard(call_id: int, future: asyncio.Future[Any]) -> None:
    """A waiter leaves (resolved, timed out or cancelled); the last of its loop stops the
    call's watcher there."""
    stop = None
    with _lock:
        entries = _waiters.get(call_id, [])
        loop = next((lp for lp, f in entries if f is future), None)
        _waiters[call_id] = [(lp, f) for lp, f in entries if f is not future]
        if not _waiters[call_id]:
            _waiters.pop(call_id, None)
        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
        if loop is not None and not any(lp is loop for lp, _f in _waiters.get(call_id, [])):
            stop = _watchers.pop((call_id, loop), None)
    if stop is not None and not stop.done():
        stop.cancel()


def _final_of(message: dict[str, Any], call_id: int) -> dict[str, Any] | None:
    """The call's final payload, if this group message is its final `toolcall` event."""
    if message.get("type") != "thread.event":
        return None
    call = message.get("call")
    if call is not None:  # the wire form (chat.realtime.events.wire_message): decode only a match
        if call.get("id") != call_id or call.get("status") not in FINAL:
            return None
        return json.loads(message["frame"])["data"]
    event = message.get("event") or {}
    data = event.get("data") or {}
    if event.get("kind") == "toolcall" and data.get("id") == call_id:
        return data if data.get("status") in FINAL else None
    return None


async def _watch(
    *,
    call_id: int,
    thread_id: int,
    read_final: Callable[[], Awaitable[dict[str, Any] | None]],
    runs_here: bool,
    runner: asyncio.Future[Any] | None = None,
) -> None:
    """Resolve the call's waiters on this loop from the thread's group (any process), after
    one read of the call's state that covers an end before the group was joined (skipped
    for a call whose task runs in this process: its end is an event of this process).

    ``runner``: the call's task in this process. While it runs, the group is not joined:
    the call ends here (its final event, or the record of a stop asked through another
    process, whose stop message cancels this task) — one subscription and one
    unsubscription to Redis fewer per view call, and no copy of every event of a busy thread
    for the watcher (bench/README.md, issue 28). Only a task that ends with the call still
    open (handed to a worker: MCP tasks) leaves its end to another process: then the group is
    joined and the state read, as for any call."""
    loop = asyncio.get_running_loop()
    layer = get_channel_layer()
    if layer is None or isinstance(layer, InMemoryChannelLayer):
        # No event crosses processes here (the embedded profile's in-memory layer): a call
        # ended by another process (the text channel, a second server) is seen by reading
        # its state, every POLL_WITHOUT_EVENTS seconds — the one bounded poll.
        while _has_waiters(call_id, loop):
            if not runs_here:
                payload = await read_final()
                if payload is not None:
                    resolve(payload)
                    return
            runs_here = False
            await asyncio.sleep(POLL_WITHOUT_EVENTS)
        return
    if runner is not None and not runner.done():
        await asyncio.wait([runner])  # never cancels the task, nor raises its error
        if not _has_waiters(call_id, loop):
            return  # its final event was this process's (resolved when it committed)
        runs_here = False  # ended elsewhere meanwhile, or will: read after joining
    group = thread_group(thread_id)
    channel = await layer.new_channel()
    await layer.group_add(group, channel)
    try:
        payload = None if runs_here else await read_final()
        if payload is not None:
            resolve(payload)
            return
        while _has_waiters(call_id, loop):
            payload = _final_of(await layer.receive(channel), call_id)
            if payload is not None:
                resolve(payload)
                return
    finally:
        # Not awaited here: this task may be ending by cancellation.
        leave = asyncio.ensure_future(layer.group_discard(group, channel))
        leave.add_done_callback(_log_failure)


def _log_failure(task: asyncio.Future[Any]) -> None:
    """A watcher that failed leaves its waiter to the in-process events and the timeout."""
    if not task.cancelled() and task.exception() is not None:
        log.warning("tool call watcher failed: %r", task.exception())


async def wait_final(
    *,
    call_id: int,
    thread_id: int,
    timeout: float,
    read_final: Callable[[], Awaitable[dict[str, Any] | None]],
    runs_here: bool = False,
    runner: asyncio.Future[Any] | None = None,
) -> dict[str, Any] | None:
    """The call's final `toolcall` payload, or None after ``timeout`` seconds.

    ``read_final``: reads the call and returns its payload if it is final already (None
    otherwise); called once, after the group is joined. ``runs_here``: the call's task runs
    in this process (``chat.calls.runtime``), whose events end it; no first read.
    ``runner``: that task itself; the group is joined only if it ends first (see ``_watch``). The waiter is
    registered before anything is awaited, so a call that ends in this process meanwhile
    resolves it. Waiters of one call share its watcher (started by the first)."""
    future = wait_for(call_id)
    loop = asyncio.get_running_loop()
    with _lock:
        watcher = _watchers.get((call_id, loop))
        if watcher is None or watcher.done():
            watcher = loop.create_task(
                _watch(
                    call_id=call_id,
                    thread_id=thread_id,
                    read_final=read_final,
                    runs_here=runs_here,
                    runner=runner,
                ),
                name=f"waiters.watch:{call_id}",
            )
            watcher.add_done_callback(_log_failure)
            _watchers[(call_id, loop)] = watcher
    try:
        return await asyncio.wait_for(asyncio.shield(future), timeout=timeout)
    except TimeoutError:
        return None
    finally:
        discard(call_id, future)
