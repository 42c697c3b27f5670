"""`throughput` (issue 28): the saturation point of one web process for UI `tools/call`.

`clients` websocket clients (200 users over `threads` threads, as in `concurrency`), each
with its own token for its thread's board view. An open-loop load: calls are *scheduled*
on a timetable (call n of a step is due at start + n/rate, `time.monotonic`, one clock for
every process), each to the next client of its generator that has no call in flight, for
`step_s` seconds; a call's latency is counted from its due time, so a server that falls
behind shows it (no coordinated omission: a call that could not be sent because every
client was busy waits in the timetable and counts its wait).

The load generator must not be what it measures. The clients live in `processes` generator
processes (the calls of a step dealt round robin; each process's event loop only sends,
reads its replies and the 20 members' events of every call of its threads), every client
first makes one unmeasured call (its first call pays for the socket's first view request),
and each step records the generator's side separately: how late each call was *sent*
against its due time (`send_lag_ms`: the generator's own lateness when a client was idle),
the latency from the actual send (`service_ms`), and the generators' CPU (`generator_cpu_share`
of one core, beside the web process's `web_cpu_share` and the machine's `machine_busy`).

The rate rises step by step (x`factor`) until the p99 from the due time passes
`P99_LIMIT_MS` or a call fails. The saturation point is the highest rate whose step kept
p99 under it. Afterwards every client must hold every event of its thread (0 lost, no gap).
"""

from __future__ import annotations

import asyncio
import collections
import gc
import multiprocessing
import os
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from . import concurrency
from .harness import BenchAtrium, Seeded, summary

P99_LIMIT_MS = 100.0
LEAD_S = 0.3  # a step starts this long after it is handed to the generators
# BENCH_GENERATOR_GC=1: let the generators collect garbage during a step (to see its cost).
GENERATOR_GC = os.environ.get("BENCH_GENERATOR_GC") == "1"

# The generator's collections during a step (seconds each), by gc.callbacks.
pauses: list[float] = []
_gc_started = [0.0]


def _on_gc(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _gc_started[0] = time.perf_counter()
    else:
        pauses.append(time.perf_counter() - _gc_started[0])


@dataclass(frozen=True)
class Target:
    """What a generator process needs of the server (`harness.connect`)."""

    port: int
    app_origin: str


def _machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of every CPU since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = [float(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


# ---------------------------------------------------------------- a generator process


class Generator:
    """A share of the clients on one event loop; runs the steps it is handed."""

    def __init__(self, sockets: list[tuple[int, Any]], tokens: list[str]) -> None:
        self.sockets = sockets
        self.messages = [concurrency.call_message(token) for token in tokens]
        self.idle: collections.deque[int] = collections.deque(range(len(sockets)))
        self.freed = asyncio.Event()

    async def _one(self, index: int, due: float, records: list[tuple]) -> None:
        sent = time.monotonic()
        try:
            reply = await self.sockets[index][1].request(self.messages[index], timeout=120)
            error = "" if reply.get("ok") else str(reply.get("error"))[:200]
        except Exception as exc:  # noqa: BLE001 — counted and reported
            error = repr(exc)[:200]
        records.append((due, sent, time.monotonic(), error))
        self.idle.append(index)
        self.freed.set()

    async def step(self, start: float, interval: float, due_numbers: range) -> dict[str, Any]:
        """Send call n at `start + n * interval` for each n (this process's share). The
        generator's garbage collector runs before the step and waits for its end (unless
        BENCH_GENERATOR_GC=1): a collection over the events every client keeps stalls every
        send and receive of this process (measured: up to 7 ms a pause with 2 processes)."""
        records: list[tuple] = []
        tasks = []
        gc.collect()
        if not GENERATOR_GC:
            gc.disable()
        pauses.clear()
        cpu = time.process_time()
        for n in due_numbers:
            due = start + n * interval
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            while not self.idle:  # every client busy: the call waits (its clock already runs)
                self.freed.clear()
                await self.freed.wait()
            tasks.append(asyncio.ensure_future(self._one(self.idle.popleft(), due, records)))
        await asyncio.gather(*tasks)
        cpu = time.process_time() - cpu
        gc_ms = [x * 1000 for x in pauses]  # enable() collects at once: not the step's
        gc.enable()
        return {"records": records, "cpu_s": cpu, "gc_ms": [sum(gc_ms), max(gc_ms, default=0.0)]}


async def _serve(
    conn: Connection, target: Target, seeded: Seeded, views: dict, clients: int, indices: list[int]
) -> None:
    sockets, tokens = await concurrency.open_clients(
        target, seeded, clients=clients, views=views, indices=indices
    )
    generator = Generator(sockets, tokens)
    conn.send(("ready", len(sockets)))
    while True:
        command, *args = await asyncio.to_thread(conn.recv)
        if command == "step":
            conn.send(await generator.step(*args))
        elif command == "check":
            conn.send(await concurrency.check_events(target, seeded, sockets))
            return


def _generator_main(conn: Connection, *args: Any) -> None:
    gc.callbacks.append(_on_gc)
    try:
        asyncio.run(_serve(conn, *args))
    except BaseException as exc:
        conn.send(("failed", repr(exc)[:500]))
        raise


# ------------------------------------------------------------------------- the driver


class Generators:
    """`processes` generator processes, each holding clients k, k + P, k + 2P..."""

    def __init__(
        self, target: Target, seeded: Seeded, views: dict[int, int], clients: int, processes: int
    ) -> None:
        spawn = multiprocessing.get_context("spawn")
        self.pipes: list[Connection] = []
        self.procs: list[Any] = []
        for k in range(processes):
            parent, child = spawn.Pipe()
            indices = list(range(k, clients, processes))
            proc = spawn.Process(
                target=_generator_main,
                args=(child, target, seeded, views, clients, indices),
                daemon=True,
            )
            proc.start()
            self.pipes.append(parent)
            self.procs.append(proc)

    async def ask(self, messages: list[tuple]) -> list[Any]:
        for conn, message in zip(self.pipes, messages, strict=True):
            conn.send(message)
        return await self.answers()

    async def answers(self) -> list[Any]:
        answers = await asyncio.gather(*(asyncio.to_thread(c.recv) for c in self.pipes))
        for answer in answers:
            if isinstance(answer, tuple) and answer and answer[0] == "failed":
                raise RuntimeError(f"a load generator failed: {answer[1]}")
        return answers

    async def step(self, server: BenchAtrium, rate: float, calls: int) -> dict[str, Any]:
        """One step of the timetable, dealt round robin: process k sends calls k, k + P..."""
        count = len(self.pipes)
        interval = 1.0 / rate
        cpu_before = server.cpu_seconds()
        busy_before, total_before = _machine_busy()
        start = time.monotonic() + LEAD_S
        answers = await self.ask(
            [("step", start, interval, range(k, calls, count)) for k in range(count)]
        )
        records = [r for a in answers for r in a["records"]]
        ended = max((r[2] for r in records), default=start)
        elapsed = max(ended - start, 1e-9)
        web_cpu = server.cpu_seconds() - cpu_before
        busy, total = _machine_busy()
        ok = [r for r in records if not r[3]]
        return {
            "rate": round(rate, 1),
            "calls": calls,
            "achieved_per_s": calls / elapsed,
            "errors": len(records) - len(ok),
            "error_list": [r[3] for r in records if r[3]],
            "web_cpu_ms_per_call": web_cpu * 1000 / calls,
            "web_cpu_share": web_cpu / elapsed,
            "generator_cpu_share": sum(a["cpu_s"] for a in answers) / elapsed,
            # The generators' garbage collections in the step: total and longest, ms.
            "generator_gc_ms": [
                round(sum(a["gc_ms"][0] for a in answers), 1),
                round(max(a["gc_ms"][1] for a in answers), 1),
            ],
            "machine_busy": (busy - busy_before) / max(total - total_before, 1) * _cpus(),
            # From the due time (the criterion), from the send, and the send's lateness.
            "latency_ms": summary([(r[2] - r[0]) * 1000 for r in ok]) if ok else None,
            "service_ms": summary([(r[2] - r[1]) * 1000 for r in ok]) if ok else None,
            "send_lag_ms": summary([(r[1] - r[0]) * 1000 for r in records]) if records else None,
        }

    def close(self) -> None:
        for proc in self.procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()


def _cpus() -> int:
    return os.cpu_count() or 1


async def run(
    server: BenchAtrium,
    seeded: Seeded,
    *,
    clients: int,
    start_rate: float,
    factor: float,
    step_s: float,
    max_rate: float,
    processes: int = 2,
    warmup: bool = True,
) -> dict[str, Any]:
    views = await concurrency.open_views(server, seeded)
    generators = Generators(
        Target(server.port, server.app_origin), seeded, views, clients, processes
    )
    errors: list[str] = []
    steps: list[dict[str, Any]] = []
    saturation = 0.0
    warm: dict[str, Any] | None = None
    try:
        await generators.answers()  # every process's clients connected, tokens in hand
        if warmup:  # every client's first call, not measured
            warm = await generators.step(server, start_rate, clients)
            errors += warm.pop("error_list")
        rate = start_rate
        while rate <= max_rate:
            record = await generators.step(server, rate, max(1, round(rate * step_s)))
            errors += record.pop("error_list")
            steps.append(record)
            p99 = record["latency_ms"]["p99"] if record["latency_ms"] else float("inf")
            if record["errors"] or p99 > P99_LIMIT_MS:
                break
            saturation = rate
            rate *= factor
        checks = await generators.ask([("check",)] * processes)
    finally:
        generators.close()
    return {
        "clients": clients,
        "threads": len(seeded.threads),
        "generator_processes": processes,
        "p99_limit_ms": P99_LIMIT_MS,
        "saturation_calls_per_s": round(saturation, 1),
        "warmup": warm,
        "steps": steps,
        "errors": len(errors),
        "error_samples": errors[:5],
        **{k: sum(c[k] for c in checks) for k in checks[0]},
    }
