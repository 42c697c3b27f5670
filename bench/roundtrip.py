"""UI `tools/call` round trip through the host vs a direct `mcp` client call (DESIGN §9).

Host path: a real websocket client → uvicorn → view token → bindings policy + audit →
ToolCall + thread events → the MCP server over stdio → result normalized, stored,
broadcast → `reply`. Floor: an `mcp` client calling the same tool of the same server code
over stdio. Host and direct calls alternate in batches so both see the same machine noise.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from .harness import (
    BOARD,
    PYTHON,
    BenchAtrium,
    Seeded,
    connect,
    database_per_call,
    open_view,
    per_call,
    summary,
)

TOOL = "refresh"  # board: read-only, app-only, no view of its own
BATCH = 50


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of a process's event-loop (main) thread and of all its other threads
    (Django's database thread, mostly): where the host's time per call goes."""
    tick = os.sysconf("SC_CLK_TCK")
    split = {"loop": 0.0, "other": 0.0}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended meanwhile
        seconds = (int(fields[11]) + int(fields[12])) / tick
        split["loop" if task.name == str(pid) else "other"] += seconds
    return split


async def run(
    server: BenchAtrium, seeded: Seeded, *, calls: int, state_file: str
) -> dict[str, Any]:
    sock = await connect(server, seeded.cookies[0], seeded.threads[0], keep_events=False)
    sock.keep_events = True
    view = await open_view(sock, "/call board.list_items", "list_items")
    sock.keep_events = False
    sock.events.clear()
    request = {
        "type": "view.request",
        "token": view["token"],
        "method": "tools/call",
        "params": {"name": TOOL, "arguments": {}},
    }
    params = StdioServerParameters(
        command=PYTHON, args=[str(BOARD)], env={"BOARD_STATE_FILE": state_file}
    )
    host: list[float] = []
    direct: list[float] = []
    errors = 0
    async with Client(params, cache=None) as client:

        async def host_batch(n: int, keep: bool) -> None:
            nonlocal errors
            for _ in range(n):
                started = time.perf_counter()
                reply = await sock.request(request)
                elapsed = (time.perf_counter() - started) * 1000
                if not reply.get("ok"):
                    errors += 1
                elif keep:
                    host.append(elapsed)

        async def direct_batch(n: int, keep: bool) -> None:
            for _ in range(n):
                started = time.perf_counter()
                await client.call_tool(TOOL, {})
                elapsed = (time.perf_counter() - started) * 1000
                if keep:
                    direct.append(elapsed)

        await host_batch(BATCH, keep=False)  # warm-up: connections, caches, JIT-free paths
        await direct_batch(BATCH, keep=False)
        cpu_before = server.cpu_seconds()
        threads_before = thread_cpu(server.web.pid)
        counted_before, db_before = server.counters(), server.database_stats()
        host_cpu_s = 0.0
        while len(host) < calls:
            started = server.cpu_seconds()
            await host_batch(min(BATCH, calls - len(host)), keep=True)
            host_cpu_s += server.cpu_seconds() - started  # the host's batches only
            await direct_batch(min(BATCH, calls - len(direct)), keep=True)
        host_cpu_ms = (server.cpu_seconds() - cpu_before) * 1000 / calls
        threads_after = thread_cpu(server.web.pid)
        counted = per_call(counted_before, server.counters(), calls)
        database = database_per_call(db_before, server.database_stats(), calls)
    await sock.close()
    h, d = summary(host), summary(direct)
    return {
        "calls": calls,
        "errors": errors,
        "host_cpu_ms_per_call": host_cpu_ms,
        # The same, counted only while the host's batches ran (the direct batches leave the
        # web process idle but for the event tail and timers).
        "host_cpu_ms_per_call_in_batches": host_cpu_s * 1000 / calls,
        # What one call does (bench.probe counters; PostgreSQL's side in production).
        "per_call": {**counted, **database},
        # Threads that ended during the run drop out of "other": a lower bound.
        "host_cpu_ms_per_call_by_thread": {
            key: (threads_after[key] - threads_before[key]) * 1000 / calls for key in threads_after
        },
        "host_ms": h,
        "direct_ms": d,
        "added_p50_ms": h["p50"] - d["p50"],
        "added_p99_ms": h["p99"] - d["p99"],
        "ratio_p50": h["p50"] / d["p50"],
        "ratio_p99": h["p99"] / d["p99"],
    }
