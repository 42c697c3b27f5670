"""A 50 MB media result (examples/media `get_large`) on the request path (DESIGN §9).

Clock: from the raw result arriving at the host (bench.probe records when
`gateway.call_tool` returns) to the client receiving the final `toolcall` event, whose
media part is a placeholder (`asset.status == "staged"`) until the worker stores it.
Memory: the web process's peak RSS (VmHWM, reset through /proc/<pid>/clear_refs just
before the call) minus its RSS before the call: the transport streams the base64 text to a
spool file as it arrives, so the budget is a flat 16 MiB (the floor beside it is the raw
JSON text, what a process holding the result once would need). The Celery worker's peak RSS
growth (same method, until the media is ready) against one decoded copy. Also reported:
the web server's RSS once the worker has stored the media, minus its RSS before (nothing should
still hold the payload).
"""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

from tests.live import memory_kib, reset_peak_memory

from .harness import BenchAtrium, Seeded, connect

MIB = 1024 * 1024


async def run(server: BenchAtrium, seeded: Seeded, *, megabytes: int = 50) -> dict[str, Any]:
    sock = await connect(server, seeded.cookies[0], seeded.threads[0])
    # Warm the connection (process start, tool listing) with a small payload first.
    for size in (0.1, 0.1):
        reply = await sock.request(
            {
                "type": "tool.call",
                "server": "media",
                "tool": "get_large",
                "arguments": {"megabytes": size, "kind": "video"},
            },
            timeout=120,
        )
        assert reply["ok"], reply
        await _final(sock, reply["result"]["toolCallId"], 120)
    await asyncio.sleep(1.0)
    worker = _worker_pid(server)
    worker_before = memory_kib(worker)["VmRSS"]
    reset_peak_memory(worker)
    rss_before = server.status("VmRSS")
    server.reset_peak_rss()
    started = time.time()
    reply = await sock.request(
        {
            "type": "tool.call",
            "server": "media",
            "tool": "get_large",
            "arguments": {"megabytes": megabytes, "kind": "video"},
        },
        timeout=60,
    )
    assert reply["ok"], reply
    call_id = reply["result"]["toolCallId"]
    received, data = await _final(sock, call_id, 600)
    peak = server.status("VmHWM")
    arrivals = [r["t"] for r in server.probe_records("result") if r["tool"] == "get_large"]
    arrived = max(t for t in arrivals if t >= started)
    parts = (data.get("result") or {}).get("parts", [])
    media = [p for p in parts if isinstance(p.get("asset"), dict)]
    decoded = megabytes * MIB
    raw_json = len(base64.b64encode(b"\0" * 3)) * ((decoded + 2) // 3) + 1024
    growth = (peak - rss_before) * 1024
    ready_after = None
    asset_id = media[0]["asset"].get("id") if media else None
    if asset_id is not None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and ready_after is None:
            for now, frame in sock.events:
                d = frame.get("data") or {}
                if (
                    frame.get("kind") == "media"
                    and d.get("id") == asset_id
                    and d.get("status") == "ready"
                ):
                    ready_after = now - arrived
                    break
            await asyncio.sleep(0.2)
    rss_after_ready = server.status("VmRSS")
    worker_peak = memory_kib(worker)["VmHWM"]
    await sock.close()
    return {
        "megabytes": megabytes,
        "status": data.get("status"),
        "placeholder": bool(media) and media[0]["asset"].get("status") == "staged",
        "tool_call_s": arrived - started,
        "placeholder_ms": (received - arrived) * 1000,
        "media_ready_s": ready_after,
        "rss_before_mib": rss_before / 1024,
        "rss_growth_mib": growth / MIB,
        "rss_after_ready_growth_mib": (rss_after_ready - rss_before) / 1024,
        "raw_json_mib": raw_json / MIB,
        "decoded_mib": decoded / MIB,
        "rss_allowed_mib": (raw_json + decoded) / MIB,
        "rss_ratio": growth / (raw_json + decoded),
        "worker_peak_growth_mib": (worker_peak - worker_before) / 1024,
        "worker_ratio": (worker_peak - worker_before) * 1024 / decoded,
    }


def _worker_pid(server: BenchAtrium) -> int:
    (worker,) = [p for p in server.processes if "celery" in p.args and "worker" in p.args]
    return worker.pid


async def _final(sock, call_id: int, timeout: float) -> tuple[float, dict[str, Any]]:
    deadline = time.monotonic() + timeout
    seen = 0
    while time.monotonic() < deadline:
        for now, frame in sock.events[seen:]:
            data = frame.get("data") or {}
            if (
                frame.get("kind") == "toolcall"
                and data.get("id") == call_id
                and data.get("status") in ("success", "error", "rejected", "cancelled")
            ):
                return now, data
        seen = len(sock.events)
        await asyncio.sleep(0.002)
    raise TimeoutError(f"tool call {call_id} did not finish")
