"""``waiters.wait_final``: the one way to wait for a tool call's end, on events."""

from __future__ import annotations

import asyncio

from channels.layers import get_channel_layer

from chat.realtime import waiters
from chat.realtime.events import wire_message
from chat.realtime.groups import thread_group


def _final(call_id: int, status: str = "success") -> dict:
    return {"id": call_id, "status": status}


async def test_an_end_in_this_process_resolves_the_waiter_without_reading_state():
    reads = 0

    async def read_final():
        nonlocal reads
        reads += 1
        return None

    waiting = asyncio.ensure_future(
        waiters.wait_final(
            call_id=101, thread_id=1, timeout=10, read_final=read_final, runs_here=True
        )
    )
    while not waiters.is_waiting(101):
        await asyncio.sleep(0)  # let the waiter register (an event-loop turn, no clock)
    waiters.resolve(_final(101))  # what this process's broadcast does after commit
    assert await waiting == _final(101)
    assert reads == 0
    assert not waiters.is_waiting(101)


async def test_an_end_before_waiting_is_read_once():
    async def read_final():
        return _final(102, "rejected")

    payload = await waiters.wait_final(call_id=102, thread_id=1, timeout=10, read_final=read_final)
    assert payload == _final(102, "rejected")


async def test_an_end_in_another_process_resolves_the_waiter():
    """Another process stores the end and broadcasts it on the thread's group; nothing
    calls this process's ``resolve``. (Redis layer: the group event; in-memory layer,
    where no event crosses processes: the bounded state read.)"""
    stored: dict = {}

    async def read_final():
        return stored.get("final")

    waiting = asyncio.ensure_future(
        waiters.wait_final(call_id=103, thread_id=7, timeout=20, read_final=read_final)
    )
    while not waiters.is_waiting(103):
        await asyncio.sleep(0)
    stored["final"] = _final(103, "cancelled")
    event = {"seq": 1, "kind": "toolcall", "data": _final(103, "cancelled")}
    await get_channel_layer().group_send(thread_group(7), wire_message(event))
    assert await waiting == _final(103, "cancelled")


async def test_the_waiter_gives_up_after_its_timeout():
    async def read_final():
        return None

    assert (
        await waiters.wait_final(
            call_id=104, thread_id=1, timeout=0.05, read_final=read_final, runs_here=True
        )
        is None
    )
    assert not waiters.is_waiting(104)
