"""Issue 13's dynamic checks against real web processes (run under the heavy lock):

- a 5 MB request is answered with an error and the socket stays (finding 4);
- a single 500 MB text frame is cut off from its header, before it is buffered: the web server's
  resident memory grows by less than 20 MB;
- 20 concurrent ``ui/message`` on two sockets (two web processes, one view token) on
  PostgreSQL: at most the binding's limit is accepted (production profile only).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import socket
import struct
import time

import pytest

from tests.live import LiveAtrium, RssGrowth
from tests.resilience.support import (
    BOARD,
    PRODUCTION,
    PrivateRedis,
    db_rows,
    drop_live_database,
    seed_live,
    stdio,
)

pytestmark = [pytest.mark.slow]


@pytest.fixture
def live(tmp_path):
    server = LiveAtrium(var_dir=tmp_path / "var").setup()
    seeded = seed_live(server, {})
    server.start()
    try:
        yield server, seeded
    finally:
        server.stop()
        drop_live_database(server)


def test_a_5_mb_request_is_answered_and_the_socket_stays(live):
    from bench.harness import connect

    server, seeded = live

    async def scenario() -> None:
        sock = await connect(server, seeded["cookies"]["olivia"], seeded["thread"])
        big = {"type": "view.request", "token": "t", "method": "ui/update-model-context",
               "params": {"content": [{"type": "text", "text": "x" * (5 * 1024 * 1024)}]}}  # fmt: skip
        # Refused before it is parsed: the reply has no rid (the client learns of it by the
        # absence of one; static/chat/socket.js refuses such requests before sending, with their rid).
        answered = asyncio.get_running_loop().create_future()
        sock.replies[None] = answered
        await sock.ws.send(json.dumps(big))
        reply = await asyncio.wait_for(answered, 60)
        assert reply["ok"] is False and reply["error"]["code"] == "message_too_large"
        pong = await sock.request({"type": "ping"})
        assert pong["type"] == "pong"
        assert not sock.closed.is_set()
        await sock.close()

    asyncio.run(scenario())


def _handshake(server: LiveAtrium, cookie: str, thread_id: int) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    key = base64.b64encode(os.urandom(16)).decode()
    conn.sendall(
        (
            f"GET /ws/threads/{thread_id}/ HTTP/1.1\r\nHost: localhost:{server.port}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Origin: {server.app_origin}\r\nCookie: sessionid={cookie}\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = conn.recv(4096)
        assert chunk, "handshake refused"
        head += chunk
    assert head.startswith(b"HTTP/1.1 101"), head[:200]
    return conn


def test_a_500_mb_frame_is_refused_from_its_header_without_buffering(live):
    server, seeded = live
    conn = _handshake(server, seeded["cookies"]["olivia"], seeded["thread"])
    length = 500 * 1024 * 1024
    piece = b"x" * (1024 * 1024)
    sent = 0
    closed = False
    conn.settimeout(0.5)
    # Peak resident memory (VmHWM), so a buffer that grew and was freed again still counts.
    with RssGrowth([server.processes[0].pid]) as web:
        # FIN + text opcode, masked, 64-bit length; the payload follows in 1 MiB pieces.
        conn.sendall(struct.pack("!BBQ", 0x81, 0x80 | 127, length) + b"\x00\x00\x00\x00")
        while sent < 64 * 1024 * 1024:  # the server must give up long before 64 MB
            try:
                conn.sendall(piece)
                sent += len(piece)
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            try:
                if conn.recv(65536) == b"":
                    closed = True
                    break
            except TimeoutError:
                pass
            except ConnectionResetError:
                closed = True
                break
    assert closed, f"the web server kept reading ({sent // 2**20} MiB sent)"
    assert web.most_mib() < 20, f"the web server grew {web.most_mib():.1f} MiB"
    conn.close()

    async def still_serving() -> None:
        from bench.harness import connect

        sock = await connect(server, seeded["cookies"]["olivia"], seeded["thread"])
        assert (await sock.request({"type": "ping"}))["type"] == "pong"
        await sock.close()

    asyncio.run(still_serving())


# ---- the ui/message limit under a concurrent flood on PostgreSQL ----------------------------


def _second_process(first: LiveAtrium, var_dir) -> LiveAtrium:
    from tests.live import free_port

    second = LiveAtrium(var_dir=var_dir, port=free_port())
    var_dir.mkdir(parents=True, exist_ok=True)
    second.env = {
        **first.env,
        "ATRIUM_VAR_DIR": str(var_dir),
        "ATRIUM_APP_ORIGIN": second.app_origin,
        "ATRIUM_SANDBOX_ORIGIN": second.sandbox_origin,
    }
    return second


@pytest.mark.skipif(not PRODUCTION, reason="needs PostgreSQL and Redis (production profile)")
def test_concurrent_ui_messages_of_one_view_never_exceed_the_limit(tmp_path):
    redis = PrivateRedis(tmp_path / "redis").start()
    shared = {
        "SECRET_KEY": secrets.token_urlsafe(40),
        "REDIS_URL": f"{redis.url}/0",
        "CELERY_BROKER_URL": f"{redis.url}/1",
        "ATRIUM_ASGI_PROCESSES": "2",
        "LOG_LEVEL": "WARNING",
    }
    a = LiveAtrium(var_dir=tmp_path / "a", extra_env=shared).setup()
    b = _second_process(a, tmp_path / "b")
    try:
        seeded = seed_live(
            a, {"board": stdio(BOARD, BOARD_STATE_FILE=str(tmp_path / "board.json"))}
        )
        a.start()
        b.start()
        accepted = asyncio.run(_flood(a, b, seeded))
        limit = db_rows(a, "SELECT ui_message_rate_limit FROM bindings_appbinding")[0][0]
        stored = db_rows(a, "SELECT count(*) FROM chat_message WHERE via_tool_call_id IS NOT NULL")
        assert 0 < accepted <= limit, (accepted, limit)
        assert stored[0][0] == accepted
    finally:
        b.stop()
        a.stop()
        redis.stop()
        drop_live_database(a)


async def _flood(a: LiveAtrium, b: LiveAtrium, seeded: dict) -> int:
    from bench.harness import connect, open_view

    cookie, thread = seeded["cookies"]["olivia"], seeded["thread"]
    on_a = await connect(a, cookie, thread)
    on_b = await connect(b, cookie, thread)
    view = await open_view(on_a, "/call board.list_items", "list_items")
    message = {
        "type": "view.request",
        "token": view["token"],
        "method": "ui/message",
        "params": {"role": "user", "content": [{"type": "text", "text": "flood"}]},
    }
    started = time.perf_counter()
    replies = await asyncio.gather(
        *(sock.request(message, timeout=60) for _ in range(10) for sock in (on_a, on_b))
    )
    assert time.perf_counter() - started < 60
    refused = [r["error"]["code"] for r in replies if not r["ok"]]
    assert set(refused) <= {"rate_limited"}, json.dumps(replies)[:2000]
    await on_a.close()
    await on_b.close()
    return sum(1 for r in replies if r["ok"])
