"""The web server with a few timestamps recorded for the benchmarks (bench-only; no product
code).

`python -m bench.probe --port N` sets Django up, wraps two module attributes, and runs the
server as `python -m config.serve` does. With ``ATRIUM_BENCH_PROBE=<file>`` it appends one JSON line per
observation:

- ``{"ev": "broadcast", "seq", "kind", "t"}`` when a committed thread event is handed to
  the channel layer (``chat.realtime.events.broadcast``: the "send time" of the fan-out benchmark);
- ``{"ev": "result", "tool", "t"}`` when a tool call's raw result has arrived at the host
  (``mcp_bridge.gateway.call_tool`` returned: the start of the media benchmark's clock).

``t`` is ``time.time()`` (same machine as the benchmark client). On ``SIGUSR1`` it appends
``{"ev": "counters", ...}``: what the process has done so far (``Counters``: database
statements and transactions, trips to a worker thread, Redis commands and writes) — the
benchmarks take the difference over a run, per call (issue 28's capacity model). With
``ATRIUM_BENCH_PYINSTRUMENT=<file>`` the whole run is profiled (main thread) and a text
report written at exit.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time


def _writer():
    path = os.environ.get("ATRIUM_BENCH_PROBE")
    if not path:
        return None
    handle = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 (process-long)
    lock = threading.Lock()

    def write(record: dict) -> None:
        line = json.dumps(record)
        with lock:
            handle.write(line + "\n")

    return write


class Counters:
    """Process-wide tallies (plain integer increments: exact enough under the GIL)."""

    def __init__(self) -> None:
        self.values = dict.fromkeys(
            (
                "db_statements",  # through Django's cursor (lean rows too)
                "db_commits",  # explicit transactions committed (BEGIN + COMMIT each)
                "db_rollbacks",
                "thread_trips",  # sync_to_async / database_sync_to_async hand-overs
                "to_thread",  # asyncio.to_thread hand-overs
                "redis_commands",
                "redis_writes",  # socket writes to Redis (a pipeline is one)
                "redis_publishes",
            ),
            0,
        )

    def add(self, key: str, n: int = 1) -> None:
        self.values[key] = self.values.get(key, 0) + n


COUNTERS = Counters()


def _count() -> None:
    """Wrap the few functions every database statement, thread trip and Redis command
    passes through (bench-only; the product code is untouched)."""
    import asyncio

    from asgiref.sync import SyncToAsync
    from django.db.backends import utils
    from django.db.backends.base.base import BaseDatabaseWrapper
    from redis import connection as sync_redis
    from redis.asyncio import connection as async_redis

    add = COUNTERS.add
    execute = utils.CursorWrapper._execute_with_wrappers

    # No per-parameter sizes here: `str()` of a JSON parameter serializes it again, which
    # cost the measured process ~0.3 ms a call; the bytes written are PostgreSQL's own
    # figures (table growth, WAL) in `bench.harness.database_per_call`.
    def counted_execute(self, sql, params, many, executor):
        add("db_statements")
        return execute(self, sql, params, many, executor)

    utils.CursorWrapper._execute_with_wrappers = counted_execute
    commit, rollback = BaseDatabaseWrapper._commit, BaseDatabaseWrapper._rollback

    def counted_commit(self):
        add("db_commits")
        return commit(self)

    def counted_rollback(self):
        add("db_rollbacks")
        return rollback(self)

    BaseDatabaseWrapper._commit = counted_commit
    BaseDatabaseWrapper._rollback = counted_rollback
    trip = SyncToAsync.__call__

    async def counted_trip(self, *args, **kwargs):
        add("thread_trips")
        return await trip(self, *args, **kwargs)

    SyncToAsync.__call__ = counted_trip
    to_thread = asyncio.to_thread

    async def counted_to_thread(func, /, *args, **kwargs):
        add("to_thread")
        return await to_thread(func, *args, **kwargs)

    asyncio.to_thread = counted_to_thread
    _time_phases(add)
    for module in (sync_redis, async_redis):
        cls = module.AbstractConnection
        pack, pack_many, send = cls.pack_command, cls.pack_commands, cls.send_packed_command

        def counted_pack(self, *args, _pack=pack):
            add("redis_commands")
            name = str(args[0]).upper() if args else ""
            add(f"redis_{name.lower()}")  # per command name: redis_evalsha, redis_publish...
            if name == "PUBLISH":
                add("redis_publishes")
            return _pack(self, *args)

        def counted_pack_many(self, commands, _pack_many=pack_many):
            commands = list(commands)
            add("redis_commands", len(commands))
            add("redis_publishes", sum(1 for c in commands if str(c[0]).upper() == "PUBLISH"))
            return _pack_many(self, commands)

        if module is async_redis:

            async def counted_send(self, command, check_health=True, _send=send):
                add("redis_writes")
                return await _send(self, command, check_health)
        else:

            def counted_send(self, command, check_health=True, _send=send):
                add("redis_writes")
                return _send(self, command, check_health)

        cls.pack_command = counted_pack
        if module is sync_redis:  # the async pack_commands calls pack_command per command
            cls.pack_commands = counted_pack_many
        cls.send_packed_command = counted_send


def _time_phases(add) -> None:
    """Microseconds spent per phase of a call, summed (``phase_us_*``; per call in the
    benchmarks' ``per_call``): where a UI call's latency goes, not only its CPU."""
    from chat.actions import app_view_calls, registry
    from chat.calls import run
    from mcp_bridge import gateway

    def timed(name, func):
        async def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return await func(*args, **kwargs)
            finally:
                add(f"phase_us_{name}", round((time.perf_counter() - started) * 1e6))

        return wrapper

    def thread_cpu(name, func):
        def wrapper(*args, **kwargs):
            started = time.thread_time()
            try:
                return func(*args, **kwargs)
            finally:
                add(f"cpu_us_{name}", round((time.thread_time() - started) * 1e6))

        return wrapper

    # CPU of the database thread in each trip (its wall time less this: waiting on the database).
    run._admit_and_decide = thread_cpu("decide", run._admit_and_decide)
    run.tool_call_finish = thread_cpu("finish", run.tool_call_finish)
    app_view_calls._answer = timed("answer", app_view_calls._answer)  # request → reply sent
    run._decide_async = timed("decide", run._decide_async)  # admission + decision trip
    run._finish_success_async = timed("finish", run._finish_success_async)  # result trip
    gateway.call_tool = timed("tool", gateway.call_tool)  # the MCP server's answer
    registry.ratelimit.take_all_async = timed("rate", registry.ratelimit.take_all_async)


def install() -> None:
    write = _writer()
    if write is None:
        return
    import signal

    _count()

    def dump(*_: object) -> None:
        # From a thread of its own: the handler runs on the main thread, which may hold the
        # writer's lock at this very moment.
        snapshot = {"ev": "counters", "t": time.time(), **COUNTERS.values}
        threading.Thread(target=write, args=(snapshot,), daemon=True).start()

    signal.signal(signal.SIGUSR1, dump)
    from chat.realtime import events
    from mcp_bridge import gateway

    original_broadcast = events.broadcast

    def broadcast(thread_id, message):
        event = message.get("event", {})
        write(
            {
                "ev": "broadcast",
                "seq": event.get("seq"),
                "kind": event.get("kind"),
                "t": time.time(),
            }
        )
        return original_broadcast(thread_id, message)

    events.broadcast = broadcast
    original_call = gateway.call_tool

    async def call_tool(server, tool, arguments, **kwargs):
        result = await original_call(server, tool, arguments, **kwargs)
        write({"ev": "result", "tool": tool.name, "t": time.time()})
        return result

    gateway.call_tool = call_tool


def _profile() -> None:
    path = os.environ.get("ATRIUM_BENCH_PYINSTRUMENT")
    if not path:
        return
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0005, async_mode="disabled")
    profiler.start()

    def stop() -> None:
        profiler.stop()
        with open(path, "w", encoding="utf-8") as out:
            out.write(profiler.output_text(unicode=False, color=False, show_all=False))

    atexit.register(stop)


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import config.asgi  # noqa: F401  (django.setup() before the patches)

    install()
    _profile()
    if os.environ.get("ATRIUM_BENCH_GC_LOG"):
        import gc

        def on_gc(phase, info, started=[0.0]):  # noqa: B006 — a cell for the start time
            if phase == "start":
                started[0] = time.perf_counter()
            elif info.get("generation") == 2:
                elapsed = (time.perf_counter() - started[0]) * 1000
                print(f"gc gen2 {elapsed:.1f} ms collected {info.get('collected')}", flush=True)

        gc.callbacks.append(on_gc)
    from config import serve

    serve.main(sys.argv[1:])


if __name__ == "__main__":
    main()
