"""Live delivery of events a Celery worker stores (issue 15: p99 < 250 ms, both profiles).

A member's socket stays open while the owner runs examples/media `get_large` (a 100 KiB
binary: above the inline limit, so the worker stores it and emits its `media` and
`toolcall` events). Clock, per worker event: the client's receive time minus the row's
`created_at` (set by the worker before its transaction commits, so commit time counts).
Worker events are told apart by `ThreadEvent.origin` (the worker's pid). Also checked: the
socket got every event of the thread exactly once, without reconnecting.

    python -m bench.run --profile embedded --only worker_events
    python -m bench worker_events            # both profiles, this benchmark only
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Any

from tests.resilience.support import db_rows

from .harness import BenchAtrium, Seeded, connect, summary

KIB = 1024


async def run(server: BenchAtrium, seeded: Seeded, *, worker_pid: int, calls: int = 60) -> dict:
    thread = seeded.threads[0]
    member = await connect(server, seeded.cookies[1], thread)
    owner = await connect(server, seeded.cookies[0], thread, keep_events=False)
    ready: dict[int, asyncio.Event] = {}

    def on_event(_: float, frame: dict[str, Any]) -> None:
        data = frame.get("data") or {}
        if frame.get("kind") == "media" and data.get("status") in ("ready", "rejected"):
            ready.setdefault(data.get("id"), asyncio.Event()).set()

    member.on_event = on_event
    errors = 0
    started = time.monotonic()
    for _ in range(calls):
        reply = await owner.request(
            {
                "type": "tool.call",
                "server": "media",
                "tool": "get_large",
                "arguments": {"megabytes": 100 * KIB / (1024 * KIB), "kind": "binary"},
            },
            timeout=120,
        )
        if not reply.get("ok"):
            errors += 1
            continue
        asset_id = await _asset_of(member, reply["result"]["toolCallId"])
        if asset_id is None:
            errors += 1
            continue
        await asyncio.wait_for(ready.setdefault(asset_id, asyncio.Event()).wait(), 120)
    elapsed = time.monotonic() - started
    ((last_seq,),) = db_rows(server, f"SELECT last_seq FROM chat_thread WHERE id = {thread}")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(f["seq"] == last_seq for _, f in member.events):
        await asyncio.sleep(0.05)
    rows = db_rows(
        server,
        f"SELECT seq, created_at, origin FROM chat_threadevent WHERE thread_id = {thread}",
    )
    received: dict[int, float] = {}
    duplicates = 0
    for now, frame in member.events:
        if frame["seq"] in received:
            duplicates += 1
        received.setdefault(frame["seq"], now)
    first = member.hello["lastSeq"] + 1
    missing = [seq for seq in range(first, last_seq + 1) if seq not in received]
    worker_prefix = f"{worker_pid}:"
    latencies = [
        (received[seq] - _epoch(created)) * 1000
        for seq, created, origin in rows
        if origin.startswith(worker_prefix) and seq in received
    ]
    await member.close()
    await owner.close()
    return {
        "calls": calls,
        "errors": errors,
        "seconds": round(elapsed, 1),
        "worker_events": len(latencies),
        "delivery_ms": summary(latencies),
        "missing_events": len(missing),
        "duplicate_frames": duplicates,
        "reconnects": 0,
    }


async def _asset_of(sock, call_id: int, timeout: float = 60) -> int | None:
    """The staged asset of the call's final event (the worker stores it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for _, frame in reversed(sock.events):
            data = frame.get("data") or {}
            if frame["kind"] == "toolcall" and data.get("id") == call_id:
                if data.get("status") in ("error", "rejected", "cancelled"):
                    return None
                for part in (data.get("result") or {}).get("parts", []):
                    asset = part.get("asset") if isinstance(part, dict) else None
                    if isinstance(asset, dict) and asset.get("id") is not None:
                        return int(asset["id"])
        await asyncio.sleep(0.02)
    return None


def _epoch(value: Any) -> float:
    """A stored `created_at` (PostgreSQL: aware datetime; SQLite: text in UTC)."""
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.timestamp()
