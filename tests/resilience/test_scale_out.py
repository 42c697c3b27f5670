"""Two web processes sharing PostgreSQL and Redis (DESIGN §1: N web processes behind a load
balancer, no sticky sessions): what one process does, members on the other see and act on."""

from __future__ import annotations

import asyncio
import secrets

import pytest

from tests.live import LiveAtrium, free_port
from tests.waiting import socket_event

from .support import (
    BOARD,
    PRODUCTION,
    PrivateRedis,
    drop_live_database,
    seed_live,
    stdio,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not PRODUCTION,
        reason="needs the production profile (PostgreSQL + Redis): set DATABASE_URL/REDIS_URL",
    ),
]


def _second_process(first: LiveAtrium, var_dir) -> LiveAtrium:
    """Another web process on its own port, same database, Redis and secret key."""
    second = LiveAtrium(var_dir=var_dir, port=free_port())
    var_dir.mkdir(parents=True, exist_ok=True)
    second.env = {
        **first.env,
        "ATRIUM_VAR_DIR": str(var_dir),
        "ATRIUM_APP_ORIGIN": second.app_origin,
        "ATRIUM_SANDBOX_ORIGIN": second.sandbox_origin,
    }
    return second


def test_members_on_one_process_see_and_approve_what_the_other_process_runs(tmp_path):
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
        asyncio.run(_scenario(a, b, seeded))
    finally:
        b.stop()
        a.stop()
        redis.stop()
        drop_live_database(a)


async def _scenario(a: LiveAtrium, b: LiveAtrium, seeded: dict) -> None:
    from bench.harness import connect, open_view

    thread = seeded["thread"]
    member_on_a = await connect(a, seeded["cookies"]["marco"], thread)
    owner_on_b = await connect(b, seeded["cookies"]["olivia"], thread)

    # 1. A tool result produced through B reaches the member connected to A.
    view = await open_view(owner_on_b, "/call board.list_items", "list_items")
    await socket_event(
        member_on_a,
        lambda f: (
            f["kind"] == "toolcall"
            and f["data"]["tool"] == "list_items"
            and f["data"]["status"] == "success"
        ),
    )

    # 2. A view on B asks for a write (needs approval); the member on A approves; the call
    # runs and B's waiting view request gets its result.
    pending = asyncio.ensure_future(
        owner_on_b.request(
            {
                "type": "view.request",
                "token": view["token"],
                "method": "tools/call",
                "params": {"name": "add_item", "arguments": {"title": "Approved across processes"}},
            },
            timeout=60,
        )
    )

    def awaiting(frame: dict) -> bool:
        data = frame.get("data") or {}
        return (
            frame["kind"] == "toolcall"
            and data.get("tool") == "add_item"
            and data.get("status") == "awaiting_approval"
            and bool(data.get("approval"))
        )

    call = (await socket_event(member_on_a, awaiting))["data"]
    assert not pending.done()
    decided = await member_on_a.request(
        {"type": "approval.decide", "approvalId": call["approval"]["id"], "decision": "approve"}
    )
    assert decided["ok"], decided
    reply = await pending
    assert reply["ok"], reply
    titles = [
        item["title"]
        for column in reply["result"]["structuredContent"]["columns"]
        for item in column["items"]
    ]
    assert "Approved across processes" in titles
    # Both sides saw the call finish.
    for sock in (member_on_a, owner_on_b):
        await socket_event(
            sock,
            lambda f: (
                f["kind"] == "toolcall"
                and f["data"]["id"] == call["id"]
                and f["data"]["status"] == "success"
            ),
        )
    await member_on_a.close()
    await owner_on_b.close()
