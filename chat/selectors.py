"""Reads for chat: membership lookups and thread snapshots."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db.models import Q, QuerySet
from django.utils import timezone

from bindings.models import Allowance
from lean_rows import Above, Part, RowExists, select_together

from .models import Membership, Message, Thread, ToolCall, Workspace
from .presenters import serialize_allowance, serialize_message, serialize_tool_call
from .server_requests.selectors import thread_server_requests


def membership_for(*, user: Any, workspace_id: int) -> Membership | None:
    if user is None or not user.is_authenticated:
        return None
    return Membership.objects.filter(user=user, workspace_id=workspace_id).first()


def thread_with_membership(*, user: Any, thread_id: int) -> tuple[Thread, Membership] | None:
    """The thread and the user's membership of its workspace, or None for outsiders."""
    if user is None or not user.is_authenticated:
        return None
    thread = Thread.objects.select_related("workspace").filter(pk=thread_id).first()
    if thread is None:
        return None
    membership = membership_for(user=user, workspace_id=thread.workspace_id)
    if membership is None:
        return None
    return thread, membership


@dataclass(frozen=True)
class SessionPin:
    """What a socket was opened with: a session that must still exist, and the user's
    password hash and active flag as they were (a password change or deactivation ends
    every socket, as it ends every other session)."""

    user_id: int
    password: str
    session_key: str | None


_DB_SESSIONS = "django.contrib.sessions.backends.db"


def membership_read(*, membership_id: int, pin: SessionPin) -> Part:
    """The lean read of ``membership_for_session``, to run with others in one statement
    (``lean_rows.select_together``); ``membership_of`` finishes it."""
    checks = [RowExists(get_user_model(), id=pin.user_id, is_active=True, password=pin.password)]
    if settings.SESSION_ENGINE == _DB_SESSIONS:
        checks.append(
            RowExists(Session, session_key=pin.session_key or "", expire_date=Above(timezone.now()))
        )
    return Part(Membership, *checks, id=membership_id)


def membership_of(rows: list[Membership], pin: SessionPin) -> Membership | None:
    """The membership ``membership_read`` found, if the session still exists (a session
    store other than the database is asked here)."""
    if rows and settings.SESSION_ENGINE != _DB_SESSIONS:
        store = import_module(settings.SESSION_ENGINE).SessionStore
        if not (pin.session_key and store().exists(pin.session_key)):
            return None
    return rows[0] if rows else None


def membership_for_session(*, membership_id: int, pin: SessionPin) -> Membership | None:
    """The membership row, only while the user is active with the same password and the
    session still exists. One lean statement (lean_rows): sockets re-read it before every
    action."""
    (rows,) = select_together(membership_read(membership_id=membership_id, pin=pin))
    return membership_of(rows, pin)


def workspaces_for(*, user: Any) -> list[Workspace]:
    return list(Workspace.objects.filter(memberships__user=user).order_by("name"))


def threads_for(*, workspace: Workspace) -> list[Thread]:
    return list(workspace.threads.order_by("-updated_at")[:200])


def tool_calls_queryset() -> QuerySet[ToolCall]:
    # The view's document (`ui_resource.text`, 30-450 KB) is served by content hash and never
    # part of a payload: leave it in the database (it is still loaded if something asks).
    return (
        ToolCall.objects.select_related("server", "requested_by", "ui_resource")
        .defer("ui_resource__text")
        .with_approvals()
    )


def thread_allowances(*, thread: Thread) -> list[dict[str, Any]]:
    """The active allowances that apply to a thread: its own and its workspace's (under a
    workspace binding: a thread binding of the same server shadows those), oldest first."""

    rows = (
        Allowance.objects.filter(workspace_id=thread.workspace_id, revoked_at__isnull=True)
        .filter(Q(thread_id=thread.pk) | Q(thread_id__isnull=True, binding__thread_id__isnull=True))
        .select_related("binding__server", "granted_by")
        .order_by("created_at", "id")
    )
    return [serialize_allowance(row) for row in rows]


def thread_snapshot(*, thread: Thread) -> dict[str, Any]:
    """Everything a client needs to render the thread now, in the live payload shapes."""
    messages = list(
        Message.objects.filter(thread=thread)
        .select_related("author")
        .prefetch_related("server_resources__server")  # attachments (chat.server_context)
        .prefetch_related("attachments")  # attached files (chat.media)
        .order_by("id")
    )
    calls = list(tool_calls_queryset().filter(thread=thread).order_by("id"))
    return {
        "threadId": thread.pk,
        "lastSeq": thread.last_seq,
        "messages": [serialize_message(m) for m in messages],
        "toolCalls": [serialize_tool_call(c) for c in calls],
        "allowances": thread_allowances(thread=thread),
        "serverRequests": thread_server_requests(thread_id=thread.pk),  # cards survive a reload
    }


__all__ = [
    "membership_for",
    "thread_with_membership",
    "workspaces_for",
    "threads_for",
    "thread_allowances",
    "thread_snapshot",
    "tool_calls_queryset",
]
