"""Waiting in tests: on events, not on the clock (docs/testing.md).

Three ways to wait, in order of preference:

- ``next_frame`` / ``frames_until``: a websocket frame is the event (the server broadcasts
  every state change of a thread on commit).
- ``OutputWatch``: a child process's output lines are the event (`make run`'s "Press
  Ctrl-C to stop", a Celery worker's "ready.").
- ``poll`` / ``apoll``: a *bounded* poll, only for state that announces nothing to the
  test (another process's database, a file, a fake provider's counters, a process's
  exit). Every caller passes ``reason``: why no event exists; it is in the failure message.

Absence is never proven by waiting: send a later marker and wait for it, then check that
nothing else arrived before it (``frames_until``).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

T = TypeVar("T")

# A poll's step: short against the timeouts, long enough not to load a 2-core machine.
POLL_INTERVAL = 0.05


class WaitTimeout(AssertionError):
    """What a wait raises when its event did not come in time (a test failure)."""


def poll(
    check: Callable[[], T], *, reason: str, timeout: float = 10.0, interval: float = POLL_INTERVAL
) -> T:
    """``check()``'s first truthy value, checked until ``timeout`` (bounded poll)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"not within {timeout:g}s (polled: {reason})")
        time.sleep(interval)


async def apoll(
    check: Callable[[], T | Awaitable[T]],
    *,
    reason: str,
    timeout: float = 10.0,
    interval: float = POLL_INTERVAL,
) -> T:
    """The async ``poll``: ``check`` may be a plain function or a coroutine function."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"not within {timeout:g}s (polled: {reason})")
        await asyncio.sleep(interval)


# ---- websocket frames ---------------------------------------------------------------------------


async def next_frame(
    communicator: Any, predicate: Callable[[dict], bool], *, timeout: float = 15.0
) -> dict:
    """The next frame matching ``predicate`` (frames in between are dropped), within
    ``timeout`` seconds in all."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise WaitTimeout(f"no matching frame within {timeout:g}s")
        try:
            frame = await communicator.receive_json_from(timeout=left)
        except TimeoutError as exc:
            raise WaitTimeout(f"no matching frame within {timeout:g}s") from exc
        if predicate(frame):
            return frame


async def frames_until(
    communicator: Any, predicate: Callable[[dict], bool], *, timeout: float = 15.0
) -> list[dict]:
    """Every frame up to and including the first matching ``predicate``: to prove that
    something did *not* happen, make the server send a later marker and look at what came
    before it."""
    seen: list[dict] = []

    def collect(frame: dict) -> bool:
        seen.append(frame)
        return predicate(frame)

    await next_frame(communicator, collect, timeout=timeout)
    return seen


# ---- process output -----------------------------------------------------------------------------


class OutputWatch:
    """A child's output lines as events: a thread reads the pipe, copies every line to
    ``log`` (if given) and wakes the waiters. Start the process with ``stdout=PIPE,
    stderr=STDOUT`` and hand it over."""

    def __init__(self, process: subprocess.Popen, log: Path | None = None) -> None:
        assert process.stdout is not None, "start the process with stdout=subprocess.PIPE"
        self.process = process
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._closed = False
        self._log: IO[bytes] | None = open(log, "ab") if log else None  # noqa: SIM115
        self._reader = threading.Thread(target=self._read, args=(process.stdout,), daemon=True)
        self._reader.start()

    def _read(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            if self._log:
                self._log.write(raw)
                self._log.flush()
            with self._changed:
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        if self._log:
            self._log.close()

    def wait_for(
        self, pattern: str | re.Pattern[str] | Callable[[str], bool], *, timeout: float = 30.0
    ) -> str:
        """The first line (already seen or still to come) matching ``pattern``."""
        matches = _line_matcher(pattern)
        deadline = time.monotonic() + timeout
        checked = 0
        with self._changed:
            while True:
                for line in self.lines[checked:]:
                    if matches(line):
                        return line
                checked = len(self.lines)
                if self._closed:
                    tail = "\n".join(self.lines[-20:])
                    raise WaitTimeout(f"the process ended without {pattern!r}:\n{tail}")
                left = deadline - time.monotonic()
                if left <= 0:
                    tail = "\n".join(self.lines[-20:])
                    raise WaitTimeout(f"no line {pattern!r} within {timeout:g}s:\n{tail}")
                self._changed.wait(left)

    def text(self) -> str:
        """Every line so far."""
        with self._changed:
            return "\n".join(self.lines)

    def closed_text(self, *, timeout: float = 10.0) -> str:
        """Every line, once the process closed its output (it ended)."""
        self._reader.join(timeout)
        if self._reader.is_alive():
            raise WaitTimeout(f"the output stayed open after {timeout:g}s")
        return self.text()


def _line_matcher(pattern: str | re.Pattern[str] | Callable[[str], bool]) -> Callable[[str], bool]:
    if callable(pattern) and not isinstance(pattern, re.Pattern):
        return pattern
    compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
    return lambda line: compiled.search(line) is not None


def lines_of(path: Path) -> Iterator[str]:
    """The complete lines of a log file another process is writing."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return iter(())
    complete = text if text.endswith("\n") else text.rsplit("\n", 1)[0]
    return iter(complete.splitlines())


def wait_for_exit(process: subprocess.Popen, *, timeout: float = 30.0) -> int:
    """A child's exit code (``wait`` blocks on the kernel's notification, no poll)."""
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise WaitTimeout(f"process {process.pid} still running after {timeout:g}s") from exc


__all__ = [
    "POLL_INTERVAL",
    "OutputWatch",
    "WaitTimeout",
    "apoll",
    "frames_until",
    "lines_of",
    "next_frame",
    "poll",
    "wait_for_exit",
]


async def socket_event(
    sock: Any, predicate: Callable[[dict], bool], *, timeout: float = 20.0
) -> dict:
    """The first event frame of a ``bench.harness.Socket`` matching ``predicate``: one
    already received, or the next one its reader hands over (``on_event``)."""
    for _, frame in sock.events:
        if predicate(frame):
            return frame
    arrived: asyncio.Future[dict] = asyncio.get_running_loop().create_future()
    chained = sock.on_event

    def on_event(at: float, frame: dict) -> None:
        if chained is not None:
            chained(at, frame)
        if not arrived.done() and predicate(frame):
            arrived.set_result(frame)

    sock.on_event = on_event
    try:
        return await asyncio.wait_for(arrived, timeout)
    except TimeoutError as exc:
        raise WaitTimeout(f"no matching event within {timeout:g}s") from exc
    finally:
        sock.on_event = chained


def process_group_listing(leader: int) -> str:
    """``ps`` of a process group: evidence, taken before a stuck group is killed."""
    return subprocess.run(
        ["ps", "-o", "pid,ppid,stat,wchan:20,etime,args", "-g", str(leader)],
        capture_output=True,
        text=True,
    ).stdout


@contextlib.contextmanager
def default_sigint() -> Iterator[None]:
    """Children started inside take SIGINT as from a terminal, even when this test run was
    started with SIGINT ignored (a background job of a non-interactive shell, `nohup`):
    bash cannot trap a signal that was ignored when it started, so a script would never
    hear the test's Ctrl-C. A Python handler is reset to the default action by exec."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
