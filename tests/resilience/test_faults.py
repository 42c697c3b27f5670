"""Faults through the real websocket path (DESIGN §6, §8.9): a server that dies, hangs or
floods; a Celery worker, Redis or web server that goes away. Nothing is lost, the socket stays
responsive, and the next call works."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
from channels.db import database_sync_to_async

from tests.conftest import next_frame, toolcall_event
from tests.live import LiveAtrium
from tests.waiting import poll, socket_event

from .support import (
    MEDIA,
    PRODUCTION,
    PrivateRedis,
    db_rows,
    drop_live_database,
    faulty_server,
    ping_latency,
    post_from_another_process,
    reconnect,
    seed_live,
    stdio,
)

pytestmark = pytest.mark.slow


@pytest.fixture
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


async def _socket(ws_connect, user, thread):
    communicator, ok, _ = await ws_connect(user, thread.pk)
    assert ok
    await next_frame(communicator, lambda f: f.get("type") == "hello")
    return communicator


async def _call(communicator, tool: str, arguments: dict, rid: str) -> int:
    await communicator.send_json_to(
        {"type": "tool.call", "server": "faulty", "tool": tool, "arguments": arguments, "rid": rid}
    )
    reply = await next_frame(communicator, lambda f: f.get("type") == "reply" and f["rid"] == rid)
    assert reply["ok"], reply
    return reply["result"]["toolCallId"]


def _final(call_id: int):
    def match(frame) -> bool:
        return (
            frame.get("type") == "event"
            and frame.get("kind") == "toolcall"
            and frame["data"]["id"] == call_id
            and frame["data"]["status"] in ("success", "error", "cancelled", "rejected")
        )

    return match


# ------------------------------------------------------------------ MCP server faults


@pytest.mark.django_db(transaction=True)
async def test_server_killed_mid_call_ends_in_a_clear_error_and_the_next_call_works(
    personas, ws_connect, close_connections
):
    await database_sync_to_async(faulty_server)(personas.workspace, tools=("crash", "echo"))
    sock = await _socket(ws_connect, personas.owner, personas.thread)
    call_id = await _call(sock, "crash", {"delay": 0.3}, "crash")
    final = await next_frame(sock, _final(call_id), limit=200, timeout=30)
    data = final["data"]
    assert data["status"] == "error"
    assert data["error"]["code"] == "server_crashed"
    message = data["error"]["message"].lower()
    assert "faulty" in message and "stopped" in message, message

    echo_id = await _call(sock, "echo", {"text": "still here"}, "echo")
    done = await next_frame(sock, _final(echo_id), limit=200, timeout=30)
    assert done["data"]["status"] == "success"
    assert "still here" in str(done["data"]["result"])
    await sock.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_a_server_that_never_answers_times_out_while_the_socket_stays_responsive(
    personas, ws_connect, close_connections
):
    await database_sync_to_async(faulty_server)(
        personas.workspace, call_timeout=3.0, tools=("hang", "echo")
    )
    sock = await _socket(ws_connect, personas.owner, personas.thread)
    started = time.monotonic()
    call_id = await _call(sock, "hang", {"tag": "t"}, "hang")
    await next_frame(sock, toolcall_event("running", "hang"))
    pongs = []
    for n in range(5):  # while the call hangs
        pongs.append(await ping_latency(sock, rid=f"p{n}"))
    assert time.monotonic() - started < 3.0, "pings must have run during the hung call"
    assert max(pongs) < 1.0, pongs
    final = await next_frame(sock, _final(call_id), limit=200, timeout=30)
    assert final["data"]["status"] == "error"
    assert final["data"]["error"]["code"] == "tool_timeout"
    assert final["data"]["error"]["message"]

    echo_id = await _call(sock, "echo", {"text": "after the timeout"}, "echo")
    done = await next_frame(sock, _final(echo_id), limit=200, timeout=30)
    assert done["data"]["status"] == "success"
    await sock.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_a_progress_flood_is_thinned_and_never_blocks_the_socket(
    personas, ws_connect, close_connections
):
    from chat.calls.run import PROGRESS_INTERVAL
    from chat.models import ThreadEvent

    await database_sync_to_async(faulty_server)(personas.workspace, tools=("flood_progress",))
    sock = await _socket(ws_connect, personas.owner, personas.thread)
    count = 4000
    started = time.monotonic()
    call_id = await _call(sock, "flood_progress", {"count": count}, "flood")
    latencies = []
    final = None
    while final is None:
        latencies.append(await ping_latency(sock, rid=f"p{len(latencies)}", timeout=10))
        frames = []
        # (receive_json_from's timeout would cancel the application: drain what is queued)
        while not await sock.receive_nothing(timeout=0.05):
            frames.append(await sock.receive_json_from())
        final = next((f for f in frames if _final(call_id)(f)), None)
        assert time.monotonic() - started < 90
    elapsed = time.monotonic() - started
    assert final["data"]["status"] == "success"
    assert f"flooded {count}" in str(final["data"]["result"])
    assert max(latencies) < 2.0, latencies

    stored = await database_sync_to_async(
        lambda: [
            e.payload
            for e in ThreadEvent.objects.filter(thread=personas.thread, kind="toolcall.progress")
            if e.payload.get("id") == call_id
        ]
    )()
    assert 1 <= len(stored) <= elapsed / PROGRESS_INTERVAL + 3, (len(stored), elapsed)
    assert len(stored) < count / 10
    # The last progress (progress == total) is always kept.
    assert stored[-1]["progress"] == stored[-1]["total"] == count
    await sock.disconnect()


# ------------------------------------------------------------- processes going away


@pytest.fixture
def own_redis(tmp_path):
    """Production profile: a Redis of the test's own (layer + broker), so no other live
    server on this machine shares its groups or steals its Celery tasks."""
    if not PRODUCTION:
        yield {}
        return
    redis = PrivateRedis(tmp_path / "redis").start()
    yield {"REDIS_URL": f"{redis.url}/0", "CELERY_BROKER_URL": f"{redis.url}/1"}
    redis.stop()


def _live(tmp_path, name: str, **extra: str) -> LiveAtrium:
    return LiveAtrium(var_dir=tmp_path / name, extra_env={"LOG_LEVEL": "WARNING", **extra})


async def _events_until(sock, seq: int, timeout: float = 20.0) -> None:
    await socket_event(sock, lambda f: f["seq"] >= seq, timeout=timeout)


def _seqs(sock) -> list[int]:
    return [f["seq"] for _, f in sock.events]


def test_a_worker_killed_mid_task_is_retried_and_the_asset_becomes_ready(tmp_path, own_redis):
    """SIGKILL the Celery worker while it persists a media asset; a new worker finishes it."""
    server = _live(tmp_path, "worker", **own_redis).setup()
    try:
        seeded = seed_live(server, {"media": stdio(MEDIA)})
        server.start()  # no worker yet: staged media waits in the broker
        asyncio.run(_media_call(server, seeded))
        staged = db_rows(server, "SELECT id, status FROM chat_mediaasset")
        assert staged and all(status == "staged" for _, status in staged), staged
        asset_id = staged[0][0]

        worker = server.start_worker()

        def started() -> tuple[int, str] | None:
            ((attempts, status),) = db_rows(
                server, f"SELECT attempts, status FROM chat_mediaasset WHERE id = {asset_id}"
            )
            return (attempts, status) if attempts >= 1 or status != "staged" else None

        # Polled fast: the worker process reports its attempt only in the database, and
        # the test must catch it mid-task.
        _, status = poll(started, timeout=60, interval=0.02, reason="the worker's first attempt")
        assert status == "staged", "the worker finished before it could be killed"
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
        ((status,),) = db_rows(server, f"SELECT status FROM chat_mediaasset WHERE id = {asset_id}")
        assert status == "staged"  # killed mid-task: nothing half-done was committed

        server.start_worker()  # re-enqueues what the dead worker held

        def settled() -> tuple[str, int, str] | None:
            ((status, attempts, path),) = db_rows(
                server,
                f"SELECT status, attempts, storage_path FROM chat_mediaasset WHERE id = {asset_id}",
            )
            return (status, attempts, path) if status != "staged" else None

        # Polled: the new worker's commit is visible to the test only in the database.
        status, attempts, path = poll(
            settled, timeout=90, interval=0.2, reason="the asset leaves staging"
        )
        assert status == "ready", status
        assert attempts >= 1 and path
    finally:
        server.stop()
        drop_live_database(server)


async def _media_call(server: LiveAtrium, seeded: dict) -> None:
    from bench.harness import connect

    sock = await connect(server, seeded["cookies"]["olivia"], seeded["thread"])
    reply = await sock.request(
        {
            "type": "tool.call",
            "server": "media",
            "tool": "get_large",
            "arguments": {"megabytes": 24, "kind": "video"},
        },
        timeout=60,
    )
    assert reply["ok"], reply
    call_id = reply["result"]["toolCallId"]
    await socket_event(
        sock,
        lambda f: (
            f.get("kind") == "toolcall"
            and f["data"]["id"] == call_id
            and f["data"]["status"] == "success"
        ),
        timeout=90,
    )
    await sock.close()


@pytest.mark.skipif(
    not PRODUCTION, reason="the embedded profile has no Redis (set DATABASE_URL/REDIS_URL)"
)
def test_redis_restarted_under_connected_clients_loses_nothing(tmp_path):
    redis = PrivateRedis(tmp_path / "redis").start()
    server = _live(
        tmp_path, "redis", REDIS_URL=f"{redis.url}/0", CELERY_BROKER_URL=f"{redis.url}/1"
    ).setup()
    try:
        seeded = seed_live(server, {})
        server.start()
        asyncio.run(_redis_restart(server, seeded, redis))
    finally:
        server.stop()
        redis.stop()
        drop_live_database(server)


async def _redis_restart(server: LiveAtrium, seeded: dict, redis: PrivateRedis) -> None:
    from bench.harness import connect

    thread = seeded["thread"]
    clients = [await connect(server, seeded["cookies"][u], thread) for u in ("olivia", "marco")]
    reply = await clients[0].request({"type": "message.post", "text": "before the restart"})
    assert reply["ok"], reply
    for sock in clients:
        await _events_until(sock, 1)
    last = [max(_seqs(sock)) for sock in clients]

    redis.stop()
    # Written while the channel layer is down: stored, not broadcast.
    post_from_another_process(server, thread, ["during the outage 1", "during the outage 2"])
    redis.start()  # the same port, empty (no persistence): groups and queues are gone

    ((last_seq,),) = db_rows(server, f"SELECT last_seq FROM chat_thread WHERE id = {thread}")
    assert last_seq >= last[0] + 2
    for sock in clients:
        await sock.close()
    # Clients reconnect with after=<their last seq> and get exactly what they missed.
    for username, seen in zip(("olivia", "marco"), last, strict=True):
        sock = await reconnect(server, seeded["cookies"][username], thread, after=seen)
        await _events_until(sock, last_seq)
        assert _seqs(sock) == list(range(seen + 1, last_seq + 1))
        texts = [f["data"].get("text") for _, f in sock.events if f["kind"] == "message"]
        assert "during the outage 1" in texts and "during the outage 2" in texts
        clients[("olivia", "marco").index(username)] = sock
    # And the live path works again: a new message reaches both.
    reply = await clients[1].request({"type": "message.post", "text": "after the restart"})
    assert reply["ok"], reply
    for sock in clients:
        await _events_until(sock, last_seq + 1)
        await sock.close()


def test_web_server_restarted_clients_replay_exactly_what_they_missed(tmp_path, own_redis):
    server = _live(tmp_path, "web", **own_redis).setup()
    try:
        seeded = seed_live(server, {})
        server.start()
        thread = seeded["thread"]
        last = asyncio.run(_connect_post_and_leave(server, seeded))
        server.stop()
        # Events created while no web process runs (another process, e.g. the text channel).
        post_from_another_process(server, thread, ["missed 1", "missed 2", "missed 3"])
        server.start()
        asyncio.run(_reconnect_and_check(server, seeded, last))
    finally:
        server.stop()
        drop_live_database(server)


async def _connect_post_and_leave(server: LiveAtrium, seeded: dict) -> dict[str, int]:
    from bench.harness import connect

    clients = {
        u: await connect(server, seeded["cookies"][u], seeded["thread"])
        for u in ("olivia", "marco")
    }
    reply = await clients["olivia"].request({"type": "message.post", "text": "hello"})
    assert reply["ok"], reply
    for sock in clients.values():
        await _events_until(sock, 1)
    last = {u: max(_seqs(sock)) for u, sock in clients.items()}
    for sock in clients.values():
        await sock.close()
    return last


async def _reconnect_and_check(server: LiveAtrium, seeded: dict, last: dict[str, int]) -> None:
    from bench.harness import connect

    ((last_seq,),) = db_rows(
        server, f"SELECT last_seq FROM chat_thread WHERE id = {seeded['thread']}"
    )
    for username, seen in last.items():
        sock = await connect(server, seeded["cookies"][username], seeded["thread"], after=seen)
        await _events_until(sock, last_seq)
        # Nothing more may arrive: everything the server sent before the pong of a later
        # ping is in by then (one socket, frames in order).
        await sock.request({"type": "ping"})
        assert _seqs(sock) == list(range(seen + 1, last_seq + 1))
        texts = [f["data"]["text"] for _, f in sock.events if f["kind"] == "message"]
        assert texts[-3:] == ["missed 1", "missed 2", "missed 3"]
        await sock.close()
