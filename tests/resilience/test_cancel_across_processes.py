"""A member stops a tool call that runs in another web process (DESIGN §1: N web processes
behind a load balancer, no sticky sessions): the process running the call stops it, so
the MCP server is told (``notifications/cancelled``), and every member sees it end."""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path

import pytest

from tests.live import LiveAtrium
from tests.waiting import poll, socket_event

from .support import PRODUCTION, ROOT_DIR, PrivateRedis, drop_live_database, seed_live, stdio
from .test_scale_out import _second_process

LIFECYCLE = ROOT_DIR / "examples" / "lifecycle" / "server.py"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not PRODUCTION,
        reason="needs the production profile (PostgreSQL + Redis): set DATABASE_URL/REDIS_URL",
    ),
]


def test_a_stop_on_one_process_cancels_the_call_running_on_the_other(tmp_path):
    redis = PrivateRedis(tmp_path / "redis").start()
    shared = {
        "SECRET_KEY": secrets.token_urlsafe(40),
        "REDIS_URL": f"{redis.url}/0",
        "CELERY_BROKER_URL": f"{redis.url}/1",
        "LOG_LEVEL": "WARNING",
    }
    record = tmp_path / "cancelled.jsonl"
    a = LiveAtrium(var_dir=tmp_path / "a", extra_env=shared).setup()
    b = _second_process(a, tmp_path / "b")
    try:
        seeded = seed_live(a, {"lifecycle": stdio(LIFECYCLE, LIFECYCLE_RECORD=str(record))})
        a.start()
        b.start()
        asyncio.run(_scenario(a, b, seeded, record))
    finally:
        b.stop()
        a.stop()
        redis.stop()
        drop_live_database(a)


def _call_event(status: str, call_id: int | None = None):
    def match(frame: dict) -> bool:
        data = frame.get("data") or {}
        return (
            frame.get("kind") == "toolcall"
            and data.get("tool") == "slow_task"
            and data.get("status") == status
            and (call_id is None or data.get("id") == call_id)
        )

    return match


async def _scenario(a: LiveAtrium, b: LiveAtrium, seeded: dict, record: Path) -> None:
    from bench.harness import connect

    thread = seeded["thread"]
    member_on_a = await connect(a, seeded["cookies"]["marco"], thread)
    owner_on_b = await connect(b, seeded["cookies"]["olivia"], thread)

    # The member's call runs in A (the process that received it)...
    posted = await member_on_a.request(
        {
            "type": "message.post",
            "text": '/call lifecycle.slow_task {"label": "across", "seconds": 120}',
        }
    )
    assert posted["ok"], posted
    call = (await socket_event(owner_on_b, _call_event("running")))["data"]
    # ...until it reports progress: the server is working on it.
    await socket_event(
        member_on_a,
        lambda f: (
            f.get("kind") == "toolcall.progress" and (f.get("data") or {}).get("id") == call["id"]
        ),
        timeout=30,
    )

    # The owner, connected to B, stops it.
    stopped = await owner_on_b.request({"type": "tool.cancel", "toolCallId": call["id"]})
    assert stopped["ok"], stopped
    for sock in (member_on_a, owner_on_b):
        ended = await socket_event(sock, _call_event("cancelled", call["id"]))
        assert ended["data"]["error"]["code"] == "cancelled", ended

    # A stopped its task, so the server heard of it.
    def recorded() -> list[dict]:
        if not record.exists():
            return []
        return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]

    lines = poll(
        recorded,
        timeout=30,
        interval=0.1,
        reason="the MCP server writes each notifications/cancelled it receives to a file",
    )
    assert [line["label"] for line in lines] == ["across"], lines
    await member_on_a.close()
    await owner_on_b.close()
