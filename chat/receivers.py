"""Chat's side of the authority's signals (bindings never imports chat)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from .events import emit
from .models import Thread, ToolCall, ToolCallStatus
from .presenters import serialize_tool_call
from .selectors import thread_allowances, tool_calls_queryset


def close_calls_of_cancelled_approvals(
    *, tool_call_ids: list[int], code: str, message: str, **_: Any
) -> None:
    """Calls waiting on a cancelled approval end as rejected; every member sees it and a
    view waiting on the call gets the refusal. Runs in the canceller's transaction."""
    waiting = ToolCall.objects.filter(
        pk__in=tool_call_ids, status=ToolCallStatus.AWAITING_APPROVAL
    ).values_list("pk", "thread_id")
    for call_id, thread_id in list(waiting):
        ToolCall.objects.filter(pk=call_id).update(
            status=ToolCallStatus.REJECTED,
            error={"code": code, "message": message},
            finished_at=timezone.now(),
        )
        fresh = tool_calls_queryset().get(pk=call_id)
        emit(thread_id=thread_id, kind="toolcall", payload=serialize_tool_call(fresh))


def tell_threads_their_allowances(*, workspace_id: int, thread_id: int | None, **_: Any) -> None:
    """An allowance was granted or revoked: every member of the threads it applies to sees
    the thread's current list live (an ``allowances`` event, stored like every event, so a
    reconnecting client catches up). Runs in the granter's or revoker's transaction."""
    if thread_id is not None:
        thread_ids = [thread_id]
    else:
        thread_ids = list(
            Thread.objects.filter(workspace_id=workspace_id).values_list("pk", flat=True)
        )
    for pk in thread_ids:
        thread = Thread(pk=pk, workspace_id=workspace_id)
        emit(
            thread_id=pk,
            kind="allowances",
            payload={"allowances": thread_allowances(thread=thread)},
        )


def connect() -> None:
    from bindings.signals import allowances_changed, approvals_cancelled

    allowances_changed.connect(
        tell_threads_their_allowances, dispatch_uid="chat.tell_threads_their_allowances"
    )
    approvals_cancelled.connect(
        close_calls_of_cancelled_approvals, dispatch_uid="chat.close_cancelled_approval_calls"
    )
