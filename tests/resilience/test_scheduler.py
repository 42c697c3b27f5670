"""The scheduler (issue 15): Celery beat and a worker, real processes, expire an approval
on time while nobody touches its thread — members see the call end."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.live import LiveAtrium
from tests.waiting import socket_event

from .support import BOARD, db_rows, drop_live_database, seed_live, stdio

pytestmark = pytest.mark.slow

APPROVAL_TTL = 3  # seconds


def test_beat_expires_an_approval_nobody_touches(tmp_path):
    server = LiveAtrium(
        var_dir=tmp_path / "atrium",
        extra_env={
            "ATRIUM_APPROVAL_TTL": str(APPROVAL_TTL),
            "ATRIUM_SWEEP_INTERVAL": "1",
            "LOG_LEVEL": "WARNING",
        },
    ).setup()
    try:
        seeded = seed_live(
            server, {"board": stdio(BOARD, BOARD_STATE_FILE=str(tmp_path / "board.json"))}
        )
        server.start(worker=True)
        server.start_beat()
        asyncio.run(_scenario(server, seeded))
    finally:
        server.stop()
        drop_live_database(server)


def _delete_item_is(frame: dict, status: str) -> bool:
    data = frame.get("data") or {}
    return (
        frame["kind"] == "toolcall"
        and data.get("tool") == "delete_item"
        and data.get("status") == status
    )


async def _scenario(server: LiveAtrium, seeded: dict) -> None:
    from bench.harness import connect, open_view

    thread = seeded["thread"]
    owner = await connect(server, seeded["cookies"]["olivia"], thread)
    member = await connect(server, seeded["cookies"]["marco"], thread)

    def call_with(status: str):
        for _, frame in member.events:
            data = frame.get("data") or {}
            if (
                frame["kind"] == "toolcall"
                and data.get("tool") == "delete_item"
                and data.get("status") == status
            ):
                return data
        return None

    # A person's own /call is consent (docs/consent.md): the approval comes from the
    # board's view calling a destructive tool. Its reply waits for the approval, so the
    # request runs in the background and is answered (refused) when the approval expires.
    view = await open_view(owner, "/call board.list_items", "list_items")
    asking = asyncio.ensure_future(
        owner.request(
            {
                "type": "view.request",
                "token": view["token"],
                "method": "tools/call",
                "params": {"name": "delete_item", "arguments": {"id": "ATR-101"}},
            },
            timeout=120,
        )
    )
    await socket_event(member, lambda f: _delete_item_is(f, "awaiting_approval"), timeout=60)
    asked_at = time.monotonic()  # nobody in the thread acts from now on

    # The member, only listening, sees the call end when the approval expires.
    await socket_event(member, lambda f: _delete_item_is(f, "rejected"), timeout=60)
    waited = time.monotonic() - asked_at
    ended = call_with("rejected")
    assert ended["error"]["code"] == "approval_expired", ended
    # On time: after the TTL, within a few sweep intervals (a busy machine is slow).
    assert waited < APPROVAL_TTL + 30, waited
    ((status,),) = db_rows(server, "select status from bindings_approvalrequest")
    assert status == "expired"
    ((expired_audits,),) = db_rows(
        server, "select count(*) from bindings_auditevent where event_type = 503"
    )
    assert expired_audits == 1
    refused = await asking
    assert refused["ok"] is False, refused
    await owner.close()
    await member.close()
