"""The payloads clients render: one function per object, used live and on reload alike.

A thread page embeds exactly what these functions return, and every event carries exactly
what they return, so a reload shows the same thing a live client saw (DESIGN §4).
"""

from __future__ import annotations

import copy
from typing import Any

from bindings import policy
from bindings.selectors import signs_in_members
from bindings.services.approvals import approval_offers
from mcp_bridge.normalize import text_fallback

from .markdown import render_markdown
from .media.presenters import message_attachments
from .models import Message, MessageStatus, ToolCall
from .server_context.presenters import message_resources

INTERACTIVE_UI = "interactiveToolUi"


def _user_payload(user: Any) -> dict[str, Any] | None:
    if user is None:
        return None
    name = user.get_full_name() or user.get_username()
    return {"id": user.pk, "name": name}


def serialize_message(message: Message) -> dict[str, Any]:
    streaming = message.status == MessageStatus.STREAMING
    return {
        "id": message.pk,
        "role": message.role,
        "author": _user_payload(message.author),
        "authorLabel": message.author_label,
        "text": message.text,
        # While streaming, clients show text; the final event carries the rendered HTML.
        "html": "" if streaming else render_markdown(message.text),
        "status": message.status,
        "viaToolCall": message.via_tool_call_id,
        "createdAt": message.created_at.isoformat(),
        "resources": message_resources(message),  # attached server resources (issue 25)
        "attachments": message_attachments(message),  # attached files (issue 26)
    }


_UNREAD = object()  # serialize_tool_call(approval=...) default: the call's own (read once)


def serialize_tool_call(call: ToolCall, *, approval: Any = _UNREAD) -> dict[str, Any]:
    """``approval``: the call's approval (or None), when the caller already holds it."""
    server = call.server
    view = None
    resource = call.ui_resource
    if resource is not None:
        view = {
            "uri": resource.uri,
            "flavor": resource.flavor,
            "contentHash": resource.content_hash,
            # Undeclared (stored as None) means a border: only an explicit false is none.
            "prefersBorder": (resource.meta or {}).get("prefersBorder") is not False,
        }
    if approval is _UNREAD:
        approval = getattr(call, "approval", None) if hasattr(call, "approval") else None
    return {
        "id": call.pk,
        "messageId": call.message_id,
        "server": {"id": server.pk, "slug": server.slug, "name": server.name},
        "tool": call.tool_name,
        "providerCallId": call.provider_call_id or None,
        "arguments": call.arguments,
        "status": call.status,
        "origin": call.origin,
        "requestedBy": _user_payload(call.requested_by),
        "parentView": call.parent_view_id,
        "result": call.result,
        "error": call.error,
        "progress": call.progress,
        "view": view,
        "textFallback": app_view_text_fallback(call.result, has_view=view is not None),
        "widgetState": call.widget_state,
        "displayMode": call.display_mode,
        "approval": _approval_payload(approval, call),
        "createdAt": call.created_at.isoformat(),
        "finishedAt": call.finished_at.isoformat() if call.finished_at else None,
        "latencyMs": call.latency_ms,
        "task": _task_payload(call),
    }


def _task_payload(call: ToolCall) -> dict[str, Any] | None:
    """A call run as an MCP task (chat.calls.mcp_tasks): its server-side status."""
    if not call.task_status:
        return None
    return {
        "id": call.task_id or None,
        "status": call.task_status,
        "statusMessage": call.task_status_message,
        "pollIntervalMs": call.task_poll_interval_ms,
        "ttlMs": call.task_ttl_ms,
    }


def app_view_text_fallback(result: Any, *, has_view: bool) -> str | None:
    """What the web client shows where an app view cannot be (a view that failed, no view
    host): the result's text fallback without the line for the view itself. None for a
    call without an app view or without a result yet: the browser computes no fallback."""
    if not isinstance(result, dict):
        return None
    found = result.get("parts")
    parts: list[Any] = found if isinstance(found, list) else []
    if not has_view and not any(isinstance(p, dict) and p.get("type") == "ui" for p in parts):
        return None
    without_views = [p for p in parts if not (isinstance(p, dict) and p.get("type") == "ui")]
    return text_fallback({**result, "parts": without_views})


def _only_approver(approval: Any, call: ToolCall) -> dict[str, Any] | None:
    """The one member who may approve a request that spends their own sign-in
    (``policy.grant_owner``), and why, for the card: everyone else may only reject it."""
    owner_id = policy.grant_owner(
        per_member_grants=signs_in_members(call.server),
        requested_by_kind=approval.requested_by_kind,
        requester_id=approval.requested_by_id,
    )
    if owner_id is None:
        return None
    owner = _user_payload(call.requested_by) if call.requested_by_id == owner_id else None
    name = owner["name"] if owner else "the member who asked"
    return {
        "id": owner_id,
        "name": name,
        "message": policy.personal_grant_message(owner_name=name, server_name=call.server.name),
    }


def _approval_payload(approval: Any, call: ToolCall) -> dict[str, Any] | None:
    if approval is None:
        return None
    offers: list[str] = []
    if approval.status == "pending":
        # What an owner may remember (members: "thread" only; the server re-checks).
        offers = list(approval_offers(approval, role="owner"))
    return {
        "id": approval.pk,
        "offers": offers,
        "status": approval.status,
        "risk": approval.risk,
        # What the card calls it: "not declared safe" for a tool that declares nothing.
        "riskLabel": policy.risk_label(approval.risk, approval.risk_source)
        if approval.risk
        else "",
        "riskSource": approval.risk_source or None,
        "asks": approval.asks,
        "onlyApprover": _only_approver(approval, call) if approval.status == "pending" else None,
        "requestedByKind": approval.requested_by_kind,
        "decidedBy": _user_payload(approval.decided_by),
        "decidedAt": approval.decided_at.isoformat() if approval.decided_at else None,
        "expiresAt": approval.expires_at.isoformat(),
        "reason": approval.reason,
    }


def serialize_allowance(allowance: Any) -> dict[str, Any]:
    """An active allowance as the thread's "Allowed in this thread" panel shows it."""
    server = allowance.binding.server
    return {
        "id": allowance.pk,
        "tool": allowance.tool_name,
        # The app's own tools as one allowance (policy.APP_TOOLS) reads as such.
        "label": (
            f"{server.name}'s own tools"
            if allowance.tool_name == policy.APP_TOOLS
            else allowance.tool_name
        ),
        "scope": allowance.scope,
        "server": {"id": server.pk, "slug": server.slug, "name": server.name},
        "grantedBy": _user_payload(allowance.granted_by),
        "createdAt": allowance.created_at.isoformat(),
        "approvalId": allowance.approval_id,
    }


def text_only_tool_call(payload: dict[str, Any]) -> dict[str, Any]:
    """The same tool call for a client without interactive UI: text fallback, no views."""

    slim = copy.copy(payload)
    slim["view"] = None
    slim["widgetState"] = None
    result = payload.get("result")
    if result:
        slim["result"] = {
            "parts": [{"type": "text", "text": text_fallback(result)}],
            "structured": None,
            "resources": [],
            "meta": result.get("meta"),
            "uiMeta": None,
        }
    return slim


def present_event(event: dict[str, Any], capabilities: set[str]) -> dict[str, Any]:
    """Shape one stored event for a client with the given capabilities."""
    if INTERACTIVE_UI in capabilities or event["kind"] != "toolcall":
        return event
    return {**event, "data": text_only_tool_call(event["data"])}
