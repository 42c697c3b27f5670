"""Running tool calls whose process died (chat.calls.runners): claimed while they run,
failed by the beat sweep once nobody renewed the claim — audited, seen by every member."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEvent
from chat import tasks
from chat.calls import runners
from chat.models import ThreadEvent, ToolCall, ToolCallStatus
from mcp_bridge.services.servers import server_add
from tests.conftest import ROOT_DIR
from tests.waiting import apoll

pytestmark = pytest.mark.django_db


@pytest.fixture
def running_call(personas):
    server = server_add(
        name="Faulty",
        slug="faulty",
        transport="stdio",
        command=sys.executable,
        args=[str(ROOT_DIR / "tests" / "fixtures" / "mcp_servers" / "faulty.py")],
    )

    def make(*, seen_ago: float | None, started_ago: float = 0.0) -> ToolCall:
        now = timezone.now()
        return ToolCall.objects.create(
            thread=personas.thread,
            server=server,
            tool_name="slow",
            origin="user",
            requested_by=personas.owner,
            status=ToolCallStatus.RUNNING,
            started_at=now - timedelta(seconds=started_ago),
            runner="host:4242:abcd" if seen_ago is not None else "",
            runner_seen_at=now - timedelta(seconds=seen_ago) if seen_ago is not None else None,
        )

    return make


def test_a_call_nobody_renewed_is_failed_audited_and_announced(running_call):
    ttl = runners.RUNNER_TTL.total_seconds()
    dead = running_call(seen_ago=ttl + 5, started_ago=600)
    never_claimed = running_call(seen_ago=None, started_ago=ttl + 5)
    alive = running_call(seen_ago=1, started_ago=600)  # long call, renewed a second ago
    young = running_call(seen_ago=None, started_ago=0.5)  # not claimed yet: too early

    assert tasks.fail_orphaned_tool_calls() == 2

    for call in (dead, never_claimed):
        call.refresh_from_db()
        assert call.status == ToolCallStatus.ERROR
        assert call.error["code"] == "runner_lost"
        audit = AuditEvent.objects.get(extra__tool_call_id=call.pk)
        assert (audit.decision, audit.reason) == ("failed", "runner_lost")
        assert ThreadEvent.objects.filter(
            thread=call.thread, kind="toolcall", payload__id=call.pk, payload__status="error"
        ).exists()
    for call in (alive, young):
        call.refresh_from_db()
        assert call.status == ToolCallStatus.RUNNING
    # Idempotent: a second sweep finds nothing more.
    assert tasks.fail_orphaned_tool_calls() == 0


@pytest.mark.django_db(transaction=True)  # the claim is written from the database thread
def test_the_running_process_claims_its_call_and_stops_when_it_ends(running_call, monkeypatch):
    monkeypatch.setattr(runners, "CLAIM_AFTER", 0.0)
    call = running_call(seen_ago=None)

    async def run_briefly() -> None:
        async with runners.claimed_while_running(call.pk):
            await apoll(
                lambda: asyncio.to_thread(_claimed, call.pk),
                reason="the call row (a claim sends no event)",
            )

    asyncio.run(asyncio.wait_for(run_briefly(), 10))
    call.refresh_from_db()
    assert call.runner == runners.HOLDER
    ToolCall.objects.filter(pk=call.pk).update(status=ToolCallStatus.SUCCESS)
    assert runners.tool_call_claim_runner(call_id=call.pk) is False  # ended: no claim


def _claimed(call_id: int) -> bool:
    return ToolCall.objects.filter(pk=call_id).exclude(runner="").exists()
