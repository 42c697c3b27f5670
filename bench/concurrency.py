"""200 concurrent websocket clients doing UI tool calls (DESIGN §9).

`threads` threads with `clients // threads` members each; every client opens the thread's
board view (its own token) and makes `calls` view `tools/call` requests back to back, all
clients at once. Checked: every request gets an ok reply (errors = 0), and every client
saw every event of its thread — contiguous sequence numbers up to the thread's last one
and the final `toolcall` event of every call (lost events = 0).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from .harness import BenchAtrium, Seeded, connect, open_view


async def open_views(server: BenchAtrium, seeded: Seeded) -> dict[int, int]:
    """One board view per seeded thread (a `/call board.list_items`): thread → its call id."""
    threads = seeded.threads
    opener = await connect(server, seeded.cookies[0], threads[0])
    views: dict[int, int] = {}
    for thread in threads:
        sock = opener if thread == threads[0] else await connect(server, seeded.cookies[0], thread)
        await open_view(sock, "/call board.list_items", "list_items")
        calls_seen = [f for _, f in sock.events if f.get("kind") == "toolcall"]
        views[thread] = calls_seen[-1]["data"]["id"]
        await sock.close()
    return views


async def open_clients(
    server: Any,
    seeded: Seeded,
    *,
    clients: int,
    views: dict[int, int] | None = None,
    indices: range | list[int] | None = None,
) -> tuple[list[tuple[int, Any]], list[str]]:
    """`clients` sockets spread over the seeded threads (client n on thread
    n // (clients / threads), as user n), each with its own token for its thread's board
    view: (thread, socket) pairs and the tokens. ``indices``: only those clients (a load
    generator process holds a share); ``views``: already opened (`open_views`). ``server``:
    anything with the server's ``port`` and ``app_origin``."""
    threads = seeded.threads
    per_thread = clients // len(threads)
    if views is None:
        views = await open_views(server, seeded)
    sockets: list[tuple[int, Any]] = []
    for n in range(clients) if indices is None else indices:
        thread = threads[n // per_thread]
        sock = await connect(server, seeded.cookies[n], thread, keep_events=True)
        sockets.append((thread, sock))
    tokens = []
    for thread, sock in sockets:
        opened = await sock.request({"type": "view.open", "toolCallId": views[thread]})
        assert opened["ok"], opened
        tokens.append(opened["result"]["token"])
    return sockets, tokens


def call_message(token: str) -> dict[str, Any]:
    return {
        "type": "view.request",
        "token": token,
        "method": "tools/call",
        "params": {"name": "refresh", "arguments": {}},
    }


async def run(server: BenchAtrium, seeded: Seeded, *, clients: int, calls: int) -> dict[str, Any]:
    threads = seeded.threads
    sockets, tokens = await open_clients(server, seeded, clients=clients)
    replies_ok = 0
    errors: list[str] = []

    async def client(index: int) -> None:
        nonlocal replies_ok
        thread, sock = sockets[index]
        message = call_message(tokens[index])
        for _ in range(calls):
            try:
                reply = await sock.request(message, timeout=120)
            except Exception as exc:  # noqa: BLE001 — counted and reported
                errors.append(repr(exc)[:200])
                continue
            if reply.get("ok"):
                replies_ok += 1
            else:
                errors.append(str(reply.get("error"))[:200])

    started = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(clients)))
    elapsed = time.perf_counter() - started
    checked = await check_events(server, seeded, sockets)
    total = clients * calls
    return {
        "clients": clients,
        "threads": len(threads),
        "calls": total,
        "ok_replies": replies_ok,
        "errors": len(errors),
        "error_samples": errors[:5],
        **checked,
        "elapsed_s": elapsed,
        "calls_per_s": total / elapsed,
    }


async def check_events(
    server: Any, seeded: Seeded, sockets: list[tuple[int, Any]]
) -> dict[str, int]:
    """Every client must end with every event of its thread, with no gaps, and the final
    event of every view call of its thread; the sockets are closed."""
    threads = seeded.threads
    call_ids: dict[int, set[int]] = {t: set() for t in threads}
    last_seq: dict[int, int] = {}
    for thread in threads:
        probe = await connect(server, seeded.cookies[0], thread)
        last_seq[thread] = probe.hello["lastSeq"]
        await probe.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if all(
            sock.events and sock.events[-1][1]["seq"] >= last_seq[thread]
            for thread, sock in sockets
        ):
            break
        await asyncio.sleep(0.1)
    lost = 0
    gaps = 0
    duplicates = 0
    out_of_order = 0
    finals_missing = 0
    for thread, sock in sockets:
        seqs = [f["seq"] for _, f in sock.events]
        first = sock.hello["lastSeq"] + 1
        expected = set(range(first, last_seq[thread] + 1))
        lost += len(expected - set(seqs))
        gaps += sum(1 for a, b in zip(seqs, seqs[1:], strict=False) if b != a + 1)
        # Events committed by different processes may arrive out of seq order (the chat
        # client replays on a jump and drops what it already applied): counted apart.
        duplicates += len(seqs) - len(set(seqs))
        out_of_order += sum(1 for a, b in zip(seqs, seqs[1:], strict=False) if b < a)
        for _, frame in sock.events:
            data = frame.get("data") or {}
            if frame.get("kind") == "toolcall" and data.get("origin") == "app_view":
                call_ids[thread].add(data["id"])
    # Final events per client: every app-view call of its thread, seen in a final state.
    for thread, sock in sockets:
        finals = {
            f["data"]["id"]
            for _, f in sock.events
            if f.get("kind") == "toolcall" and f["data"].get("status") == "success"
        }
        finals_missing += len(call_ids[thread] - finals)
    for _, sock in sockets:
        await sock.close()
    return {
        "lost_events": lost,
        "seq_gaps": gaps,
        "duplicate_events": duplicates,
        "out_of_order_arrivals": out_of_order,
        "missing_final_events": finals_missing,
    }
