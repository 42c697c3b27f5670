"""Deciding an approval, from every door (a member's socket, the text channel, the admin).

``approval_decide`` is the one path: the authority records the decision (audited, with any
allowance it remembers), the frozen call is re-decided with the approval and runs — or ends
rejected through ``tool_call_reject`` — and the other requests a new allowance covers are
settled the same way. ``approval_decide_blocking`` drives it from sync code (the admin).
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync
from channels.db import database_sync_to_async
from django.db import transaction
from django.utils import timezone

from bindings.models import ApprovalRequest
from bindings.services.approvals import approval_record_decision, covered_pending_approvals
from bindings.services.authorize import ApprovalReplay, Requester, approval_replay_authorize
from bindings.services.errors import BindingError
from chat.calls import runtime
from chat.calls.emit import call_emit
from chat.calls.finish import tool_call_reject
from chat.calls.requests import ACTION_FOR_ORIGIN, task_key
from chat.calls.run import tool_call_run
from chat.models import Membership, ToolCall, ToolCallStatus
from mcp_bridge import gateway

# How long a sync caller outside a server loop (tests, a WSGI deployment) waits for the
# approved call to finish before its private loop ends.
APPROVAL_RUN_TIMEOUT = 120.0


def _role_of(user: Any, workspace_id: int) -> str | None:
    membership = Membership.objects.filter(user=user, workspace_id=workspace_id).first()
    return membership.role if membership else None


def _approval_outcome(
    *,
    approval_id: int,
    decider: Any,
    role: str | None,
    approve: bool,
    remember: str = "",
    reason: str = "",
    actor_label: str = "",
) -> tuple[ToolCall | None, bool]:
    """Record the decision; for an approval, re-decide the frozen call and mark it running.
    Returns the call (None: the request had none) and whether it is to run now."""
    approval = approval_record_decision(
        approval_id=approval_id,
        decider=decider,
        role=role,
        approve=approve,
        remember=remember,
        reason=reason,
        actor_label=actor_label,
    )
    if approval.tool_call_id is None:
        return None, False
    call = ToolCall.objects.select_related("thread", "server", "parent_view").get(
        pk=approval.tool_call_id
    )
    if not approve:
        rejected = tool_call_reject(
            call_id=call.pk,
            code="approval_rejected",
            message=f"{decider.get_username()} rejected this call.",
        )
        return rejected or call, False
    with transaction.atomic():
        requester_role = (
            _role_of(call.requested_by, call.thread.workspace_id) if call.requested_by else role
        )
        # Re-decide with the approval: a binding disabled meanwhile still wins.
        auth = approval_replay_authorize(
            ApprovalReplay(
                requester=Requester(call.origin, call.requested_by, requester_role, call.thread),
                action_kind=ACTION_FOR_ORIGIN[call.origin],
                server=call.server,  # just read: a disabled server runs nothing
                tool_name=call.tool_name,
                arguments=approval.arguments,
                view=call.parent_view,
                approved_by_id=approval.decided_by_id,  # a personal grant needs its owner's
                approval_id=approval.pk,
            )
        )
        if not auth.allowed:
            rejected = tool_call_reject(
                call_id=call.pk,
                code=str(auth.decision.reason_code),
                message=auth.decision.message,
            )
            return rejected or call, False
        call.arguments = approval.arguments  # exactly what was shown is what runs
        call.status = ToolCallStatus.RUNNING
        call.started_at = timezone.now()
        call.save(update_fields=["arguments", "status", "started_at"])
        call_emit(call, reread=True)
    return call, True


def _settle_covered(
    *, approval_id: int, scope: str, decider: Any, role: str | None
) -> list[ToolCall]:
    """Approve, on the strength of the allowance just granted, the other pending requests
    it covers (a polling view asks again every few seconds while the first card waits).
    Each is decided and re-authorized like any approval. Returns the calls to run."""
    approval = ApprovalRequest.objects.select_related("binding").get(pk=approval_id)
    runnable = []
    covered = covered_pending_approvals(approval=approval, scope=scope, granter=decider)
    for other_id in covered:
        try:
            call, run = _approval_outcome(
                approval_id=other_id,
                decider=decider,
                role=role,
                approve=True,
                reason=f"allowed_in_{scope}",
            )
        except BindingError:
            continue  # decided meanwhile by someone else, or expired
        if run and call is not None:
            runnable.append(call)
    return runnable


async def approval_decide(
    *,
    approval_id: int,
    decider: Any,
    role: str | None,
    approve: bool,
    remember: str = "",
    actor_label: str = "",
) -> ToolCall | None:
    """Decide an approval; ``remember`` ("thread" / "workspace") also allows the tool at
    that scope (see ``bindings.services.approvals.approval_record_decision``) and settles what it
    covers. Returns the request's call (None: it had none); an approved call runs."""
    call, run = await database_sync_to_async(_approval_outcome)(
        approval_id=approval_id,
        decider=decider,
        role=role,
        approve=approve,
        remember=remember,
        actor_label=actor_label,
    )
    if run and call is not None:
        runtime.spawn(task_key(call.pk), tool_call_run(call.pk))
    if remember:
        for other in await database_sync_to_async(_settle_covered)(
            approval_id=approval_id, scope=remember, decider=decider, role=role
        ):
            runtime.spawn(task_key(other.pk), tool_call_run(other.pk))
    return call


def _under_server_loop() -> bool:
    """True when this sync code runs inside an ASGI server's event loop (uvicorn)."""
    loop = getattr(SyncToAsync.threadlocal, "main_event_loop", None)
    return loop is not None and loop.is_running()


async def _decide_and_settle(*, settle: bool, **decision: Any) -> ToolCall | None:
    """``approval_decide`` for a sync caller.

    - Under a server loop (``settle=False``), the approved call outlives this request: it
      starts in a fresh context, because a task inherits the context it is created in, and
      this request's context names its thread-sensitive executor, which ends with the
      request (the call's later database steps would then fail).
    - Outside one (tests, a WSGI deployment, ``settle=True``), the loop is private and ends
      with this request: wait for the call to finish (it would be cancelled otherwise) and
      close this loop's MCP connections.
    """
    decide = approval_decide(**decision)
    if not settle:
        loop = asyncio.get_running_loop()
        return await loop.create_task(decide, context=contextvars.Context())
    call = await decide
    try:
        if call is not None:
            key = task_key(call.pk)
            pending = [t for t in asyncio.all_tasks() if t.get_name() == key and not t.done()]
            if pending:
                await asyncio.wait(pending, timeout=APPROVAL_RUN_TIMEOUT)
    finally:
        await gateway.close_all()
    if call is None:
        return None
    return await database_sync_to_async(ToolCall.objects.get)(pk=call.pk)


def approval_decide_blocking(
    *,
    approval_id: int,
    decider: Any,
    role: str | None,
    approve: bool,
    remember: str = "",
    actor_label: str = "",
) -> ToolCall | None:
    """``approval_decide`` from sync code (the admin): the same decision, audit and run."""
    return async_to_sync(_decide_and_settle)(
        settle=not _under_server_loop(),
        approval_id=approval_id,
        decider=decider,
        role=role,
        approve=approve,
        remember=remember,
        actor_label=actor_label,
    )
