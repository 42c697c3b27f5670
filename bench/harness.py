"""Shared pieces of the benchmarks: a probed LiveAtrium, seeded data, websocket clients."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import websockets

from tests.live import PYTHON, ROOT, LiveAtrium, memory_kib, reset_peak_memory, wait_for_http

BOARD = ROOT / "examples" / "board" / "server.py"
MEDIA = ROOT / "examples" / "media" / "server.py"


def per_call(before: dict[str, float], after: dict[str, float], calls: int) -> dict[str, float]:
    """The difference of two counter snapshots, per call."""
    return {k: (after[k] - before.get(k, 0)) / calls for k in after}


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "mean": statistics.fmean(values),
        "max": max(values),
    }


@dataclass
class BenchAtrium(LiveAtrium):
    """A LiveAtrium whose web server runs under bench.probe (timestamps in a JSON-lines file)."""

    profile_out: Path | None = None
    web: subprocess.Popen | None = None
    created_db: str = ""

    @property
    def probe_file(self) -> Path:
        return self.var_dir / "probe.jsonl"

    def setup(self) -> BenchAtrium:
        super().setup()
        url = self.env.get("DATABASE_URL", "")
        if url and url != os.environ.get("DATABASE_URL"):
            self.created_db = urlsplit(url).path.lstrip("/")
        return self

    def start(self, *, worker: bool = False) -> BenchAtrium:
        env = dict(self.env)
        env["ATRIUM_BENCH_PROBE"] = str(self.probe_file)
        if self.profile_out is not None:
            env["ATRIUM_BENCH_PYINSTRUMENT"] = str(self.profile_out)
        log = open(self.var_dir / "server.log", "ab")  # noqa: SIM115 (held by the child)
        self.web = subprocess.Popen(
            [PYTHON, "-m", "bench.probe", "--port", str(self.port)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.processes.append(self.web)
        if worker:
            self.start_worker()
        wait_for_http(f"{self.app_origin}/login/")
        return self

    def drop_database(self) -> None:
        if not self.created_db:
            return
        import psycopg

        admin = urlunsplit(urlsplit(os.environ["DATABASE_URL"])._replace(path="/postgres"))
        with contextlib.suppress(Exception), psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.created_db}" WITH (FORCE)')

    def probe_records(self, ev: str | None = None) -> list[dict[str, Any]]:
        if not self.probe_file.exists():
            return []
        rows = []
        for line in self.probe_file.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue  # the last line, still being written
        return [r for r in rows if ev is None or r.get("ev") == ev]

    def status(self, key: str) -> int:
        """A /proc/<web server>/status figure in KiB (VmRSS, VmHWM...)."""
        assert self.web is not None
        return memory_kib(self.web.pid)[key]

    def cpu_seconds(self) -> float:
        """User + system CPU time the web server process has used so far."""
        assert self.web is not None
        fields = Path(f"/proc/{self.web.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def counters(self, timeout: float = 10.0) -> dict[str, float]:
        """The web process's tallies so far (bench.probe ``Counters``, asked with SIGUSR1)."""
        assert self.web is not None
        seen = len(self.probe_records("counters"))
        os.kill(self.web.pid, signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.probe_records("counters")
            if len(found) > seen:
                return {k: v for k, v in found[-1].items() if k not in ("ev", "t")}
            time.sleep(0.02)
        raise TimeoutError("the web process did not report its counters")

    def reset_peak_rss(self) -> None:
        assert self.web is not None
        reset_peak_memory(self.web.pid)

    def database_stats(self) -> dict[str, Any]:
        """PostgreSQL's side (production only, else {}): the size of the bench database's
        tables with their indexes and TOAST, the WAL written by the whole cluster (other
        databases too: an upper bound), and the CPU seconds of the backends serving this
        database now (a backend that ended is missed: a lower bound)."""
        return database_stats(self.env.get("DATABASE_URL", ""))


def database_stats(url: str) -> dict[str, Any]:
    """``BenchAtrium.database_stats`` for the database at ``url`` (any live server's)."""
    if not url.startswith("postgres"):
        return {}
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        size = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE c.relkind IN ('r', 'm') AND n.nspname = 'public'"
        ).fetchone()[0]
        wal = conn.execute(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint"
        ).fetchone()[0]
        pids = [
            r[0]
            for r in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
            )
        ]
    cpu: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cpu[pid] = (int(fields[11]) + int(fields[12])) / tick
    return {
        "pg_table_bytes": float(size),
        "pg_wal_bytes_cluster": float(wal),
        "pg_backend_cpu": cpu,
    }


def database_per_call(
    before: dict[str, Any], after: dict[str, Any], calls: int
) -> dict[str, float]:
    """PostgreSQL's figures per call between two ``database_stats`` (empty when embedded)."""
    if not before or not after:
        return {}
    cpu_before = before["pg_backend_cpu"]
    cpu = sum(v - cpu_before.get(pid, 0.0) for pid, v in after["pg_backend_cpu"].items())
    return {
        "pg_table_bytes": (after["pg_table_bytes"] - before["pg_table_bytes"]) / calls,
        "pg_wal_bytes_cluster": (after["pg_wal_bytes_cluster"] - before["pg_wal_bytes_cluster"])
        / calls,
        "pg_backend_cpu_ms": cpu * 1000 / calls,
    }


SEED = r"""
import json, sys
from django.contrib.auth import get_user_model
from django.test import Client
from chat import services
from mcp_bridge.services.servers import server_add
from bindings.services.bindings import binding_create

spec = json.loads(sys.stdin.read())
U = get_user_model()
owner = U.objects.create_user("bench-owner")
workspace = services.workspace_create(name="Bench", owner=owner)
users = [owner]
for n in range(spec["members"] - 1):
    user = U.objects.create_user(f"bench-{n:03d}")
    services.membership_set(workspace=workspace, user=user, role="member")
    users.append(user)
threads = [
    services.thread_create(workspace=workspace, title=f"bench {n}", actor=owner).pk
    for n in range(spec["threads"])
]
servers = {}
for slug, server in spec["servers"].items():
    row = server_add(name=slug.title(), slug=slug, **server)
    binding_create(server=row, workspace=workspace)
    servers[slug] = row.pk
cookies = []
for user in users:
    client = Client()
    client.force_login(user)
    cookies.append(client.cookies["sessionid"].value)
print("SEED=" + json.dumps({
    "workspace": workspace.slug, "threads": threads, "cookies": cookies, "servers": servers,
    "users": [u.pk for u in users],
}))
"""


@dataclass
class Seeded:
    workspace: str
    threads: list[int]
    cookies: list[str]
    servers: dict[str, int]
    users: list[int]


def seed(server: LiveAtrium, *, members: int, threads: int, servers: dict[str, Any]) -> Seeded:
    out = server.manage(
        "shell",
        "-c",
        SEED,
        input=json.dumps({"members": members, "threads": threads, "servers": servers}),
    )
    line = next(x for x in out.splitlines() if x.startswith("SEED="))
    return Seeded(**json.loads(line[5:]))


def stdio_server(path: Path, **env: str) -> dict[str, Any]:
    return {"transport": "stdio", "command": PYTHON, "args": [str(path)], "env": env}


# --------------------------------------------------------------------------- websockets


@dataclass
class Socket:
    """One websocket client of a thread; frames are routed to waiters by rid."""

    ws: Any
    hello: dict[str, Any]
    replies: dict[Any, asyncio.Future] = field(default_factory=dict)
    events: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    keep_events: bool = True
    on_event: Any = None
    reader: asyncio.Task | None = None
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    counter: int = 0

    def start(self) -> Socket:
        self.reader = asyncio.get_running_loop().create_task(self._read())
        return self

    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                now = time.time()
                frame = json.loads(raw)
                kind = frame.get("type")
                if kind == "event":
                    if self.keep_events:
                        self.events.append((now, frame))
                    if self.on_event is not None:
                        self.on_event(now, frame)
                elif kind in ("reply", "pong"):
                    future = self.replies.pop(frame.get("rid"), None)
                    if future is not None and not future.done():
                        future.set_result(frame)
        except websockets.ConnectionClosed:
            pass
        finally:
            self.closed.set()
            for future in self.replies.values():
                if not future.done():
                    future.set_exception(ConnectionError("socket closed"))

    async def request(self, message: dict[str, Any], timeout: float = 30) -> dict[str, Any]:
        self.counter += 1
        rid = f"r{self.counter}"
        future = asyncio.get_running_loop().create_future()
        self.replies[rid] = future
        await self.ws.send(json.dumps({**message, "rid": rid}))
        return await asyncio.wait_for(future, timeout)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.ws.close()
        if self.reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.reader, 5)


async def connect(
    server: LiveAtrium,
    cookie: str,
    thread_id: int,
    *,
    after: int | None = None,
    caps: str = "interactiveToolUi",
    keep_events: bool = True,
) -> Socket:
    path = f"/ws/threads/{thread_id}/?caps={caps}" + (
        f"&after={after}" if after is not None else ""
    )
    ws = await websockets.connect(
        f"ws://localhost:{server.port}{path}",
        host="127.0.0.1",
        port=server.port,
        origin=server.app_origin,
        additional_headers={"Cookie": f"sessionid={cookie}"},
        proxy=None,
        max_size=None,
        open_timeout=30,
        ping_interval=None,
    )
    hello = json.loads(await asyncio.wait_for(ws.recv(), 30))
    assert hello.get("type") == "hello", hello
    return Socket(ws=ws, hello=hello, keep_events=keep_events).start()


async def open_view(sock: Socket, command: str, tool: str, timeout: float = 60) -> dict[str, Any]:
    """Post `/call ...`, wait for the call's final event, open its view; returns view.open."""
    start = len(sock.events)
    reply = await sock.request({"type": "message.post", "text": command}, timeout=timeout)
    assert reply["ok"], reply
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for _, frame in sock.events[start:]:
            data = frame.get("data") or {}
            if frame.get("kind") == "toolcall" and data.get("tool") == tool:
                if data.get("status") == "success":
                    opened = await sock.request({"type": "view.open", "toolCallId": data["id"]})
                    assert opened["ok"], opened
                    return opened["result"]
                if data.get("status") in ("error", "rejected"):
                    raise RuntimeError(f"{command} failed: {data.get('error')}")
        await asyncio.sleep(0.02)
    raise TimeoutError(command)


def python_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}


__all__ = [
    "BOARD",
    "MEDIA",
    "PYTHON",
    "ROOT",
    "BenchAtrium",
    "Seeded",
    "Socket",
    "connect",
    "open_view",
    "percentile",
    "seed",
    "stdio_server",
    "summary",
    "sys",
]
