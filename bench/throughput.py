"""`throughput` (issue 28): the saturation point of one web process for UI `tools/call`.

`clients` websocket clients (200 users over `threads` threads, as in `concurrency`), each
with its own token for its thread's board view. An open-loop load: calls are *scheduled*
at a fixed rate (one every 1/rate seconds, each to the next client that has no call in
flight) for `step_s` seconds, and each call's latency is counted from its scheduled time,
so a server that falls behind shows it (no coordinated omission: a call that could not
even be sent because every client was busy waits in the schedule and counts its wait).
The rate rises step by step (x`factor`) until the p99 of a step passes `P99_LIMIT_MS`
or a call fails. The saturation point is the highest rate whose step kept p99 under it;
the web process's CPU per call and the client-side achieved rate are recorded per step.
Afterwards every client must hold every event of its thread (0 lost, no gap).
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

from . import concurrency
from .harness import BenchAtrium, Seeded, summary

P99_LIMIT_MS = 100.0


async def run(
    server: BenchAtrium,
    seeded: Seeded,
    *,
    clients: int,
    start_rate: float,
    factor: float,
    step_s: float,
    max_rate: float,
) -> dict[str, Any]:
    sockets, tokens = await concurrency.open_clients(server, seeded, clients=clients)
    messages = [concurrency.call_message(token) for token in tokens]
    idle: collections.deque[int] = collections.deque(range(clients))
    freed = asyncio.Event()
    steps: list[dict[str, Any]] = []
    errors: list[str] = []
    saturation = 0.0

    async def one(index: int, due: float, latencies: list[float]) -> None:
        try:
            reply = await sockets[index][1].request(messages[index], timeout=120)
            if reply.get("ok"):
                latencies.append((time.perf_counter() - due) * 1000)
            else:
                errors.append(str(reply.get("error"))[:200])
        except Exception as exc:  # noqa: BLE001 — counted and reported
            errors.append(repr(exc)[:200])
        finally:
            idle.append(index)
            freed.set()

    rate = start_rate
    while rate <= max_rate:
        latencies: list[float] = []
        failed_before = len(errors)
        calls = max(1, round(rate * step_s))
        interval = 1.0 / rate
        tasks = []
        cpu_before = server.cpu_seconds()
        started = time.perf_counter()
        for n in range(calls):
            due = started + n * interval
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            while not idle:  # every client busy: the call waits (its clock already runs)
                freed.clear()
                await freed.wait()
            tasks.append(asyncio.ensure_future(one(idle.popleft(), due, latencies)))
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - started
        cpu_ms = (server.cpu_seconds() - cpu_before) * 1000 / calls
        step = {
            "rate": round(rate, 1),
            "calls": calls,
            "achieved_per_s": calls / elapsed,
            "errors": len(errors) - failed_before,
            "web_cpu_ms_per_call": cpu_ms,
            "web_cpu_share": (server.cpu_seconds() - cpu_before) / elapsed,
            "latency_ms": summary(latencies) if latencies else None,
        }
        steps.append(step)
        p99 = step["latency_ms"]["p99"] if latencies else float("inf")
        if step["errors"] or p99 > P99_LIMIT_MS:
            break
        saturation = rate
        rate *= factor
    checked = await concurrency.check_events(server, seeded, sockets)
    return {
        "clients": clients,
        "threads": len(seeded.threads),
        "p99_limit_ms": P99_LIMIT_MS,
        "saturation_calls_per_s": round(saturation, 1),
        "steps": steps,
        "errors": len(errors),
        "error_samples": errors[:5],
        **checked,
    }
