"""The fleet under test: `scripts/fleet.sh` itself (nginx, 3 web processes, 2 workers, beat) on a
fresh PostgreSQL database and a redis-server of its own, driven through nginx only."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.live import ROOT, LiveAtrium, free_port
from tests.resilience.support import PrivateRedis, db_rows, reconnect
from tests.waiting import (
    OutputWatch,
    WaitTimeout,
    default_sigint,
    process_group_listing,
    socket_event,
)

FLEET_SCRIPT = ROOT / "scripts" / "fleet.sh"
READY_LINE = "The Atrium fleet is running"


@dataclass(frozen=True)
class Process:
    name: str
    pid: int
    port: int | None

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        # A killed child stays a zombie until fleet.sh reaps it.
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except FileNotFoundError:
            return False
        state = stat.rsplit(")", 1)[1].split()[0]
        return state != "Z"


@dataclass
class Fleet:
    """A running `scripts/fleet.sh`; `server` is a LiveAtrium whose port is nginx's."""

    server: LiveAtrium
    script: subprocess.Popen
    output: Path
    redis: PrivateRedis
    processes: list[Process] = field(default_factory=list)

    @classmethod
    def start(cls, var_dir: Path, extra_env: dict[str, str]) -> Fleet:
        # A redis-server of its own: the machine's shared one carries other live servers'
        # channel layers, whose thread ids (1, 2, ...) are the same as ours.
        redis = PrivateRedis(var_dir / "redis").start()
        extra_env = {
            **extra_env,
            "REDIS_URL": f"{redis.url}/0",
            "CELERY_BROKER_URL": f"{redis.url}/1",
        }
        server = LiveAtrium(var_dir=var_dir, port=free_port(), extra_env=extra_env).setup()
        env = {
            **server.env,
            "FLEET_PORT": str(server.port),
            "FLEET_WEB_PORTS": " ".join(
                str(free_port()) for _ in range(int(extra_env.get("FLEET_WEB_PROCESSES", "3")))
            ),
            "ATRIUM_BIN": str(Path(sys.executable).parent),
        }
        output = var_dir / "fleet.out"
        output.write_bytes(b"")
        with default_sigint():
            script = subprocess.Popen(
                ["bash", str(FLEET_SCRIPT)],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C goes to fleet.sh alone: its children ignore it
            )
        # Its output lines are the event; all of it is kept in `output` too.
        watch = OutputWatch(script, log=output)
        fleet = cls(server=server, script=script, output=output, redis=redis)
        try:
            watch.wait_for(READY_LINE, timeout=120)
            fleet._list_processes()
        except BaseException:
            fleet.stop()
            raise
        return fleet

    def _list_processes(self) -> None:
        listing = (self.server.var_dir / "fleet" / "processes").read_text().splitlines()
        for line in listing:
            name, pid, *port = line.split()
            self.processes.append(Process(name, int(pid), int(port[0]) if port else None))

    def named(self, prefix: str) -> list[Process]:
        return [p for p in self.processes if p.name.startswith(prefix)]

    def by_pid(self, pid: int) -> Process:
        return next(p for p in self.processes if p.pid == pid)

    def kill(self, process: Process) -> None:
        os.kill(process.pid, signal.SIGKILL)

    def stop(self) -> int:
        """Ctrl-C: fleet.sh stops every process; its exit status."""
        if self.script.poll() is None:
            self.script.send_signal(signal.SIGINT)
        try:
            return self.script.wait(timeout=60)
        except subprocess.TimeoutExpired as exc:
            # Evidence before the kill: what fleet.sh and its children were doing.
            processes = process_group_listing(self.script.pid)
            os.killpg(self.script.pid, signal.SIGKILL)
            tail = self.output.read_text(errors="replace")[-3000:]
            raise AssertionError(
                f"fleet.sh did not stop within 60 s of Ctrl-C\n{processes}\n{tail}"
            ) from exc
        finally:
            self.redis.stop()

    def rows(self, sql: str) -> list[tuple]:
        return db_rows(self.server, sql)

    def log(self, name: str) -> str:
        path = self.server.var_dir / "log" / name
        return path.read_text(errors="replace") if path.exists() else ""


class Member:
    """One person's view of a thread across reconnects: every event they received, in
    order, from the first socket and every later one (each resumed from the last seq)."""

    def __init__(self, server: LiveAtrium, cookie: str, thread: int) -> None:
        self.server, self.cookie, self.thread = server, cookie, thread
        self.sock: Any = None
        self.earlier: list[dict[str, Any]] = []  # events of closed sockets
        self.reconnects = 0

    async def connect(self) -> Member:
        from bench.harness import connect

        self.sock = await connect(self.server, self.cookie, self.thread)
        self.first_after = self.sock.hello["lastSeq"]
        return self

    @property
    def events(self) -> list[dict[str, Any]]:
        return self.earlier + [frame for _, frame in self.sock.events]

    @property
    def last_seq(self) -> int:
        events = self.events
        return events[-1]["seq"] if events else self.first_after

    async def resume_if_closed(self) -> None:
        """The client's reconnect: through nginx (to a live web process), after its last seq."""
        if not self.sock.closed.is_set():
            return
        self.earlier += [frame for _, frame in self.sock.events]
        self.sock = await reconnect(self.server, self.cookie, self.thread, after=self.last_seq)
        self.reconnects += 1

    async def wait_for(self, predicate, timeout: float = 90.0) -> dict[str, Any]:
        """The first event (data) matching `predicate`, reconnecting whenever the socket
        drops."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            await self.resume_if_closed()
            for frame in self.earlier:
                if predicate(frame):
                    return frame["data"]
            frame = await self._event_or_close(predicate, timeout=left)
            if frame is not None:
                return frame["data"]
        raise AssertionError(f"no matching event on thread {self.thread}: {self.events[-5:]}")

    async def _event_or_close(self, predicate, *, timeout: float) -> dict[str, Any] | None:
        """The socket's first event matching `predicate` (one it has, or the next); None
        when the socket closes first (a match that came with the close is then among
        `earlier` once resumed) or `timeout` passes."""
        found = asyncio.ensure_future(socket_event(self.sock, predicate, timeout=timeout))
        closed = asyncio.ensure_future(self.sock.closed.wait())
        try:
            await asyncio.wait({found, closed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closed.cancel()
            found.cancel()
        with contextlib.suppress(asyncio.CancelledError, WaitTimeout):
            return await found
        return None

    def sequence_problems(self) -> list[str]:
        """Gaps and duplicates in everything this member received (should be none).

        Arrival order is not checked: events committed by two processes a moment apart
        may cross Redis in the other order, and the chat client applies them by seq."""
        seqs = [frame["seq"] for frame in self.events]
        problems = [f"seq {seq} received twice" for seq in sorted(set(seqs)) if seqs.count(seq) > 1]
        if seqs:
            missing = set(range(self.first_after + 1, max(seqs) + 1)) - set(seqs)
            problems += [f"seq {seq} never received" for seq in sorted(missing)]
        return problems

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.sock.close()


def is_message(frame: dict[str, Any], *, role: str, status: str) -> bool:
    data = frame.get("data") or {}
    return (
        frame.get("kind") == "message" and data.get("role") == role and data.get("status") == status
    )


def is_call(frame: dict[str, Any], *, tool: str, status: str) -> bool:
    data = frame.get("data") or {}
    return (
        frame.get("kind") == "toolcall"
        and data.get("tool") == tool
        and data.get("status") == status
    )
