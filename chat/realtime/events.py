"""Thread events: numbered, stored, and broadcast only once the transaction commits."""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import threading
import uuid
import weakref
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction

from lean_rows import Numbered, write_together

from ..models import Thread, ThreadEvent
from . import waiters
from .groups import thread_group

log = logging.getLogger(__name__)


def event_dict(event: ThreadEvent) -> dict[str, Any]:
    return {"seq": event.seq, "kind": event.kind, "data": event.payload}


def emit(*, thread_id: int, kind: str, payload: dict[str, Any]) -> ThreadEvent:
    """Give the event the thread's next sequence number, store it, broadcast on commit.

    The number's UPDATE takes the thread row's lock, so sequence numbers of one thread are
    handed out (and committed) in order even with many writers. On PostgreSQL the number
    and the INSERT are one statement (``lean_rows.write_together``).
    """
    event = thread_event(thread_id=thread_id, kind=kind, payload=payload)
    write_together(inserts=[event], numbered=numbering(event))
    announce(event)
    return event


def thread_event(*, thread_id: int, kind: str, payload: dict[str, Any]) -> ThreadEvent:
    """An event to store (``numbering`` gives it its number as it is written)."""
    return ThreadEvent(thread_id=thread_id, kind=kind, payload=payload, origin=process_origin())


def numbering(event: ThreadEvent) -> Numbered:
    """The event's ``seq``: its thread's next number, taken in the statement that stores it."""
    return Numbered(event, "seq", Thread, event.thread_id, "last_seq")


def announce(event: ThreadEvent) -> None:
    """Broadcast a stored event once its transaction commits (at once outside one)."""
    message = {"type": "thread.event", "event": event_dict(event)}
    transaction.on_commit(lambda: broadcast(event.thread_id, message))


_origin: tuple[int, str] = (0, "")


def process_origin() -> str:
    """This process's name in ``ThreadEvent.origin``: pid and a nonce (a forked child or a
    restarted pid is another process)."""
    global _origin
    pid = os.getpid()
    if _origin[0] != pid:
        _origin = (pid, f"{pid}:{uuid.uuid4().hex[:12]}")
    return _origin[1]


def layer_is_process_local() -> bool:
    """The embedded profile's in-memory channel layer reaches this process's sockets only
    (other processes' events reach them through chat.realtime.event_tail)."""
    backend = settings.CHANNEL_LAYERS.get("default", {}).get("BACKEND", "")
    return backend == "channels.layers.InMemoryChannelLayer"


def wire_message(event: dict[str, Any]) -> dict[str, Any]:
    """The channel-layer message of a stored event: the client frame encoded once.

    Every member's consumer used to receive its own deep copy of the event (the in-memory
    layer copies each message per channel) and JSON-encode it again; with the frame as one
    string, a 50-member fan-out costs one encoding. `ThreadConsumer.thread_event` sends
    `frame` as is to clients with interactive UI and decodes it only for the others.
    """
    message: dict[str, Any] = {
        "type": "thread.event",
        "seq": event["seq"],
        "kind": event["kind"],
        "frame": json.dumps({"type": "event", **event}),
    }
    data = event.get("data")
    if event["kind"] == "toolcall" and isinstance(data, dict):
        message["call"] = {"id": data.get("id"), "status": data.get("status")}
    return message


def broadcast(thread_id: int, message: dict[str, Any]) -> None:
    event = message["event"]
    if event["kind"] == "toolcall":
        waiters.resolve(event["data"])
    layer = get_channel_layer()
    if layer is None:
        return
    message = wire_message(event)
    loop = _server_loop()
    if loop is not None:
        # In the ASGI process (a `sync_to_async` thread): hand the event to the loop's
        # ordered sender and return, instead of blocking the (single, thread-sensitive)
        # database thread for a round trip through the event loop per event.
        _BroadcastQueue.for_loop(loop).put(layer, thread_group(thread_id), message)
        return
    try:
        async_to_sync(group_send_retrying)(layer, thread_group(thread_id), message)
    except Exception:  # a full or unreachable layer must not undo a committed change
        # Clients recover what they missed by sequence number on their next replay.
        log.exception("broadcast to thread %s failed", thread_id)


async def group_send_retrying(layer: Any, group: str, message: dict[str, Any]) -> None:
    """Send once more if the first attempt fails: after a Redis restart the first command
    on each pooled connection fails ("connection closed by server") and the retry gets a
    fresh connection. A duplicate is harmless (clients ignore seq <= their last)."""
    try:
        await layer.group_send(group, message)
    except Exception as exc:  # noqa: BLE001 — retried once, then raised to the caller
        log.warning("broadcast to %s failed (%s); retrying once", group, exc)
        await asyncio.sleep(0.05)
        await layer.group_send(group, message)


def _server_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop that runs this `sync_to_async` thread's caller, if any."""
    try:
        asyncio.get_running_loop()
        return None  # called on a loop thread: keep the synchronous path
    except RuntimeError:
        pass
    local = SyncToAsync.threadlocal
    loop = getattr(local, "main_event_loop", None)
    if loop is None or getattr(local, "main_event_loop_pid", None) != os.getpid():
        return None
    if loop.is_closed() or not loop.is_running():
        return None
    return loop


class _BroadcastQueue:
    """One sender task per event loop: group sends leave in the order events committed."""

    _queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _BroadcastQueue] = (
        weakref.WeakKeyDictionary()
    )
    _lock = threading.Lock()

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pending: collections.deque[tuple[Any, str, dict[str, Any]]] = collections.deque()
        self.task: asyncio.Task[None] | None = None

    @classmethod
    def for_loop(cls, loop: asyncio.AbstractEventLoop) -> _BroadcastQueue:
        with cls._lock:
            queue = cls._queues.get(loop)
            if queue is None:
                queue = cls._queues[loop] = cls(loop)
            return queue

    def put(self, layer: Any, group: str, message: dict[str, Any]) -> None:
        self.pending.append((layer, group, message))  # deque appends are thread-safe
        self.loop.call_soon_threadsafe(self._kick)

    def _kick(self) -> None:
        # On the loop thread: a running sender picks the new event up after its current
        # send; a finished one is replaced.
        if self.task is None or self.task.done():
            self.task = self.loop.create_task(self._drain(), name="thread-event-broadcast")

    async def _drain(self) -> None:
        while self.pending:
            layer, group, message = self.pending.popleft()
            try:
                await group_send_retrying(layer, group, message)
            except Exception:  # same policy as the synchronous path
                log.exception("broadcast to %s failed", group)


def events_after(*, thread_id: int, after: int, limit: int = 2000) -> list[dict[str, Any]]:
    rows = ThreadEvent.objects.filter(thread_id=thread_id, seq__gt=after).order_by("seq")[:limit]
    return [event_dict(e) for e in rows]
