"""A server request as clients render it: one payload, live and after reload, with its text
form for clients without interactive UI (never a form's values: they are not stored)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from .models import ServerRequest, ServerRequestKind
from .schema import SchemaRefused, form_fields


def _user(user: Any) -> dict[str, Any] | None:
    if user is None:
        return None
    return {"id": user.pk, "name": user.get_full_name() or user.get_username()}


def url_domain(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def _fields(row: ServerRequest) -> list[dict[str, Any]]:
    try:
        return form_fields(row.params.get("requestedSchema"))
    except SchemaRefused:
        return []


def _describe(field: dict[str, Any]) -> str:
    kind = field["type"]
    if kind in ("enum", "multi"):
        choices = ", ".join(o["title"] for o in field["options"][:20])
        what = ("one of: " if kind == "enum" else "any of: ") + choices
    elif kind == "string":
        what = field.get("format") or "text"
    else:
        what = {"integer": "a whole number", "number": "a number", "boolean": "yes/no"}[kind]
    extra = " (required)" if field["required"] else ""
    if "default" in field:
        extra += f" [default: {field['default']}]"
    return f"- {field['title']}: {what}{extra}"


def text_form(row: ServerRequest, payload: dict[str, Any]) -> str:
    """The request as plain text (text clients and the fallback)."""
    server = row.server.name
    who = (payload.get("forUser") or {}).get("name") or "the person this call runs for"
    status = row.status
    if row.requester == "app_view":  # issue 27: the app's view asks, not its server
        server = f"The {server} app (its view in this thread)"
    if row.kind == ServerRequestKind.VIEW_TOOL:
        tool = payload["viewTool"] or {}
        head = f"The model wants to run {tool.get('name')} in the {row.server.name} view."
    elif row.kind == ServerRequestKind.SAMPLING:
        head = f"{server} asks to use this workspace's model (up to {payload['sampling']['maxTokens']} tokens)."
    elif row.kind == ServerRequestKind.ELICITATION_URL:
        head = (
            f"{server} asks {who} to open a web page on {payload['domain'] or 'an unknown site'}:"
            f" {payload['url']}"
        )
    else:
        head = f"{server} asks {who}: {payload['message']}"
    lines = [head]
    if row.kind == ServerRequestKind.ELICITATION_URL and payload["message"]:
        lines.append(payload["message"])
    if row.kind == ServerRequestKind.ELICITATION_FORM:
        lines.extend(_describe(f) for f in payload["fields"])
    if status == "pending":
        lines.append(f"Waiting for {who} to answer.")
    else:
        lines.append(f"Status: {status}.")
    return "\n".join(lines)


def serialize_server_request(row: ServerRequest) -> dict[str, Any]:
    params = row.params or {}
    call = row.tool_call
    payload: dict[str, Any] = {
        "id": row.pk,
        "kind": row.kind,
        "status": row.status,
        "toolCallId": row.tool_call_id,
        "parentView": call.parent_view_id if call is not None else None,
        "server": {"id": row.server.pk, "slug": row.server.slug, "name": row.server.name},
        "forUser": _user(row.for_user),
        "message": str(params.get("message") or "")[:4000],
        "fields": [],
        "url": None,
        "domain": None,
        "sampling": None,
        "retriesCall": row.retries_call,
        "requester": row.requester,
        "viewTool": None,
        "createdAt": row.created_at.isoformat(),
        "expiresAt": row.expires_at.isoformat(),
        "decidedAt": row.decided_at.isoformat() if row.decided_at else None,
        "decidedBy": _user(row.decided_by),
        "completedAt": row.completed_at.isoformat() if row.completed_at else None,
        "outcome": row.outcome or {},
    }
    if row.kind == ServerRequestKind.ELICITATION_FORM:
        payload["fields"] = _fields(row)
    elif row.kind == ServerRequestKind.ELICITATION_URL:
        url = str(params.get("url") or "")
        payload["url"] = url
        payload["domain"] = url_domain(url)
    elif row.kind == ServerRequestKind.VIEW_TOOL:
        payload["viewTool"] = {
            "name": str(params.get("name") or "")[:64],
            "title": str(params.get("title") or "")[:120],
            "arguments": params.get("arguments")
            if isinstance(params.get("arguments"), dict)
            else {},
            "risk": str(params.get("risk") or "")[:80],
        }
    else:
        payload["sampling"] = {
            "messages": params.get("messages") or [],
            "systemPrompt": params.get("systemPrompt") or "",
            "maxTokens": params.get("maxTokens"),
            "tools": [t.get("name") for t in params.get("tools") or [] if isinstance(t, dict)],
        }
    payload["text"] = text_form(row, payload)
    return payload
