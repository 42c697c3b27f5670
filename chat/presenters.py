"""The payloads clients render: one function per object, used live and on reload alike.

A thread page embeds exactly what these functions return, and every event carries exactly
what they return, so a reload shows the same thing a live client saw (DESIGN §4).
"""

from __future__ import annotations

import copy
from typing import Any

from .markdown import render_markdown
from .models import Message, MessageStatus, ToolCall

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
    }


def serialize_tool_call(call: ToolCall) -> dict[str, Any]:
    server = call.server
    view = None
    if call.ui_resource_id is not None:
        resource = call.ui_resource
        view = {
            "uri": resource.uri,
            "flavor": resource.flavor,
            "contentHash": resource.content_hash,
            # Undeclared (stored as None) means a border: only an explicit false is none.
            "prefersBorder": (resource.meta or {}).get("prefersBorder") is not False,
        }
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
        "widgetState": call.widget_state,
        "displayMode": call.display_mode,
        "approval": _approval_payload(approval),
        "createdAt": call.created_at.isoformat(),
        "finishedAt": call.finished_at.isoformat() if call.finished_at else None,
        "latencyMs": call.latency_ms,
    }


def _approval_payload(approval: Any) -> dict[str, Any] | None:
    if approval is None:
        return None
    return {
        "id": approval.pk,
        "status": approval.status,
        "risk": approval.risk,
        "requestedByKind": approval.requested_by_kind,
        "decidedBy": _user_payload(approval.decided_by),
        "decidedAt": approval.decided_at.isoformat() if approval.decided_at else None,
        "expiresAt": approval.expires_at.isoformat(),
        "reason": approval.reason,
    }


def text_only_tool_call(payload: dict[str, Any]) -> dict[str, Any]:
    """The same tool call for a client without interactive UI: text fallback, no views."""
    from mcp_bridge.normalize import text_fallback

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
