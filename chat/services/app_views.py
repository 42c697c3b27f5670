"""What an app view changes in its thread: each decided by the authority (audited) and
written in the same transaction, broadcast on commit. The bridge (``chat.actions.app_views``)
parses and validates the view's request, then calls one of these."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from audit.models import AuditEvent
from audit.types import AuditEventType, Decision
from audit.writer import record
from bindings.policy import ActionKind
from bindings.ratelimit import refusal_gate
from bindings.services.allowances import view_messages_allowance_grant, view_messages_allowed
from bindings.services.authorize import (
    Authorization,
    Requester,
    ViewActionRequest,
    ViewOpening,
    view_action_authorize,
    view_open_authorize,
)
from bindings.services.csp_drops import csp_drops_record
from chat.app_view_bridge import MessageProposal, effective_csp, sign_message_proposal
from chat.models import Message, MessageRole, Thread, ToolCall
from chat.presenters import serialize_message, serialize_tool_call
from chat.providers import config_for
from chat.providers.registry import DIRECT
from chat.realtime.events import emit
from chat.selectors import tool_calls_queryset
from mcp_bridge.csp import CspResult


def app_view_authorize(
    *,
    view: ToolCall,
    user: Any,
    role: str | None,
    thread: Thread,
    kind: ActionKind,
    tool_name: str | None = None,
    url: str | None = None,
    display_mode: str | None = None,
    available_display_modes: tuple[str, ...] | None = None,
    recent_ui_messages: int = 0,
    extra: dict[str, Any] | None = None,
) -> Authorization:
    """Decide (and audit) one request of an app view, as the person it runs for."""
    return view_action_authorize(
        ViewActionRequest(
            requester=Requester("app_view", user, role, thread),
            action_kind=kind,
            view=view,
            tool_name=tool_name,
            url=url,
            display_mode=display_mode,
            available_display_modes=available_display_modes,
            recent_ui_messages=recent_ui_messages,
            extra=extra or {},
        )
    )


def _recent_view_messages(view: ToolCall) -> int:
    """The view's messages of the last minute (its rate), its row locked first: concurrent
    requests of one view (two sockets, N processes) take turns on it, or each would count
    the same few (PostgreSQL)."""
    ToolCall.objects.select_for_update().filter(pk=view.pk).values_list("pk").first()
    since = timezone.now() - timedelta(minutes=1)
    return Message.objects.filter(via_tool_call=view, created_at__gte=since).count()


def _post_view_message(*, view: ToolCall, user: Any, thread: Thread, text: str) -> Message:
    message = Message.objects.create(
        thread=thread,
        role=MessageRole.USER,
        author=user,
        author_label=f"{view.server.name} (via view)",
        text=text,
        via_tool_call=view,
    )
    emit(thread_id=thread.pk, kind="message", payload=serialize_message(message))
    return message


def app_view_message_post(
    *, view: ToolCall, user: Any, role: str | None, thread: Thread, text: str, kind: ActionKind
) -> tuple[Authorization, Message | None]:
    """A view's ``ui/message``: a user message in the thread, within the binding's rate."""
    message = None
    with transaction.atomic():
        recent = _recent_view_messages(view)
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
            message = _post_view_message(view=view, user=user, thread=thread, text=text)
    return auth, message


def app_view_message_needs_card(*, view: ToolCall, thread: Thread) -> bool:
    """F11: a view's ``ui/message`` that would start a model turn waits for its person's
    Send on a host card, unless a member ticked "Always allow <app> to send messages in
    this thread". A ``direct`` workspace has no turns: its message is posted at once,
    labelled with the app, as before (nothing acts on it without a person)."""
    if config_for(thread.workspace).kind == DIRECT:
        return False
    return not view_messages_allowed(binding_id=view.binding_id, thread=thread)


def app_view_message_propose(
    *, view: ToolCall, user: Any, role: str | None, thread: Thread, text: str, kind: ActionKind
) -> tuple[Authorization, dict[str, Any] | None]:
    """A view's ``ui/message`` that needs its card: decided (and audited, as asked) now,
    posted only when the member presses Send. Returns what the card shows: the frozen
    text and the signed proposal that Send answers with."""
    with transaction.atomic():
        recent = _recent_view_messages(view)
        auth = app_view_authorize(
            view=view,
            user=user,
            role=role,
            thread=thread,
            kind=kind,
            recent_ui_messages=recent,
            extra={"chars": len(text), "confirmation": "asked"},
        )
    if not auth.allowed:
        return auth, None
    proposal = MessageProposal(
        call_id=view.pk,
        user_id=user.pk,
        thread_id=thread.pk,
        server_id=view.server_id,
        kind=str(kind),
        text=text,
        nonce=secrets.token_urlsafe(12),
    )
    return auth, {
        "proposal": sign_message_proposal(proposal),
        "text": text,
        "appName": view.server.name,
        "canRemember": view.binding_id is not None and role in ("owner", "member"),
    }


@dataclass(frozen=True)
class MessageDecision:
    """What a card's Send or Dismiss did: ``outcome`` sent | dismissed | denied | spent."""

    outcome: str
    auth: Authorization | None = None
    message: Message | None = None


def _decision_record(
    event_type: AuditEventType,
    decision: Decision,
    *,
    proposal: MessageProposal,
    view: ToolCall,
    user: Any,
    thread: Thread,
    reason: str,
    **extra: Any,
) -> None:
    record(
        event_type=event_type,
        decision=decision,
        actor_kind="user",
        actor_user_id=user.pk,
        workspace_id=thread.workspace_id,
        thread_id=thread.pk,
        binding_id=view.binding_id,
        server_id=view.server_id,
        action="view_message",
        reason=reason,
        extra={"view": view.pk, "nonce": proposal.nonce, "chars": len(proposal.text), **extra},
    )


def app_view_message_decide(
    *,
    proposal: MessageProposal,
    view: ToolCall,
    user: Any,
    role: str | None,
    thread: Thread,
    send: bool,
    remember: bool = False,
) -> MessageDecision:
    """A member's Send or Dismiss on a view's message card. Send re-decides the request
    as this person now (role, rate, binding: audited) and posts exactly the card's frozen
    text; ``remember`` also allows the app's messages in this thread from now on. Each
    card is answered once."""
    with transaction.atomic():
        recent = _recent_view_messages(view)
        spent = AuditEvent.objects.filter(
            thread_id=thread.pk,
            event_type__in=(
                AuditEventType.VIEW_MESSAGE_SENT,
                AuditEventType.VIEW_MESSAGE_DISMISSED,
            ),
            extra__nonce=proposal.nonce,
        ).exists()
        common = {"proposal": proposal, "view": view, "user": user, "thread": thread}
        if spent:
            _decision_record(
                AuditEventType.VIEW_MESSAGE_REFUSED,
                Decision.DENIED,
                reason="already_answered",
                **common,
            )
            return MessageDecision("spent")
        if not send:
            _decision_record(
                AuditEventType.VIEW_MESSAGE_DISMISSED,
                Decision.REJECTED,
                reason="dismissed",
                **common,
            )
            return MessageDecision("dismissed")
        auth = app_view_authorize(
            view=view,
            user=user,
            role=role,
            thread=thread,
            kind=ActionKind(proposal.kind),
            recent_ui_messages=recent,
            extra={"chars": len(proposal.text), "confirmation": "sent"},
        )
        if not auth.allowed:
            return MessageDecision("denied", auth)
        if remember and view.binding_id is not None:
            view_messages_allowance_grant(
                binding_id=view.binding_id, thread=thread, granter=user, role=role
            )
        _decision_record(
            AuditEventType.VIEW_MESSAGE_SENT,
            Decision.APPROVED,
            reason="sent",
            remembered=bool(remember),
            **common,
        )
        message = _post_view_message(view=view, user=user, thread=thread, text=proposal.text)
    return MessageDecision("sent", auth, message)


def app_view_model_context_set(
    *, view: ToolCall, user: Any, role: str | None, thread: Thread, context: dict[str, Any]
) -> Authorization:
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
) -> Authorization:
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
) -> tuple[Authorization, CspResult | None]:
    """A member opens a call's app view: the resource read is decided (audited) and, when
    allowed, the view's CSP is built; every domain it drops is audited too."""
    resource = call.ui_resource
    assert resource is not None
    with transaction.atomic():
        auth = view_open_authorize(
            ViewOpening(
                requester=Requester("user", user, role, thread),
                server_id=call.server_id,
                view_id=call.pk,
                uri=resource.uri,
            )
        )
        csp = effective_csp(resource, call.binding) if auth.allowed else None
        if csp is not None:  # audited once per resource content and binding, not per open
            csp_drops_record(
                binding_id=call.binding_id,
                server_id=call.server_id,
                workspace_id=thread.workspace_id,
                thread_id=thread.pk,
                uri=resource.uri,
                content_hash=resource.content_hash,
                dropped=csp.dropped,
            )
    return auth, csp


def app_view_token_rejected(*, user: Any, thread: Thread, reason: str) -> None:
    """Audit a view request whose token is invalid or not this person's in this thread
    (at a bounded rate per person: `refusal_gate`)."""
    if (gate := refusal_gate(user=user)) is None:
        return
    record(
        event_type=AuditEventType.VIEW_TOKEN_REJECTED,
        decision=Decision.DENIED,
        actor_kind="app_view",
        actor_user_id=user.pk,
        workspace_id=thread.workspace_id,
        thread_id=thread.pk,
        action="view_request",
        reason=reason,
        extra=gate or None,
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
