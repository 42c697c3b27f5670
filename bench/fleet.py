"""`fleet` (issue 15): 600 websocket clients through nginx, spread over the fleet's 3 web
processes (`scripts/fleet.sh`, production profile), each making UI tool calls.

The same measurement as `concurrency` (bench/concurrency.py: every client opens its
thread's board view with its own token and makes `--per-client` `tools/call` requests,
all at once; 0 errors, 0 lost events, contiguous sequences for everyone), but every socket
goes through nginx's round robin, so members of one thread sit on different processes
and every event crosses Redis. nginx's access log says which web process served each socket.
The CPU each web process and the database's backends spent over the run is recorded (the
capacity model's check, docs/fleet.md).

    python -m bench.fleet --clients 600     # under scripts/with-production-services.sh
    python -m bench.fleet --clients 600 --web-processes 1
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import re
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.fleet.support import Fleet

from . import concurrency
from .harness import BOARD, database_per_call, database_stats, seed, stdio_server

SOCKET_LINE = re.compile(r'"GET /ws/threads/[^"]*" 101 127\.0\.0\.1:(\d+) ')


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(*, clients: int, threads: int, per_client: int, web_processes: int = 3) -> dict[str, Any]:
    if not os.environ.get("DATABASE_URL"):
        raise SystemExit("the fleet needs the production profile (DATABASE_URL, REDIS_URL)")
    work = Path(tempfile.mkdtemp(prefix="atrium-bench-fleet-"))
    extra = {
        "LOG_LEVEL": "WARNING",
        "FLEET_DEMO": "0",
        "FLEET_WEB_PROCESSES": str(web_processes),
        # The bench measures the request path, not the rate limits (bindings.ratelimit).
        "ATRIUM_RATE_LIMITS": json.dumps(
            {
                k: [10**6, 10**6]
                for k in ("view_request", "user_view_request", "tool_call", "message")
            }
        ),
    }
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # Each client holds one socket here and two in nginx (client + upstream).
    if soft < 4 * clients:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8 * clients), hard))
    fleet = Fleet.start(work / "var", extra)
    try:
        seeded = seed(
            fleet.server,
            members=clients,
            threads=threads,
            servers={"board": stdio_server(BOARD, BOARD_STATE_FILE=str(work / "board.json"))},
        )
        started = time.monotonic()
        webs = [p.pid for p in fleet.named("web")]
        url = fleet.server.env.get("DATABASE_URL", "")
        cpu_before = {pid: _cpu_seconds(pid) for pid in webs}
        db_before = database_stats(url)
        result = asyncio.run(
            concurrency.run(fleet.server, seeded, clients=clients, calls=per_client)
        )
        result["wall_s"] = time.monotonic() - started
        # The capacity model's check (docs/fleet.md): CPU of each web process and of the
        # database's backends over the whole run (opening sockets and views included).
        result["web_cpu_s"] = {str(pid): _cpu_seconds(pid) - cpu_before[pid] for pid in webs}
        result["database_per_call"] = database_per_call(
            db_before, database_stats(url), result["calls"]
        )
        result["sockets_per_web_process"] = _sockets_per_web_process(fleet)
        result["web_processes"] = len(fleet.named("web"))
        result["nofile_limit"] = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    finally:
        fleet.stop()
        fleet.server._drop_live_database()
        shutil.rmtree(work, ignore_errors=True)
    return result


def _sockets_per_web_process(fleet: Fleet) -> dict[str, int]:
    """Websockets each web process served (nginx logs a socket when it closes)."""
    log = fleet.log("nginx-access.log")
    counts = collections.Counter(SOCKET_LINE.findall(log))
    names = {str(p.port): p.name for p in fleet.named("web")}
    return {names.get(port, port): count for port, count in sorted(counts.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=600)
    parser.add_argument("--threads", type=int, default=30)
    parser.add_argument("--per-client", type=int, default=5)
    parser.add_argument("--web-processes", type=int, default=3)
    args = parser.parse_args()
    result = run(
        clients=args.clients,
        threads=args.threads,
        per_client=args.per_client,
        web_processes=args.web_processes,
    )
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
