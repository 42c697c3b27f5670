"""Stopping a tool call that runs in another process (N web processes behind a load balancer).

A call runs in the process that started it (``chat.calls.run.tool_call_run``); a
member's "stop" reaches whichever process their socket is on. That process records the
cancellation at once and tells every process over the channel layer (group
:data:`chat.realtime.groups.CALL_RUNNERS`, ``chat.calls.cancel.tool_call_stop``); the one running the call
cancels its task, so the MCP SDK sends the server ``notifications/cancelled``, and the
others find no such task. Each process listens on one channel of its own, from its first
socket on. The in-memory layer (embedded: one web process) reaches no other process: nothing is
listened to or sent there.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any

from channels.layers import get_channel_layer

from chat.calls import runtime
from chat.calls.requests import task_key
from chat.realtime.events import layer_is_process_local
from chat.realtime.groups import CALL_RUNNERS, call_stop_message

log = logging.getLogger(__name__)

REJOIN_EVERY = 3600.0  # seconds; channels_redis forgets a group member after a day


_listeners: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[None]] = (
    weakref.WeakKeyDictionary()
)


def listen() -> None:
    """Start this process's listener (once per event loop; the web server runs one)."""
    if layer_is_process_local():
        return
    loop = asyncio.get_running_loop()
    task = _listeners.get(loop)
    if task is None or task.done():
        _listeners[loop] = loop.create_task(_listen(), name="call-stops")


def handle(message: dict[str, Any]) -> bool:
    """Cancel the call's task if it runs here; True when it did."""
    call_id = message.get("call_id")
    if not isinstance(call_id, int) or message != call_stop_message(call_id):
        return False
    return runtime.cancel(task_key(call_id))


async def _listen() -> None:
    layer = get_channel_layer()
    channel = await layer.new_channel("call-stops.")
    while True:
        try:
            await layer.group_add(CALL_RUNNERS, channel)
            async with asyncio.timeout(REJOIN_EVERY):
                while True:
                    message = await layer.receive(channel)
                    if handle(message):
                        log.info("stopped tool call %s at another process's request", message)
        except TimeoutError:
            continue  # rejoin the group
        except asyncio.CancelledError:
            raise
        except Exception:  # Redis away for a moment: listen again shortly
            log.warning("call-stop listener failed; listening again", exc_info=True)
            await asyncio.sleep(1.0)
