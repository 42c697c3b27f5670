"""One tool result delivered to 50 connected members of a thread (DESIGN §9).

50 members hold a websocket each; the owner runs a tool (`tool.call`) `rounds` times. For
every member and every final `toolcall` event: receive time (client clock, taken when the
frame arrives) minus send time (the web process handing the committed event to the
channel layer, recorded by bench.probe). Same machine, same clock.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from .harness import BenchAtrium, Seeded, connect, per_call, summary

MEMBERS = 50


async def run(server: BenchAtrium, seeded: Seeded, *, rounds: int) -> dict[str, Any]:
    thread = seeded.threads[0]
    received: dict[int, dict[int, float]] = {}  # seq -> member -> time
    final_seqs: dict[int, int] = {}  # call id -> seq of its final event

    def recorder(member: int):
        def on_event(now: float, frame: dict[str, Any]) -> None:
            data = frame.get("data") or {}
            if frame.get("kind") == "toolcall" and data.get("status") == "success":
                received.setdefault(frame["seq"], {})[member] = now
                final_seqs[data["id"]] = frame["seq"]

        return on_event

    sockets = []
    for member in range(MEMBERS):
        sock = await connect(server, seeded.cookies[member], thread, keep_events=False)
        sock.on_event = recorder(member)
        sockets.append(sock)
    owner = sockets[0]
    request = {"type": "tool.call", "server": "board", "tool": "list_items", "arguments": {}}
    errors = 0
    incomplete = 0
    for _ in range(3):  # warm-up
        reply = await owner.request(request)
        await asyncio.sleep(0.2)
    received.clear()
    final_seqs.clear()
    cpu_before, counted_before = server.cpu_seconds(), server.counters()
    seq_before = len(server.probe_records("broadcast"))
    for _ in range(rounds):
        reply = await owner.request(request)
        if not reply.get("ok"):
            errors += 1
            continue
        call_id = reply["result"]["toolCallId"]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            seq = final_seqs.get(call_id)
            if seq is not None and len(received.get(seq, {})) == MEMBERS:
                break
            await asyncio.sleep(0.005)
        else:
            incomplete += 1
    await asyncio.sleep(0.2)
    # What a round costs the web process with MEMBERS sockets on the thread: the capacity
    # model (docs/fleet.md) takes the cost of one event per member from it.
    cpu_per_round_ms = (server.cpu_seconds() - cpu_before) * 1000 / rounds
    counted = per_call(counted_before, server.counters(), rounds)
    events_per_round = (len(server.probe_records("broadcast")) - seq_before) / rounds
    sent = {r["seq"]: r["t"] for r in server.probe_records("broadcast") if r.get("seq")}
    deltas = [
        (t - sent[seq]) * 1000
        for seq, members in received.items()
        if seq in sent
        for t in members.values()
    ]
    # (last member, first member) per round, slowest rounds last
    worst = sorted(
        (
            (max(members.values()) - sent[seq]) * 1000,
            (min(members.values()) - sent[seq]) * 1000,
        )
        for seq, members in received.items()
        if seq in sent
    )
    for sock in sockets:
        await sock.close()
    return {
        "slowest_rounds_ms": worst[-5:],
        "members": MEMBERS,
        "rounds": rounds,
        "errors": errors,
        "incomplete_rounds": incomplete,
        "delivery_ms": summary(deltas) if deltas else None,
        "web_cpu_ms_per_round": cpu_per_round_ms,
        "events_per_round": events_per_round,
        "per_round": counted,
    }
