"""Events stored by other processes reach connected sockets live (issue 15, no relay):
a Celery worker persisting media, and a process like the text channel posting messages.
Real web server and worker processes, both profiles (embedded: the web process tails the stored events;
production: the worker and the other process broadcast through Redis themselves)."""

from __future__ import annotations

import asyncio
import secrets

import pytest

from tests.live import LiveAtrium

from .support import (
    MEDIA,
    PRODUCTION,
    PrivateRedis,
    db_rows,
    drop_live_database,
    post_from_another_process,
    seed_live,
    stdio,
)

pytestmark = pytest.mark.slow

SMALL_BINARY = 0.1  # MiB: above the inline limit, so the worker stores it


def test_a_worker_stored_event_reaches_a_connected_socket_without_reconnect(tmp_path):
    redis = PrivateRedis(tmp_path / "redis").start() if PRODUCTION else None
    extra = {"LOG_LEVEL": "WARNING", "SECRET_KEY": secrets.token_urlsafe(40)}
    if redis is not None:  # a Redis of our own: pub/sub channels span Redis databases
        extra |= {"REDIS_URL": f"{redis.url}/0", "CELERY_BROKER_URL": f"{redis.url}/1"}
    server = LiveAtrium(var_dir=tmp_path / "atrium", extra_env=extra).setup()
    try:
        seeded = seed_live(server, {"media": stdio(MEDIA)})
        server.start()
        worker = server.start_worker()
        asyncio.run(_scenario(server, seeded, worker.pid))
    finally:
        server.stop()
        if redis is not None:
            redis.stop()
        drop_live_database(server)


async def _scenario(server: LiveAtrium, seeded: dict, worker_pid: int) -> None:
    from bench.harness import connect

    thread = seeded["thread"]
    member = await connect(server, seeded["cookies"]["marco"], thread)
    owner = await connect(server, seeded["cookies"]["olivia"], thread)
    arrived: dict[str, asyncio.Event] = {"media": asyncio.Event(), "text": asyncio.Event()}

    def on_event(_: float, frame: dict) -> None:
        data = frame.get("data") or {}
        if frame["kind"] == "media" and data.get("status") == "ready":
            arrived["media"].set()
        if frame["kind"] == "message" and data.get("text") == "from the text channel":
            arrived["text"].set()

    member.on_event = on_event
    reply = await owner.request(
        {
            "type": "tool.call",
            "server": "media",
            "tool": "get_large",
            "arguments": {"megabytes": SMALL_BINARY, "kind": "binary"},
        },
        timeout=120,
    )
    assert reply["ok"], reply
    # The worker stores the media (the event's origin is its pid) and the member's socket,
    # open all along, receives it.
    await asyncio.wait_for(arrived["media"].wait(), 60)
    origins = db_rows(
        server,
        f"SELECT origin FROM chat_threadevent WHERE thread_id = {thread} AND kind = 'media'",
    )
    assert origins and all(o.startswith(f"{worker_pid}:") for (o,) in origins), origins

    # Another process (as `manage.py chat` does) stores a message: it arrives live too.
    await asyncio.to_thread(post_from_another_process, server, thread, ["from the text channel"])
    await asyncio.wait_for(arrived["text"].wait(), 30)

    ((last_seq,),) = db_rows(server, f"SELECT last_seq FROM chat_thread WHERE id = {thread}")
    assert not member.closed.is_set()  # never reconnected
    seqs = [frame["seq"] for _, frame in member.events]
    assert len(seqs) == len(set(seqs)), seqs  # no duplicate
    assert set(seqs) == set(range(member.hello["lastSeq"] + 1, last_seq + 1))  # no gap
    await member.close()
    await owner.close()
