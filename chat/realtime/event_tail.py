"""Embedded profile: events other processes store reach this web process's sockets.

The in-memory channel layer lives inside one web process. A Celery worker, beat or the
text channel (``manage.py chat``) stores its thread events in the same database but cannot
reach that layer. So each web process *tails* the threads its sockets watch, using what
already spans processes — the database and the per-thread sequence numbers:

- every :data:`POLL_INTERVAL` one indexed statement reads the watched threads' ``last_seq``;
- for a thread past its high-water mark, the new ``ThreadEvent`` rows are read in sequence
  order and the ones another process stored (``origin``) are broadcast to the thread's
  group; this process's own events were broadcast on commit (``chat.realtime.events.emit``);
- the mark then moves to the last row read.

Sequence numbers of one thread commit in order (``emit`` takes the thread row's lock), so
a row below the mark can never appear later: nothing is skipped. An event that arrives
after a later one of this process is a gap for the client for a moment; it replays by
sequence number and ignores what it already has (``chat.js: handleEvent``).

With Redis (production) every process broadcasts itself and nothing is tailed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import weakref
from dataclasses import dataclass, field
from typing import Any

from channels.layers import get_channel_layer
from django.db import connections

from ..models import Thread, ThreadEvent
from .events import (
    event_dict,
    group_send_retrying,
    layer_is_process_local,
    process_origin,
    thread_group,
    wire_message,
)

log = logging.getLogger(__name__)

POLL_INTERVAL = 0.05  # seconds; live delivery from a worker (bench/README.md, worker_events)
BATCH = 500  # events read per thread and poll (the next poll reads on)


@dataclass
class ForeignEvents:
    """What one poll found: per thread, its new high-water mark and the events to send."""

    marks: dict[int, int] = field(default_factory=dict)
    events: dict[int, list[dict[str, Any]]] = field(default_factory=dict)


def read_new_events(marks: dict[int, int], *, origin: str, batch: int = BATCH) -> ForeignEvents:
    """Events past each thread's mark, without the ones ``origin`` (this process) stored."""
    found = ForeignEvents()
    moved = Thread.objects.filter(pk__in=list(marks)).values_list("pk", "last_seq")
    for thread_id, last_seq in moved:
        mark = marks[thread_id]
        if last_seq <= mark:
            continue
        # Only the other processes' events are read: in a busy thread this process stores
        # most of them, and loading their payloads (tool results) to skip them cost about
        # as much CPU as storing them (bench/README.md, issue 28). Up to `last_seq`, read
        # above: an event is committed with its number, so nothing below it is missed.
        rows = list(
            ThreadEvent.objects.filter(thread_id=thread_id, seq__gt=mark, seq__lte=last_seq)
            .exclude(origin=origin)
            .order_by("seq")[:batch]
        )
        found.marks[thread_id] = rows[-1].seq if len(rows) == batch else last_seq
        if rows:
            found.events[thread_id] = [event_dict(row) for row in rows]
    return found


class _Tail:
    """One tailing task per event loop (the web server runs one), started by the first watcher
    and ended with the last one."""

    _tails: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Tail] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.watchers: dict[int, int] = {}
        self.marks: dict[int, int] = {}
        self.task: asyncio.Task[None] | None = None
        # A thread (and database connection) of its own: polls never queue behind the
        # single thread-sensitive database thread, nor hold it up.
        self.executor: concurrent.futures.ThreadPoolExecutor | None = None

    @classmethod
    def for_running_loop(cls) -> _Tail:
        loop = asyncio.get_running_loop()
        tail = cls._tails.get(loop)
        if tail is None:
            tail = cls._tails[loop] = cls(loop)
        return tail

    def watch(self, thread_id: int, last_seq: int) -> None:
        self.watchers[thread_id] = self.watchers.get(thread_id, 0) + 1
        # A thread watched already keeps its mark (its sockets get everything after it).
        self.marks.setdefault(thread_id, last_seq)
        if self.task is None or self.task.done():
            if self.executor is None:
                self.executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="event-tail"
                )
            self.task = self.loop.create_task(self._run(), name="thread-event-tail")

    def unwatch(self, thread_id: int) -> None:
        count = self.watchers.get(thread_id, 0) - 1
        if count > 0:
            self.watchers[thread_id] = count
            return
        self.watchers.pop(thread_id, None)
        self.marks.pop(thread_id, None)

    async def _run(self) -> None:
        layer = get_channel_layer()
        origin = process_origin()
        try:
            while self.watchers:
                await asyncio.sleep(POLL_INTERVAL)
                if not self.marks:
                    continue
                try:
                    found = await self.loop.run_in_executor(
                        self.executor, lambda m=dict(self.marks): read_new_events(m, origin=origin)
                    )
                except Exception:  # the database is busy or down: try again next poll
                    log.exception("could not read new thread events")
                    continue
                for thread_id, mark in found.marks.items():
                    if thread_id in self.marks:  # still watched
                        self.marks[thread_id] = max(self.marks[thread_id], mark)
                for thread_id, events in found.events.items():
                    for event in events:
                        await self._send(layer, thread_id, event)
        finally:
            self._close()

    async def _send(self, layer: Any, thread_id: int, event: dict[str, Any]) -> None:
        try:
            await group_send_retrying(layer, thread_group(thread_id), wire_message(event))
        except Exception:  # clients recover it by sequence number on their next replay
            log.exception("could not broadcast event %s of thread %s", event["seq"], thread_id)

    def _close(self) -> None:
        executor, self.executor = self.executor, None
        if executor is not None:
            executor.submit(connections.close_all)
            executor.shutdown(wait=False)


def watch(*, thread_id: int, last_seq: int) -> None:
    """A socket of this process follows the thread (from ``last_seq``, which it replays)."""
    if layer_is_process_local():
        _Tail.for_running_loop().watch(thread_id, last_seq)


def unwatch(*, thread_id: int) -> None:
    if layer_is_process_local():
        _Tail.for_running_loop().unwatch(thread_id)
