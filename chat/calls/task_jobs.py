"""The Celery side of tool calls run as MCP tasks (``chat.calls.mcp_tasks``).

``drive_tool_call_task`` starts the call's driver on this worker process's own event loop
(a blocking portal, one per process, with its ``ConnectionManager``) and returns at once: a
task may run for hours, and the worker stays free for media and sweeps meanwhile. The
driver says it is alive on the call row every second; if this process dies, the beat sweep
``requeue_tool_call_tasks`` queues the call again and another worker takes it over (the
server must still know the task: one that keeps tasks per connection, like
server-everything, forgets them with the connection, and the call then fails as expired).
Thin, JSON-only, primary keys (DESIGN §10).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from concurrent.futures import Future
from contextlib import AbstractContextManager
from functools import partial
from typing import Any

import anyio.from_thread
from anyio.from_thread import BlockingPortal
from celery import shared_task
from django.db import transaction

from chat.calls.mcp_tasks import (
    tool_call_task_drive,
    tool_call_task_submit,
    tool_calls_tasks_stalled,
)
from chat.services.turn_lease import HOLDER
from mcp_bridge import gateway

log = logging.getLogger(__name__)

_lock = threading.Lock()
_portal: tuple[int, AbstractContextManager[BlockingPortal], BlockingPortal] | None = None
_driving: dict[int, Future[Any]] = {}


def _the_portal() -> BlockingPortal:
    """This process's event loop for task drivers (a forked child starts its own)."""
    global _portal
    with _lock:
        if _portal is None or _portal[0] != os.getpid():
            manager = anyio.from_thread.start_blocking_portal()
            _portal = (os.getpid(), manager, manager.__enter__())
        return _portal[2]


def drivers_stop() -> None:
    """Stop this process's drivers and close their MCP connections (process exit; tests
    use it as a worker restart)."""
    global _portal
    with _lock:
        found, _portal = _portal, None
        running = list(_driving.values())
        _driving.clear()
    if found is None or found[0] != os.getpid():
        return
    for future in running:
        future.cancel()
    try:
        found[2].call(gateway.close_all)
    finally:
        found[1].__exit__(None, None, None)


atexit.register(drivers_stop)


def drive_in_process(call_id: int) -> Future[Any] | None:
    """Start the call's driver here unless one already runs in this process."""
    with _lock:
        running = _driving.get(call_id)
        if running is not None and not running.done():
            return None
    future = _the_portal().start_task_soon(partial(tool_call_task_drive, call_id, poller=HOLDER))
    with _lock:
        _driving[call_id] = future
    future.add_done_callback(lambda _f: _forget(call_id, future))
    return future


def _forget(call_id: int, future: Future[Any]) -> None:
    with _lock:
        if _driving.get(call_id) is future:
            del _driving[call_id]


@shared_task(ignore_result=True, time_limit=60, soft_time_limit=50)
def drive_tool_call_task(call_id: int) -> None:
    """Start driving a task call in this worker process (see the module)."""
    drive_in_process(int(call_id))


@shared_task(ignore_result=True, time_limit=60, soft_time_limit=50)
def requeue_tool_call_tasks() -> int:
    """Beat: task calls whose poller died are queued again."""
    ids = list(tool_calls_tasks_stalled().values_list("pk", flat=True)[:200])
    for call_id in ids:
        _enqueue(call_id)
    return len(ids)


def _enqueue(call_id: int) -> None:
    try:
        drive_tool_call_task.delay(call_id)
    except Exception:  # a down broker: the sweep queues it again later
        log.exception("could not queue task call %s", call_id)


def task_submit(*, call_id: int) -> bool:
    """Hand a running call to the workers as a task (``tool_call_task_submit``), queued on
    commit."""
    with transaction.atomic():
        submitted = tool_call_task_submit(call_id=call_id)
        if submitted:
            transaction.on_commit(lambda: _enqueue(call_id))
    return submitted
