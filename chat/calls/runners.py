"""Which process runs a tool call, and whether it is still alive (DESIGN §1, N web processes).

A call runs inside the process that started it (``chat.calls.run.tool_call_run``). While it runs
longer than :data:`CLAIM_AFTER`, that process writes its name (the turn lease's
``HOLDER``) and the time into the call row, again every :data:`RENEW_EVERY`. A ``running``
call nobody renewed for :data:`RUNNER_TTL` has lost its process (SIGKILL, OOM, a machine
gone): the beat sweep ``chat.tasks.fail_orphaned_tool_calls`` fails it, audited, and every
member sees it end (``chat.calls.finish.tool_call_fail_orphaned``). Quick calls never write
here: they end before the first claim.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

from channels.db import database_sync_to_async
from django.db.models import QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from chat.models import ToolCall, ToolCallStatus
from chat.services.turn_lease import HOLDER

log = logging.getLogger(__name__)

CLAIM_AFTER = 1.0  # seconds a call runs before its process claims it
RENEW_EVERY = 10.0  # seconds; well inside RUNNER_TTL
RUNNER_TTL = timedelta(seconds=30)


def tool_call_claim_runner(*, call_id: int, runner: str = HOLDER) -> bool:
    """Record that ``runner`` still runs the call; False once the call has ended."""
    return (
        ToolCall.objects.filter(pk=call_id, status=ToolCallStatus.RUNNING).update(
            runner=runner, runner_seen_at=timezone.now()
        )
        == 1
    )


_claim = database_sync_to_async(tool_call_claim_runner)


async def _keep_claiming(call_id: int) -> None:
    while True:
        try:
            if not await _claim(call_id=call_id):
                return
        except Exception:  # a database hiccup must not end the call; the next renewal tries
            log.warning("could not renew the runner of tool call %s", call_id, exc_info=True)
        await asyncio.sleep(RENEW_EVERY)


@contextlib.asynccontextmanager
async def claimed_while_running(call_id: int) -> AsyncIterator[None]:
    """Around a call's execution: this process renews its claim on the call.

    A timer until the first claim, not a task: nearly every call ends before it, and then
    costs no task to start and no cancellation to deliver (issue 28)."""
    loop = asyncio.get_running_loop()
    claiming: asyncio.Task[None] | None = None

    def start() -> None:
        nonlocal claiming
        claiming = loop.create_task(_keep_claiming(call_id))

    timer = loop.call_later(CLAIM_AFTER, start)
    try:
        yield
    finally:
        timer.cancel()
        if claiming is not None:
            claiming.cancel()


def orphaned_running_calls(*, now: datetime | None = None) -> QuerySet[ToolCall]:
    """Running calls whose process has not renewed its claim for RUNNER_TTL (a call never
    claimed counts from when it started)."""
    now = now or timezone.now()
    return ToolCall.objects.annotate(
        last_sign_of_life=Coalesce("runner_seen_at", "started_at", "created_at")
    ).filter(
        status=ToolCallStatus.RUNNING,
        last_sign_of_life__lt=now - RUNNER_TTL,
        task_status="",  # a task call's poller is watched by its own sweep (mcp_tasks)
    )
