"""A quick call costs its runner claim nothing but a timer (issue 28; ``chat.calls.runners``).

Every call runs inside ``claimed_while_running``; nearly every call ends before the first
claim (``CLAIM_AFTER``). It used to start a task per call (and deliver its cancellation
afterwards); now a timer starts the claiming only once a call has run that long. The
claims themselves are unchanged: the first at ``CLAIM_AFTER``, then every ``RENEW_EVERY``,
none after the call ends (tests/chat/test_call_runners.py writes the real row).
"""

from __future__ import annotations

import asyncio

from chat.calls import runners
from tests.waiting import apoll


async def test_a_quick_call_starts_no_task(monkeypatch) -> None:
    claims: list[int] = []

    async def claim(*, call_id: int) -> bool:
        claims.append(call_id)
        return True

    monkeypatch.setattr(runners, "_claim", claim)
    before = len(asyncio.all_tasks())
    async with runners.claimed_while_running(41):
        await asyncio.sleep(0)
        assert len(asyncio.all_tasks()) == before
    assert len(asyncio.all_tasks()) == before
    assert claims == []


def _claiming() -> list[asyncio.Task]:
    return [
        task
        for task in asyncio.all_tasks()
        if getattr(task.get_coro(), "__qualname__", "") == "_keep_claiming"
    ]


async def test_a_long_call_is_claimed_and_renewed_until_it_ends(monkeypatch) -> None:
    claims: list[int] = []

    async def claim(*, call_id: int) -> bool:
        claims.append(call_id)
        return True

    monkeypatch.setattr(runners, "_claim", claim)
    monkeypatch.setattr(runners, "CLAIM_AFTER", 0.01)
    monkeypatch.setattr(runners, "RENEW_EVERY", 0.01)
    async with runners.claimed_while_running(42):
        await apoll(lambda: len(claims) >= 3, reason="the claim renewed")
        (claiming,) = _claiming()
    assert claiming.cancelling() or claiming.done()  # the call ended: no more renewals
    await asyncio.gather(claiming, return_exceptions=True)
    assert claiming.cancelled()
    assert set(claims) == {42}


async def test_the_claiming_stops_once_the_call_has_ended(monkeypatch) -> None:
    answers = iter([True, False])
    claims: list[int] = []

    async def claim(*, call_id: int) -> bool:
        claims.append(call_id)
        return next(answers)

    monkeypatch.setattr(runners, "_claim", claim)
    monkeypatch.setattr(runners, "CLAIM_AFTER", 0.0)
    monkeypatch.setattr(runners, "RENEW_EVERY", 0.01)
    async with runners.claimed_while_running(43):
        await apoll(lambda: not _claiming() and len(claims) == 2, reason="the claiming ended")
    assert claims == [43, 43]  # the row said the call ended: the second claim was the last
