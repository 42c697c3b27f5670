"""``waiters.wait_final`` with the call's task (``runner``, issue 28): while the task runs in
this process the thread's group is not joined (one Redis subscription and unsubscription
fewer per view call); a task that ends with the call still open leaves its end to another
process, which the waiter then still gets."""

from __future__ import annotations

import asyncio

from channels.layers import get_channel_layer

from chat.realtime import waiters
from chat.realtime.events import wire_message
from chat.realtime.groups import thread_group


def _final(call_id: int, status: str = "success") -> dict:
    return {"id": call_id, "status": status}


async def test_a_call_ending_here_is_waited_for_without_joining_the_group():
    layer = get_channel_layer()
    joined: list[str] = []
    original = layer.group_add

    async def spy(group, channel):
        joined.append(group)
        await original(group, channel)

    layer.group_add = spy
    try:
        release = asyncio.Event()

        async def task():
            await release.wait()
            waiters.resolve(_final(201))  # its final event, broadcast on commit

        runner = asyncio.ensure_future(task())

        async def read_final():
            raise AssertionError("a call ending here is not read")

        waiting = asyncio.ensure_future(
            waiters.wait_final(
                call_id=201,
                thread_id=21,
                timeout=10,
                read_final=read_final,
                runs_here=True,
                runner=runner,
            )
        )
        while not waiters.is_waiting(201):
            await asyncio.sleep(0)
        release.set()
        assert await waiting == _final(201)
        await runner
    finally:
        layer.group_add = original
    assert joined == []
    assert waiters.watching(201) == 0


async def test_a_task_that_ends_with_the_call_open_leaves_it_to_another_process():
    """E.g. a stop asked through another process: it records the cancellation (its event
    goes over the layer) and this process's task unwinds without an event of its own."""
    stored: dict = {}

    async def read_final():
        return stored.get("final")

    release = asyncio.Event()

    async def task():
        await release.wait()  # cancelled elsewhere; nothing emitted here

    runner = asyncio.ensure_future(task())
    waiting = asyncio.ensure_future(
        waiters.wait_final(
            call_id=202,
            thread_id=22,
            timeout=20,
            read_final=read_final,
            runs_here=True,
            runner=runner,
        )
    )
    while not waiters.is_waiting(202):
        await asyncio.sleep(0)
    stored["final"] = _final(202, "cancelled")  # committed by the other process
    release.set()
    await runner
    event = {"seq": 1, "kind": "toolcall", "data": _final(202, "cancelled")}
    await get_channel_layer().group_send(thread_group(22), wire_message(event))
    assert await waiting == _final(202, "cancelled")
