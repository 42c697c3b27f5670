"""Process-wide background tasks (tool calls, agent turns) that outlive a socket message."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)

_tasks: dict[str, asyncio.Task[Any]] = {}


def spawn(key: str, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    """Run ``coro`` in the background, keyed so it can be cancelled later."""
    # A fresh context: the task must not inherit the request (or admin action) that
    # started it, whose sync executor may be gone by the time the task touches the DB.
    task = asyncio.get_running_loop().create_task(coro, name=key, context=contextvars.Context())
    _tasks[key] = task

    def _done(t: asyncio.Task[Any]) -> None:
        if _tasks.get(key) is t:
            _tasks.pop(key, None)
        if not t.cancelled() and t.exception() is not None:
            log.error("background task %s failed", key, exc_info=t.exception())

    task.add_done_callback(_done)
    return task


def cancel(key: str) -> bool:
    task = _tasks.get(key)
    if task is None or task.done():
        return False
    task.cancel()
    return True


def running() -> list[str]:
    return [k for k, t in _tasks.items() if not t.done()]


def running_task(key: str) -> asyncio.Task[Any] | None:
    """The task running under ``key``, if it still runs."""
    task = _tasks.get(key)
    return task if task is not None and not task.done() else None


def is_running(key: str) -> bool:
    task = _tasks.get(key)
    return task is not None and not task.done()
