"""Chat's side of the authority's signals (bindings never imports chat)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from .events import emit
from .models import ToolCall, ToolCallStatus
from .presenters import serialize_tool_call
from .selectors import tool_calls_queryset


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


def connect() -> None:
    from bindings.signals import approvals_cancelled

    approvals_cancelled.connect(
        close_calls_of_cancelled_approvals, dispatch_uid="chat.close_cancelled_approval_calls"
    )
