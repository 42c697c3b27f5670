"""Chat's side of the authority's signals (bindings never imports chat)."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_delete

from bindings.services.scopes import thread_bindings_delete, workspace_bindings_delete
from bindings.signals import allowances_changed, approvals_cancelled
from mcp_bridge.services.oauth_grants import grant_disconnect_member

from .calls.finish import tool_call_reject
from .models import Membership, Thread, Workspace
from .realtime.groups import user_group
from .services.workspaces import thread_allowances_announce


def close_calls_of_cancelled_approvals(
    *, tool_call_ids: list[int], code: str, message: str, **_: Any
) -> None:
    """Calls waiting on a cancelled or expired approval end as rejected; every member sees
    it and a view waiting on the call gets the refusal. Runs in the canceller's transaction."""
    for call_id in tool_call_ids:
        tool_call_reject(call_id=call_id, code=code, message=message)


def tell_threads_their_allowances(*, workspace_id: int, thread_id: int | None, **_: Any) -> None:
    """An allowance was granted or revoked: the members of the threads it applies to see
    their current list live. Runs in the granter's or revoker's transaction."""
    thread_allowances_announce(workspace_id=workspace_id, thread_id=thread_id)


def _end_sockets(user_id: int, session_key: str | None) -> None:
    """Ask every socket of a user to close (one session: `session_key`) or to re-check its
    session (None), once the change is committed."""

    def send() -> None:
        layer = get_channel_layer()
        if layer is not None:
            async_to_sync(layer.group_send)(
                user_group(user_id), {"type": "session.ended", "session_key": session_key}
            )

    transaction.on_commit(send)


def tell_sockets_membership_changed(*, instance: Membership, **_: Any) -> None:
    """A membership was saved or deleted (service, admin, a cascade, the shell): once that
    is committed, every socket of the user on the workspace's threads re-reads it, in every
    process (the channel layer's user group) — a removed member's sockets end, a re-roled
    member's sockets take the new role (``ThreadConsumer.membership_changed``)."""
    user_id, workspace_id = instance.user_id, instance.workspace_id

    def send() -> None:
        layer = get_channel_layer()
        if layer is not None:
            async_to_sync(layer.group_send)(
                user_group(user_id), {"type": "membership.changed", "workspace_id": workspace_id}
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
    grant_disconnect_member(user_id=instance.user_id, reason="left_workspace")


def delete_bindings_of_workspace(*, instance: Workspace, **_: Any) -> None:
    """Bindings keep a workspace's id, not a foreign key: its bindings, approvals and
    allowances go with it, in the deleting transaction (admin, service or shell)."""
    workspace_bindings_delete(workspace_id=instance.pk)


def delete_bindings_of_thread(*, instance: Thread, **_: Any) -> None:
    """The same for a thread: its own bindings, its approvals and its allowances."""
    thread_bindings_delete(thread_id=instance.pk)


def connect() -> None:
    allowances_changed.connect(
        tell_threads_their_allowances, dispatch_uid="chat.tell_threads_their_allowances"
    )
    user_logged_out.connect(end_sockets_on_logout, dispatch_uid="chat.end_sockets_on_logout")
    post_save.connect(
        recheck_sockets_on_account_change,
        sender=get_user_model(),
        dispatch_uid="chat.recheck_sockets_on_account_change",
    )
    post_save.connect(
        tell_sockets_membership_changed,
        sender=Membership,
        dispatch_uid="chat.tell_sockets_membership_saved",
    )
    post_delete.connect(
        tell_sockets_membership_changed,
        sender=Membership,
        dispatch_uid="chat.tell_sockets_membership_deleted",
    )
    post_delete.connect(
        forget_grants_of_departed_member,
        sender=Membership,
        dispatch_uid="chat.forget_grants_of_departed_member",
    )
    approvals_cancelled.connect(
        close_calls_of_cancelled_approvals, dispatch_uid="chat.close_cancelled_approval_calls"
    )
    pre_delete.connect(
        delete_bindings_of_workspace, sender=Workspace, dispatch_uid="chat.delete_ws_bindings"
    )
    pre_delete.connect(
        delete_bindings_of_thread, sender=Thread, dispatch_uid="chat.delete_thread_bindings"
    )
