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


def _end_sockets(user_id: int, session_key: str | None) -> None:
    """Ask every socket of a user to close (one session: `session_key`) or to re-check its
    session (None), once the change is committed."""
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer
    from django.db import transaction

    from .consumers import user_group

    def send() -> None:
        layer = get_channel_layer()
        if layer is not None:
            async_to_sync(layer.group_send)(
                user_group(user_id), {"type": "session.ended", "session_key": session_key}
            )

    transaction.on_commit(send)


def end_sockets_on_logout(*, request: Any, user: Any, **_: Any) -> None:
    if user is not None:
        session = getattr(request, "session", None)
        _end_sockets(user.pk, getattr(session, "session_key", None) or "")


def recheck_sockets_on_account_change(
    *, instance: Any, update_fields: Any = None, **_: Any
) -> None:
    """A password change or deactivation (admin, shell, service) ends the user's sockets."""
    if update_fields is not None and set(update_fields) <= {"last_login"}:
        return  # a login elsewhere changes nothing for open sockets
    _end_sockets(instance.pk, None)


def forget_grants_of_departed_member(*, instance: Any, **_: Any) -> None:
    """A member who leaves a workspace takes their own server sign-ins with them (audited);
    they connect again wherever they still are. Shared grants stay."""
    from mcp_bridge.services import grants_disconnect_member

    grants_disconnect_member(user_id=instance.user_id, reason="left_workspace")


def connect() -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.signals import user_logged_out
    from django.db.models.signals import post_delete, post_save

    from bindings.signals import allowances_changed, approvals_cancelled

    from .models import Membership

    allowances_changed.connect(
        tell_threads_their_allowances, dispatch_uid="chat.tell_threads_their_allowances"
    )
    user_logged_out.connect(end_sockets_on_logout, dispatch_uid="chat.end_sockets_on_logout")
    post_save.connect(
        recheck_sockets_on_account_change,
        sender=get_user_model(),
        dispatch_uid="chat.recheck_sockets_on_account_change",
    )
    post_delete.connect(
        forget_grants_of_departed_member,
        sender=Membership,
        dispatch_uid="chat.forget_grants_of_departed_member",
    )
    approvals_cancelled.connect(
        close_calls_of_cancelled_approvals, dispatch_uid="chat.close_cancelled_approval_calls"
    )
