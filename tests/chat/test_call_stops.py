"""chat.calls.stops: a stop sent to every process cancels only a task running here."""

from __future__ import annotations

import asyncio

from chat.calls import runtime, stops
from chat.calls.requests import task_key
from chat.realtime.groups import call_stop_message


async def test_a_stop_cancels_the_call_running_here_and_nothing_else():
    started = asyncio.Event()

    async def slow() -> None:
        started.set()
        await asyncio.Event().wait()

    task = runtime.spawn(task_key(4242), slow())
    await started.wait()
    assert not stops.handle(call_stop_message(999_999))  # runs elsewhere: ignored
    assert not stops.handle({"type": "call.stop", "call_id": "4242"})  # malformed
    assert not stops.handle({"type": "other", "call_id": 4242})
    assert not task.done()
    assert stops.handle(call_stop_message(4242))
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled()
