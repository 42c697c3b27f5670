"""Watching one request on its way: its progress updates relayed to the caller, and the
caller's cancellation turned into the request's (``ConnectionManager.call_tool``)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from mcp_bridge.errors import Cancelled
from mcp_bridge.uimeta import clean_str

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None] | None]
"""``(progress, total, message)``; may be sync or async."""

_PROGRESS_DRAIN_SECONDS = 5.0

_T = TypeVar("_T")


class ProgressRelay:
    """The SDK's progress callback for one call: runs the caller's callback (sync or async),
    contains its errors, and lets ``call_tool`` wait until every update has been handled.

    The SDK runs each progress callback in its own task, started as the notification is read
    and so before the result is read; ``drain`` waits for the ones still running.
    """

    def __init__(self, label: str, tool: str, callback: ProgressCallback) -> None:
        self._label, self._tool, self._callback = label, tool, callback
        self._running = 0
        self._idle = asyncio.Event()
        self._idle.set()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self._running += 1
        self._idle.clear()
        try:
            # A server's words, stored with the call: storable like the rest it says.
            outcome = self._callback(progress, total, clean_str(message) if message else message)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:
            logger.exception("Progress callback for %r on %s raised", self._tool, self._label)
        finally:
            self._running -= 1
            if not self._running:
                self._idle.set()

    async def drain(self, timeout: float = _PROGRESS_DRAIN_SECONDS) -> None:
        await asyncio.sleep(0)  # let callbacks scheduled with the result start
        if self._idle.is_set():
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._idle.wait()


async def unless_set(work: Coroutine[Any, Any, _T], cancel_event: asyncio.Event) -> _T:
    """Await ``work``; if ``cancel_event`` is set first, cancel it and raise ``Cancelled``.

    Cancelling the work cancels the MCP request, which the SDK forwards to the server.
    """
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(cancel_event.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
        if not task.done():
            # The event fired, or our own task is being cancelled: cancel the request and
            # wait until it has unwound (the courtesy cancel goes out while it does).
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
    if task.cancelled():
        raise Cancelled(reason="cancelled by the caller")
    return task.result()
