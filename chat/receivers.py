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


def forget_grants_of_departed_member(*, instance: Any, **_: Any) -> None:
    """A member who leaves a workspace takes their own server sign-ins with them (audited);
    they connect again wherever they still are. Shared grants stay."""
    from mcp_bridge.services import grants_disconnect_member

    grants_disconnect_member(user_id=instance.user_id, reason="left_workspace")


def connect() -> None:
    from django.db.models.signals import post_delete

    from bindings.signals import approvals_cancelled

    from .models import Membership

    post_delete.connect(
        forget_grants_of_departed_member,
        sender=Membership,
        dispatch_uid="chat.forget_grants_of_departed_member",
    )

    approvals_cancelled.connect(
        close_calls_of_cancelled_approvals, dispatch_uid="chat.close_cancelled_approval_calls"
    )
