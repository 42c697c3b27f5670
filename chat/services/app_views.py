"""What an app view changes in its thread: each decided by the authority (audited) and
written in the same transaction, broadcast on commit. The bridge (``chat.actions.app_views``)
parses and validates the view's request, then calls one of these."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from audit.types import AuditEventType, Decision
from audit.writer import record
from bindings import services as authority
from bindings.policy import ActionKind
from chat.app_view_bridge import effective_csp
from chat.models import Message, MessageRole, Thread, ToolCall
from chat.presenters import serialize_message, serialize_tool_call
from chat.selectors import tool_calls_queryset
from chat.thread_events import emit
from mcp_bridge.csp import CspResult


def app_view_authorize(
    *, view: ToolCall, user: Any, role: str | None, thread: Thread, kind: ActionKind, **kwargs: Any
) -> authority.Authorization:
    """Decide (and audit) one request of an app view, as the person it runs for."""
    return authority.action_authorize(
        action_kind=kind,
        actor_kind="app_view",
        user=user,
        role=role,
        thread=thread,
        server_id=kwargs.pop("server_id", view.server_id),
        view=view,
        server_enabled=view.server.enabled,  # read with this request
        **kwargs,
    )


def app_view_message_post(
    *, view: ToolCall, user: Any, role: str | None, thread: Thread, text: str, kind: ActionKind
) -> tuple[authority.Authorization, Message | None]:
    """A view's ``ui/message``: a user message in the thread, within the binding's rate."""
    since = timezone.now() - timedelta(minutes=1)
    message = None
    with transaction.atomic():
        # Count, then insert: concurrent requests of one view (two sockets, N processes)
        # take turns on the view's row, or each would count the same few (PostgreSQL).
        ToolCall.objects.select_for_update().filter(pk=view.pk).values_list("pk").first()
        recent = Message.objects.filter(via_tool_call=view, created_at__gte=since).count()
        auth = app_view_authorize(
            view=view,
            user=user,
            role=role,
            thread=thread,
            kind=kind,
            recent_ui_messages=recent,
            extra={"chars": len(text)},
        )
        if auth.allowed:
            message = Message.objects.create(
                thread=thread,
                role=MessageRole.USER,
                author=user,
                author_label=f"{view.server.name} (via view)",
                text=text,
                via_tool_call=view,
            )
            emit(thread_id=thread.pk, kind="message", payload=serialize_message(message))
    return auth, message


def app_view_model_context_set(
    *, view: ToolCall, user: Any, role: str | None, thread: Thread, context: dict[str, Any]
) -> authority.Authorization:
    """A view's ``ui/update-model-context``: last write wins, the next turn gets it."""
    with transaction.atomic():
        auth = app_view_authorize(
            view=view, user=user, role=role, thread=thread, kind=ActionKind.UI_UPDATE_MODEL_CONTEXT
        )
        if auth.allowed:
            ToolCall.objects.filter(pk=view.pk).update(
                model_context=context, model_context_updated_at=timezone.now()
            )
    return auth


def app_view_widget_state_set(
    *, view: ToolCall, user: Any, role: str | None, thread: Thread, state: Any
) -> authority.Authorization:
    """A view's widget state (Apps SDK ``setWidgetState``), shown to every member."""
    with transaction.atomic():
        auth = app_view_authorize(
            view=view, user=user, role=role, thread=thread, kind=ActionKind.WIDGET_STATE
        )
        if auth.allowed:
            ToolCall.objects.filter(pk=view.pk).update(widget_state=state)
            fresh = tool_calls_queryset().get(pk=view.pk)
            emit(thread_id=thread.pk, kind="toolcall", payload=serialize_tool_call(fresh))
    return auth


def app_view_open(
    *, call: ToolCall, user: Any, role: str | None, thread: Thread
) -> tuple[authority.Authorization, CspResult | None]:
    """A member opens a call's app view: the resource read is decided (audited) and, when
    allowed, the view's CSP is built; every domain it drops is audited too."""
    resource = call.ui_resource
    assert resource is not None
    with transaction.atomic():
        auth = authority.action_authorize(
            action_kind=ActionKind.RESOURCE_READ,
            actor_kind="user",
            user=user,
            role=role,
            thread=thread,
            server_id=call.server_id,
            extra={"view": call.pk, "uri": resource.uri, "opened": True},
        )
        csp = effective_csp(resource, call.binding) if auth.allowed else None
        for dropped in csp.dropped if csp else ():
            record(
                event_type=AuditEventType.CSP_DOMAIN_DROPPED,
                decision=Decision.DENIED,
                actor_kind="system",
                workspace_id=thread.workspace_id,
                thread_id=thread.pk,
                binding_id=call.binding_id,
                server_id=call.server_id,
                action="csp",
                reason=str(dropped.get("code") or "dropped")[:200],
                extra={**dropped, "uri": resource.uri},
            )
    return auth, csp


def app_view_token_rejected(*, user: Any, thread: Thread, reason: str) -> None:
    """Audit a view request whose token is invalid or not this person's in this thread."""
    record(
        event_type=AuditEventType.VIEW_TOKEN_REJECTED,
        decision=Decision.DENIED,
        actor_kind="app_view",
        actor_user_id=user.pk,
        workspace_id=thread.workspace_id,
        thread_id=thread.pk,
        action="view_request",
        reason=reason,
    )


def app_view_sandbox_refused(*, call: ToolCall, user_id: int | None, host: str) -> None:
    """Audit a view page asked for on another server's sandbox origin (whose views could
    otherwise reach this one's storage)."""
    with transaction.atomic():
        record(
            event_type=AuditEventType.SANDBOX_PAGE_REFUSED,
            decision=Decision.DENIED,
            actor_user_id=user_id,
            workspace_id=call.thread.workspace_id,
            thread_id=call.thread_id,
            binding_id=call.binding_id,
            server_id=call.server_id,
            action="sandbox_proxy",
            reason="wrong_server_origin",
            extra={"view": call.pk, "host": host[:200]},
        )
