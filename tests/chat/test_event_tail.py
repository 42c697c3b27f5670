"""Events another process stores reach this process's sockets (chat.realtime.event_tail; issue 15).

The processes here are simulated by ``ThreadEvent.origin``: a row stored under another
origin is what a Celery worker, beat or ``manage.py chat`` leaves in the database. Real
processes: tests/resilience/test_worker_events.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.db import transaction
from django.db.models import F
from django.test import AsyncClient

from chat.models import Thread, ThreadEvent
from chat.realtime import event_tail
from chat.realtime.events import emit, layer_is_process_local, process_origin

pytestmark = pytest.mark.django_db(transaction=True)

ELSEWHERE = "4242:another0proc"


def store_elsewhere(thread_id: int, payload: dict[str, Any]) -> int:
    """Store an event as another process does (no broadcast from here)."""
    with transaction.atomic():
        Thread.objects.filter(pk=thread_id).update(last_seq=F("last_seq") + 1)
        seq = Thread.objects.values_list("last_seq", flat=True).get(pk=thread_id)
        ThreadEvent.objects.create(
            thread_id=thread_id, seq=seq, kind="media", payload=payload, origin=ELSEWHERE
        )
    return seq


def test_reading_new_events_skips_this_processes_own_and_moves_the_mark(personas):
    thread = personas.thread
    start = Thread.objects.get(pk=thread.pk).last_seq
    with transaction.atomic():
        own = emit(thread_id=thread.pk, kind="message", payload={"mine": True})
    foreign = store_elsewhere(thread.pk, {"id": 1})

    found = event_tail.read_new_events({thread.pk: start}, origin=process_origin())
    assert found.marks == {thread.pk: foreign}
    assert [e["seq"] for e in found.events[thread.pk]] == [foreign]
    assert own.origin == process_origin() != ELSEWHERE

    # Nothing new past the mark: nothing read; a thread that did not move is not read.
    again = event_tail.read_new_events({thread.pk: foreign}, origin=process_origin())
    assert again.marks == {} and again.events == {}
    # In batches: the mark moves to the last row read, the next poll reads on.
    second = store_elsewhere(thread.pk, {"id": 2})
    first_batch = event_tail.read_new_events({thread.pk: start}, origin="x", batch=1)
    assert first_batch.marks == {thread.pk: own.seq}
    rest = event_tail.read_new_events({thread.pk: foreign}, origin="x")
    assert [e["seq"] for e in rest.events[thread.pk]] == [second]


async def test_an_event_another_process_stored_reaches_a_connected_socket(personas, ws_connect):
    if not layer_is_process_local():
        pytest.skip("with Redis every process broadcasts itself (test_worker_events.py)")
    thread = personas.thread
    communicator, connected, _ = await ws_connect(personas.owner, thread.pk)
    assert connected
    hello = await communicator.receive_json_from(timeout=5)

    foreign = await database_sync_to_async(store_elsewhere)(thread.pk, {"id": 1})
    frame = await communicator.receive_json_from(timeout=5)
    assert frame == {
        "type": "event",
        "seq": hello["lastSeq"] + 1,
        "kind": "media",
        "data": {"id": 1},
    }
    assert foreign == frame["seq"]

    # This process's own event is broadcast once (on commit), never again by the tail:
    # the frames are exactly own, then the next foreign one.
    def emit_here() -> int:
        with transaction.atomic():
            return emit(thread_id=thread.pk, kind="message.delta", payload={"id": 0}).seq

    own = await database_sync_to_async(emit_here)()
    after = await database_sync_to_async(store_elsewhere)(thread.pk, {"id": 2})
    frames = [await communicator.receive_json_from(timeout=5) for _ in range(2)]
    assert [f["seq"] for f in frames] == [own, after]
    await communicator.disconnect()


async def test_the_loopback_relay_is_gone(personas):
    client = AsyncClient()
    assert (await client.post("/media/relay/", {"token": "x"})).status_code == 404


def test_a_poll_loads_only_other_processes_events(personas, monkeypatch):
    """In a busy thread this process stores most events: a poll reads the others' rows
    only (their payloads are tool results), and its mark still moves past its own."""
    thread = personas.thread
    start = Thread.objects.get(pk=thread.pk).last_seq
    foreign = store_elsewhere(thread.pk, {"id": 1})
    with transaction.atomic():
        for n in range(5):
            own = emit(thread_id=thread.pk, kind="message", payload={"mine": n})
    loaded: list[int] = []
    from_db = ThreadEvent.from_db

    def counting(db, field_names, values):
        row = from_db(db, field_names, values)
        loaded.append(row.seq)
        return row

    monkeypatch.setattr(ThreadEvent, "from_db", counting)
    found = event_tail.read_new_events({thread.pk: start}, origin=process_origin())
    assert loaded == [foreign]
    assert found.marks == {thread.pk: own.seq}
    assert [e["seq"] for e in found.events[thread.pk]] == [foreign]
