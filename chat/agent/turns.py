"""Scheduling turns: one per thread at a time across processes (the thread's lease,
renewed while the turn runs), messages folded into the next turn or superseding the first
request, a member's Stop, and a turn's model steps (``run_turn``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async

from bindings.services.catalogues import thread_catalogues_ensure

from ..calls import runtime
from ..models import Membership, Message, MessageRole, MessageStatus, Role, Thread
from ..providers import config_for, provider_for
from ..providers.base import AssistantTurn, ProviderConfig, ProviderError, ProviderRequest
from ..providers.registry import DIRECT
from ..services import turn_lease, turns
from .context import load_context
from .steps import _notice, _StepOutput, _stopped_by
from .tools import _run_tools

log = logging.getLogger(__name__)

MAX_RESTARTS = 3  # superseded first requests of one turn (a flood of messages still ends)
ACTING_ROLES = {Role.OWNER, Role.MEMBER}


# ------------------------------------------------------------------------- entry point


async def start_turn(*, thread: Any, user: Any, role: str | None) -> None:
    """Start (or queue) a model turn for the thread; returns immediately."""
    if role not in ACTING_ROLES or user is None:
        return None
    config = await database_sync_to_async(_config_for_thread)(thread.pk)
    if config is None:
        return None
    if config.kind == DIRECT:  # no model: say so once per thread
        if thread.pk not in _told_no_model:
            await database_sync_to_async(turns.thread_note_model_missing)(
                thread_id=thread.pk, actor_user_id=getattr(user, "pk", None)
            )
            if len(_told_no_model) >= 10_000:
                _told_no_model.clear()
            _told_no_model.add(thread.pk)
        return None
    _request_turn(thread.pk, user, role)
    return None


# Threads this process already told that their workspace has no model (saves the lookup;
# the audit row decides across processes, see turns.thread_note_model_missing).
_told_no_model: set[int] = set()


def _config_for_thread(thread_id: int) -> ProviderConfig | None:
    thread = Thread.objects.select_related("workspace").filter(pk=thread_id).first()
    return config_for(thread.workspace) if thread is not None else None


@dataclass
class _Gate:
    task: asyncio.Task[Any] | None = None
    pending: tuple[Any, str] | None = None


_gates: dict[int, _Gate] = {}


def _request_turn(thread_id: int, user: Any, role: str) -> None:
    gate = _gates.get(thread_id)
    loop = asyncio.get_running_loop()
    if (
        gate is not None
        and gate.task is not None
        and not gate.task.done()
        and (gate.task.get_loop() is loop)
    ):
        gate.pending = (user, role)  # folded into the next turn
        return
    gate = _Gate()
    _gates[thread_id] = gate
    gate.task = runtime.spawn(f"agent:{thread_id}", _drive(thread_id, user, role, gate))


async def _drive(thread_id: int, user: Any, role: str, gate: _Gate) -> None:
    """Run turns while this process holds the thread's lease (see
    :mod:`chat.services.turn_lease`)."""
    try:
        token = await database_sync_to_async(turn_lease.turn_lease_acquire)(thread_id=thread_id)
        if token is None:
            return  # another turn (maybe in another process) folds our message in
        fence = turn_lease.current_fence.set((thread_id, token))
        renewer = asyncio.ensure_future(_renew_lease(thread_id, token))
        released = False
        try:
            while True:
                seen: int | None = None
                try:
                    seen = await run_turn(thread_id=thread_id, user=user, role=role)
                except turn_lease.LeaseLost:
                    log.warning("turn in thread %s lost its lease; stopping it", thread_id)
                    released = True
                    return
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("agent turn in thread %s failed", thread_id)
                    if not await _report_failed_turn(thread_id, user):
                        return
                if gate.pending is not None:
                    (user, role), gate.pending = gate.pending, None
                else:  # maybe folding a message posted through another process
                    user, role = await database_sync_to_async(_newest_poster)(thread_id, user, role)
                released = True
                if not await database_sync_to_async(turn_lease.turn_lease_release)(
                    thread_id=thread_id, token=token, seen=seen
                ):
                    return
                released = False  # a message arrived meanwhile: one more turn
        finally:
            renewer.cancel()
            turn_lease.current_fence.reset(fence)
            if not released:  # cancelled or failed hard: free the lease for the next message
                with contextlib.suppress(Exception):
                    await database_sync_to_async(turn_lease.turn_lease_release)(
                        thread_id=thread_id, token=token, seen=None
                    )
    finally:
        if _gates.get(thread_id) is gate:
            del _gates[thread_id]
            _stopped_by.pop(thread_id, None)


def _newest_poster(thread_id: int, user: Any, role: str) -> tuple[Any, str]:
    """The member who posted the newest message for the model (a folded turn acts for
    them), or ``(user, role)`` when that is still the one."""
    newest = (
        Message.objects.filter(thread_id=thread_id, role=MessageRole.USER, author__isnull=False)
        .exclude(text__startswith="/")
        .select_related("author")
        .order_by("-pk")
        .first()
    )
    if newest is None or newest.author_id is None or newest.author_id == getattr(user, "pk", None):
        return user, role
    membership = Membership.objects.filter(
        user_id=newest.author_id, workspace__threads=thread_id
    ).first()
    if membership is None or membership.role not in ACTING_ROLES:
        return user, role
    return newest.author, membership.role


async def _report_failed_turn(thread_id: int, user: Any) -> bool:
    try:
        await database_sync_to_async(turns.message_post_notice)(
            thread_id=thread_id,
            text="Something went wrong while the assistant was answering.",
            status=MessageStatus.ERROR,
            actor_user_id=getattr(user, "pk", None),
            reason="internal_error",
        )
    except Exception:  # the thread is gone, the database is down, or the lease was lost
        log.exception("could not report the failed turn in thread %s", thread_id)
        return False
    return True


async def _renew_lease(thread_id: int, token: int) -> None:
    """Heartbeat: keeps the lease while the turn runs (a dead process stops renewing)."""
    while True:
        await asyncio.sleep(turn_lease.RENEW_EVERY)
        try:
            held = await database_sync_to_async(turn_lease.turn_lease_renew)(
                thread_id=thread_id, token=token
            )
        except Exception:
            log.exception("could not renew the turn lease of thread %s", thread_id)
            continue
        if not held:
            log.warning("the turn lease of thread %s was taken over", thread_id)
            return


async def cancel_turn(*, thread_id: int, user_id: int | None) -> bool:
    """Stop the thread's running turn in this process (audited): the streaming answer ends,
    calls whose arguments were streaming end cancelled, a running call is cancelled on
    its server, and no folded turn follows. False when no turn runs here."""
    gate = _gates.get(thread_id)
    if gate is None or gate.task is None or gate.task.done():
        return False
    gate.pending = None
    _stopped_by[thread_id] = user_id
    await database_sync_to_async(turns.turn_record_cancelled)(thread_id=thread_id, user_id=user_id)
    gate.task.cancel()
    return True


def turn_running(thread_id: int) -> bool:
    """Whether this process runs a turn for the thread (the text channel waits on it)."""
    gate = _gates.get(thread_id)
    return gate is not None and gate.task is not None and not gate.task.done()


async def wait_idle(thread_id: int) -> None:
    while True:
        gate = _gates.get(thread_id)
        if gate is None or gate.task is None or gate.task.done():
            return
        await asyncio.wait({gate.task})  # never raises the turn's own outcome


# ------------------------------------------------------------------------------ a turn


async def run_turn(*, thread_id: int, user: Any, role: str) -> int:
    """One turn; returns the id of the newest user message it saw (0 when none).

    A message for the model stored before the turn's first output supersedes the model
    request in flight: it is dropped unread and the turn starts over from the thread as
    it is now, so messages posted together get one answer (at most ``MAX_RESTARTS``
    times; then the turn answers what it has and the next turn folds the rest in)."""
    restarts = 0
    while True:
        try:
            return await _run_turn(
                thread_id=thread_id, user=user, role=role, supersedable=restarts < MAX_RESTARTS
            )
        except turn_lease.Superseded:
            restarts += 1
            log.info("thread %s: a newer message arrived; restarting the request", thread_id)
            user, role = await database_sync_to_async(_newest_poster)(thread_id, user, role)


async def _run_turn(*, thread_id: int, user: Any, role: str, supersedable: bool) -> int:
    thread = await database_sync_to_async(Thread.objects.get)(pk=thread_id)
    await thread_catalogues_ensure(thread=thread)  # a server bound but never listed yet
    ctx = await database_sync_to_async(load_context)(thread_id=thread_id, user=user, role=role)
    if ctx.config.kind == DIRECT:
        return ctx.seen_message_id
    user_id = getattr(user, "pk", None)
    try:
        provider = provider_for(ctx.config)
    except ProviderError as exc:
        await _notice(
            thread_id,
            exc.message,
            user_id,
            f"provider_error:{exc.code}",
            status=MessageStatus.ERROR,
        )
        return ctx.seen_message_id
    conversation = list(ctx.history)
    used_ids = {
        use.id for item in conversation if isinstance(item, AssistantTurn) for use in item.tool_uses
    }
    for step in range(1, ctx.max_steps + 1):
        request = ProviderRequest(
            model=ctx.config.model, system=ctx.system, messages=conversation, tools=ctx.tools
        )
        output = _StepOutput(
            thread_id=thread_id,
            user_id=user_id,
            by_wire_name=ctx.by_wire_name,
            # Only the first request of a turn may be superseded: later ones follow output.
            supersede_after=ctx.seen_message_id if supersedable and step == 1 else None,
        )
        ok = await output.consume(provider.stream(request), step=step)
        if not ok or not output.completed:
            return ctx.seen_message_id  # an error was posted, or the model answered
        conversation.extend(await _run_tools(ctx, output, user=user, role=role, used_ids=used_ids))
    await _notice(
        thread_id,
        f"I stopped after {ctx.max_steps} model requests in a row (the limit set by "
        "ATRIUM_AGENT_MAX_STEPS). Ask me to continue if there is more to do.",
        user_id,
        "step_limit",
    )
    return ctx.seen_message_id
