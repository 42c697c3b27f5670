"""The web server with a few timestamps recorded for the benchmarks (bench-only; no product
code).

`python -m bench.probe --port N` sets Django up, wraps two module attributes, and runs the
server as `python -m config.serve` does. With ``ATRIUM_BENCH_PROBE=<file>`` it appends one JSON line per
observation:

- ``{"ev": "broadcast", "seq", "kind", "t"}`` when a committed thread event is handed to
  the channel layer (``chat.realtime.events.broadcast``: the "send time" of the fan-out benchmark);
- ``{"ev": "result", "tool", "t"}`` when a tool call's raw result has arrived at the host
  (``mcp_bridge.gateway.call_tool`` returned: the start of the media benchmark's clock).

``t`` is ``time.time()`` (same machine as the benchmark client). With
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


def install() -> None:
    write = _writer()
    if write is None:
        return
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
