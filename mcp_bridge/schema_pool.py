"""Argument validation that may be costly, in worker processes with a deadline (no Django).

A tool's ``inputSchema`` comes from its server. Most schemas are cheap and are checked on
the event loop (``schema.validates_inline``, decided when the catalogue is read); the
rest come here: a few long-lived worker processes, started on first use. A worker is a
fresh interpreter (``subprocess``, no fork) that imports only this module and
:mod:`mcp_bridge.schema` — no Django, no ``__main__``, no inherited database connection,
event loop or file descriptor but its one socket. Each check gets ``DEADLINE`` seconds; a
worker past it is killed (SIGKILL: it stops burning CPU at once) and replaced, and the
caller gets ``SchemaTooComplex``. The event loop only waits on the socket.

The pool is per process, shared by every event loop and thread of it (the web server's
loop, a test's loop, the blocking bridge's); a forked child (a Celery prefork worker)
starts a pool of its own. Workers are killed at exit; a worker whose parent vanished
reads end-of-file and exits.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import concurrent.futures
import contextlib
import json
import logging
import math
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

from .errors import InvalidArguments
from .schema import SchemaCheckFailed, SchemaTooComplex, validate_arguments

logger = logging.getLogger(__name__)

DEADLINE = 2.0  # seconds a check may take in a worker
START_TIMEOUT = 30.0  # seconds a new worker may take to import its modules
QUEUE_TIMEOUT = 10.0  # seconds a check may wait for a free worker
WORKERS = 2
WORKER_MEMORY_BYTES = 1 << 30  # address space of a worker (RLIMIT_AS)
WORKER_NICENESS = 10
CPU_BACKSTOP_SECONDS = 10  # CPU one check may use before the kernel ends its worker


# ---- the worker process -------------------------------------------------------------------


def serve(fd: int) -> None:  # pragma: no cover - runs in the worker process
    """A worker's loop on the socket ``fd``: JSON ``[arguments, schema, tool, CPU seconds]``
    in, ``["ok", warnings]`` / ``["invalid", problems]`` / ``["error", kind]`` out, until
    the socket closes. JSON both ways: neither side unpickles what the other sent."""
    conn = Connection(fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the server; it ends us
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)  # a burning check yields the core to the web process
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
    logging.disable(logging.WARNING)  # the parent logs the warnings it gets back
    conn.send_bytes(json.dumps(["ready", os.getpid()]).encode())
    while True:
        try:
            arguments, schema, tool, cpu_seconds = json.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return
        _limit_cpu(cpu_seconds)
        try:
            reply: tuple[str, Any] = ("ok", validate_arguments(arguments, schema, tool=tool))
        except InvalidArguments as exc:
            reply = ("invalid", exc.problems)
        except MemoryError:
            reply = ("error", "memory")
        except Exception as exc:  # the worker outlives whatever a schema provokes
            reply = ("error", type(exc).__name__)
        conn.send_bytes(json.dumps(reply).encode())


def _limit_cpu(seconds: int) -> None:  # pragma: no cover - runs in the worker process
    """Let this check use ``seconds`` more CPU seconds, then the kernel ends the worker
    (SIGXCPU): a backstop should the parent vanish while a check burns (the parent kills
    it at its deadline long before)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = math.ceil(usage.ru_utime + usage.ru_stime)
    _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = used + seconds
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


# ---- the parent's side --------------------------------------------------------------------


class _Worker:
    """One worker process and the parent's end of its socket."""

    def __init__(self, process: subprocess.Popen[bytes], conn: Connection) -> None:
        self.process = process
        self.conn = conn
        self.pid = process.pid

    @classmethod
    def start(cls) -> _Worker:
        """Start a worker and wait until it is ready (blocking: call from a thread).

        A fresh interpreter (no fork: nothing of this process is inherited but one socket
        and the import path) that imports this module, never ``__main__``."""
        parent_sock, child_sock = socket.socketpair()
        path = [entry or os.getcwd() for entry in sys.path]
        command = [
            sys.executable,
            "-c",
            "import sys; sys.path[:0] = sys.argv[2:]; "
            "from mcp_bridge.schema_pool import serve; serve(int(sys.argv[1]))",
            str(child_sock.fileno()),
            *path,
        ]
        try:
            process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                command, pass_fds=[child_sock.fileno()], stdin=subprocess.DEVNULL
            )
        finally:
            child_sock.close()
        worker = cls(process, Connection(parent_sock.detach()))
        try:
            if not worker.conn.poll(START_TIMEOUT):
                raise OSError("the schema checker did not start in time")
            worker.conn.recv_bytes()  # ["ready", pid]
        except BaseException:
            worker.kill()
            raise
        return worker

    def kill(self) -> None:
        """SIGKILL: a runaway check stops at once. Blocking (reaps the process)."""
        with contextlib.suppress(Exception):
            self.process.kill()
        with contextlib.suppress(Exception):
            self.conn.close()
        with contextlib.suppress(Exception):
            self.process.wait(5)


async def _readable(conn: Connection, timeout: float) -> bool:
    """Wait, without holding the event loop, until ``conn`` has data (or EOF)."""
    if conn.poll():
        return True
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    fd = conn.fileno()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await asyncio.wait_for(ready, timeout)
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(fd)
    return True


class SchemaPool:
    """Up to ``size`` workers, started when first needed; a check takes one for itself."""

    def __init__(
        self,
        *,
        size: int = WORKERS,
        deadline: float = DEADLINE,
        cpu_seconds: int = CPU_BACKSTOP_SECONDS,
    ) -> None:
        self.size = size
        self.deadline = deadline
        self.cpu_seconds = cpu_seconds
        self.killed: list[int] = []  # pids of workers killed past their deadline
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._slots = 0  # workers alive or being started
        self._waiters: collections.deque[concurrent.futures.Future[_Worker | None]] = (
            collections.deque()
        )

    # -- slots: a free worker, or the right to start one (None) --------------------------

    def _claim(self) -> concurrent.futures.Future[_Worker | None]:
        claim: concurrent.futures.Future[_Worker | None] = concurrent.futures.Future()
        with self._lock:
            if self._idle:
                claim.set_result(self._idle.pop())
            elif self._slots < self.size:
                self._slots += 1
                claim.set_result(None)
            else:
                self._waiters.append(claim)
        return claim

    def _release(self, worker: _Worker | None) -> None:
        """Give a worker back (None: its slot, after it died or was killed)."""
        with self._lock:
            if worker is not None:
                self._busy.discard(worker)
            while self._waiters:
                waiter = self._waiters.popleft()
                if waiter.set_running_or_notify_cancel():
                    waiter.set_result(worker)
                    return
            if worker is None:
                self._slots -= 1
            else:
                self._idle.append(worker)

    async def _take(self) -> _Worker:
        claim = self._claim()
        try:
            worker = await asyncio.wait_for(asyncio.wrap_future(claim), QUEUE_TIMEOUT)
        except TimeoutError:
            raise SchemaCheckFailed(
                "the tool's arguments could not be checked now: too many checks are waiting"
            ) from None
        except asyncio.CancelledError:
            if claim.done() and not claim.cancelled():
                self._release(claim.result())
            raise
        if worker is None:
            try:
                worker = await asyncio.to_thread(_Worker.start)
            except BaseException as exc:
                self._release(None)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                logger.exception("could not start a schema checker")
                raise SchemaCheckFailed(
                    "the tool's arguments could not be checked (the checker did not start)"
                ) from exc
        with self._lock:
            self._busy.add(worker)
        return worker

    async def _discard(self, worker: _Worker) -> None:
        """Kill a worker and start its replacement (in the background: the caller's
        answer does not wait for an interpreter to start)."""
        with self._lock:
            self._busy.discard(worker)
        await asyncio.to_thread(worker.kill)
        threading.Thread(target=self._replace, name="schema-check-start", daemon=True).start()

    def _replace(self) -> None:
        try:
            worker = _Worker.start()
        except Exception:
            logger.exception("could not start a schema checker")
            self._release(None)
        else:
            self._release(worker)

    # -- the check ------------------------------------------------------------------------

    async def validate(self, arguments: Any, schema: Any, *, tool: str | None = None) -> list[str]:
        """``validate_arguments`` in a worker, within the deadline. Raises
        ``InvalidArguments`` (bad arguments), ``SchemaTooComplex`` (past the deadline)
        or ``SchemaCheckFailed`` (no worker could do it); returns the schema warnings."""
        try:
            request = json.dumps([arguments, schema, tool, self.cpu_seconds], default=str)
        except (TypeError, ValueError, RecursionError):
            raise InvalidArguments(["arguments are nested too deeply"], tool=tool) from None
        worker = await self._take()
        try:
            worker.conn.send_bytes(request.encode())
            answered = await _readable(worker.conn, self.deadline)
            reply = json.loads(worker.conn.recv_bytes()) if answered else None
        except asyncio.CancelledError:
            await asyncio.shield(self._discard(worker))  # it may be busy for a while yet
            raise
        except (EOFError, OSError):
            reply = ["error", "worker stopped"]
        except BaseException:
            await self._discard(worker)
            raise
        if reply is None:
            if worker.pid is not None:
                self.killed.append(worker.pid)
            logger.warning("schema check of tool %r passed %ss: worker killed", tool, self.deadline)
            await self._discard(worker)
            raise SchemaTooComplex(tool=tool)
        status, detail = reply
        if status == "error":
            await self._discard(worker)
            if detail in ("memory", "worker stopped"):
                raise SchemaTooComplex(tool=tool)
            raise SchemaCheckFailed(f"the tool's arguments could not be checked ({detail})")
        self._release(worker)
        if status == "invalid":
            raise InvalidArguments(detail, tool=tool)
        for warning in detail:
            logger.warning("Skipping argument validation for tool %r: %s", tool, warning)
        return list(detail)

    def pids(self) -> list[int]:
        """Process ids of the workers alive now (idle or busy)."""
        with self._lock:
            return [w.pid for w in [*self._idle, *self._busy] if w.pid is not None]

    def close(self) -> None:
        """Kill every worker, idle or busy (at exit; a busy check then fails closed)."""
        with self._lock:
            workers = [*self._idle, *self._busy]
            self._slots -= len(self._idle)
            self._idle = []
        for worker in workers:
            worker.kill()


_pool: SchemaPool | None = None
_pool_lock = threading.Lock()


def pool() -> SchemaPool:
    """This process's pool (created on first use; workers start when a check needs one)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = SchemaPool()
        return _pool


def _forget_after_fork() -> None:
    """A forked child (Celery prefork) must not use its parent's workers' pipes."""
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


def _close_at_exit() -> None:
    if _pool is not None:
        _pool.close()


os.register_at_fork(after_in_child=_forget_after_fork)
atexit.register(_close_at_exit)


async def validate(arguments: Any, schema: Any, *, tool: str | None = None) -> list[str]:
    return await pool().validate(arguments, schema, tool=tool)
