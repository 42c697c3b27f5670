"""The wait helper itself: it returns on the event, and fails with its reason when the
event does not come."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from tests.waiting import OutputWatch, WaitTimeout, apoll, frames_until, next_frame, poll


def test_poll_returns_the_first_truthy_value_and_fails_with_its_reason():
    values = iter([0, None, "", "ready"])
    assert poll(lambda: next(values), reason="a counter", interval=0) == "ready"
    with pytest.raises(WaitTimeout, match=r"polled: the file appears"):
        poll(lambda: False, reason="the file appears", timeout=0.05, interval=0.01)


async def test_apoll_awaits_coroutine_checks():
    calls = []

    async def check() -> bool:
        calls.append(1)
        return len(calls) >= 3

    assert await apoll(check, reason="three calls", interval=0) is True
    with pytest.raises(WaitTimeout, match="never"):
        await apoll(lambda: None, reason="never", timeout=0.05, interval=0.01)


class FakeSocket:
    """A communicator whose frames arrive from a queue (receive_json_from's contract)."""

    def __init__(self, *frames: dict) -> None:
        self.queue: asyncio.Queue[dict] = asyncio.Queue()
        for frame in frames:
            self.queue.put_nowait(frame)

    async def receive_json_from(self, timeout: float) -> dict:
        try:
            return await asyncio.wait_for(self.queue.get(), timeout)
        except TimeoutError as exc:
            raise TimeoutError from exc


async def test_next_frame_skips_to_the_match_and_frames_until_keeps_what_came_before():
    sock = FakeSocket({"n": 1}, {"n": 2}, {"type": "pong"}, {"n": 3})
    seen = await frames_until(sock, lambda f: f.get("type") == "pong")
    assert seen == [{"n": 1}, {"n": 2}, {"type": "pong"}]
    assert await next_frame(sock, lambda f: f.get("n") == 3) == {"n": 3}
    with pytest.raises(WaitTimeout, match="no matching frame"):
        await next_frame(sock, lambda f: True, timeout=0.05)


def _child(code: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-u", "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


def test_output_watch_returns_the_line_and_fails_fast_when_the_process_ends():
    # The child stays up after its line (a server would): the wait must not need its exit.
    ready = _child("import time; print('starting'); print('Listening on 8000'); time.sleep(60)")
    watch = OutputWatch(ready)
    try:
        assert watch.wait_for(r"Listening on \d+", timeout=20) == "Listening on 8000"
        assert "starting" in watch.text()
    finally:
        ready.kill()
        ready.wait()

    ended = OutputWatch(_child("print('bye')"))
    with pytest.raises(WaitTimeout, match="ended without"):
        ended.wait_for("never printed", timeout=20)
    assert ended.closed_text() == "bye"
