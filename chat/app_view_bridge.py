"""Server side of app views: capability tokens, what a view is opened with, and the
CallToolResult a view receives (rebuilt from the stored canonical result)."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core import signing

from bindings.models import AppBinding
from lean_rows import Part, Same, select_together
from mcp_bridge.csp import (
    binding_allowed,
    build_csp,
    parse_permissions,
    permissions_allow_attribute,
)
from mcp_bridge.models import McpServer, UiResource
from mcp_bridge.normalize import describe_part

from .models import ToolCall

TOKEN_SALT = "atrium.view-token"
SUPPORTED_FLAVORS = {"mcp-app", "html", "url", "skybridge", "remote-dom"}


@dataclass(frozen=True)
class ViewToken:
    call_id: int
    user_id: int
    thread_id: int
    binding_id: int | None
    server_id: int


def sign_view_token(*, call: ToolCall, user_id: int) -> str:
    return signing.dumps(
        [call.pk, user_id, call.thread_id, call.binding_id, call.server_id],
        salt=TOKEN_SALT,
        compress=False,
    )


def read_view_token(token: Any) -> ViewToken | None:
    """The token's claims, or None when it is forged, malformed or expired."""
    if not isinstance(token, str) or len(token) > 500:
        return None
    try:
        values = signing.loads(token, salt=TOKEN_SALT, max_age=settings.ATRIUM_VIEW_TOKEN_MAX_AGE)
    except signing.BadSignature:
        return None
    if not (isinstance(values, list) and len(values) == 5):
        return None
    call_id, user_id, thread_id, binding_id, server_id = values
    if not all(isinstance(v, int) for v in (call_id, user_id, thread_id, server_id)):
        return None
    return ViewToken(call_id, user_id, thread_id, binding_id, server_id)


MESSAGE_PROPOSAL_SALT = "atrium.view-message-proposal"
MESSAGE_PROPOSAL_MAX_AGE = 60 * 60  # seconds a message card may wait for Send


@dataclass(frozen=True)
class MessageProposal:
    """A view's ``ui/message`` waiting for its person's Send (F11): the frozen text the
    card shows, signed, so the message posted is exactly that text."""

    call_id: int
    user_id: int
    thread_id: int
    server_id: int
    kind: str
    text: str
    nonce: str


def sign_message_proposal(proposal: MessageProposal) -> str:
    return signing.dumps(
        [
            proposal.call_id,
            proposal.user_id,
            proposal.thread_id,
            proposal.server_id,
            proposal.kind,
            proposal.text,
            proposal.nonce,
        ],
        salt=MESSAGE_PROPOSAL_SALT,
        compress=True,
    )


def read_message_proposal(token: Any) -> MessageProposal | None:
    """The proposal a card answers, or None when forged, malformed or expired."""
    if not isinstance(token, str) or len(token) > 64_000:
        return None
    try:
        values = signing.loads(token, salt=MESSAGE_PROPOSAL_SALT, max_age=MESSAGE_PROPOSAL_MAX_AGE)
    except signing.BadSignature:
        return None
    if not (isinstance(values, list) and len(values) == 7):
        return None
    call_id, user_id, thread_id, server_id, kind, text, nonce = values
    if not all(isinstance(v, int) for v in (call_id, user_id, thread_id, server_id)):
        return None
    if not all(isinstance(v, str) for v in (kind, text, nonce)):
        return None
    return MessageProposal(call_id, user_id, thread_id, server_id, kind, text, nonce)


# What a view request needs of its view's row; anything else loads on access.
VIEW_FIELDS = (
    "id",
    "thread",
    "message",
    "server",
    "binding",
    "tool_name",
    "status",
    "origin",
    "requested_by",
    "parent_view",
    "ui_resource",
    "display_mode",
)


def view_reads(claims: ViewToken) -> tuple[Part, Part]:
    """The lean reads of ``view_for_claims`` (the view's row, its server), to run with
    others in one statement (``lean_rows.select_together``); ``view_of`` finishes them."""
    # By its key alone, the thread compared in `view_of`: with `thread_id` in the WHERE, a
    # prepared statement's generic plan may walk the thread's index and filter every call of
    # the thread by id (seen on PostgreSQL: 350 rows read for one, growing with the thread).
    return (
        Part(ToolCall, id=claims.call_id, only=VIEW_FIELDS),
        Part(McpServer, id=Same(ToolCall, "server_id")),
    )


def view_of(views: list[ToolCall], servers: list[McpServer], thread_id: int) -> ToolCall | None:
    """The view ``view_reads`` found, with its server loaded, if it is in this thread."""
    if not views or views[0].thread_id != thread_id or not servers:
        return None
    view = views[0]
    view.server = servers[0]
    return view


def view_for_claims(claims: ViewToken, thread_id: int) -> ToolCall | None:
    """The view (its ToolCall, with its server loaded) a token names, if it is in this
    thread. One lean statement: it runs before every request a view makes."""
    views, servers = select_together(*view_reads(claims))
    return view_of(views, servers, thread_id)


def _declared_csp(resource: UiResource) -> dict[str, list[str]] | None:
    csp = (resource.meta or {}).get("csp")
    return csp if isinstance(csp, dict) else None


def _allowed_domains(binding: AppBinding | None) -> Any:
    if binding is None:
        return {}
    # None with the "declared" mode: no admin restriction beyond what is declared.
    listed_only = binding.csp_domain_mode == "listed"
    return binding_allowed(binding.allowed_domains, listed_only=listed_only)


def effective_csp(resource: UiResource, binding: AppBinding | None):
    """The CspResult of a view: declared domains ∩ the binding's allowed domains.

    External-URL views (legacy `text/uri-list`) declare nothing; their URL's origin is
    what the inner frame must load, so it is declared as a frame domain here.
    """
    declared = dict(_declared_csp(resource) or {})
    if resource.flavor == "url":
        from urllib.parse import urlsplit

        parts = urlsplit(resource.text.strip())
        if parts.scheme in ("http", "https") and parts.netloc:
            origin = f"{parts.scheme}://{parts.netloc}"
            declared["frameDomains"] = [*declared.get("frameDomains", []), origin]
    return build_csp(
        declared or None,
        allowed=_allowed_domains(binding),
        # No view may reach the app or any server's sandbox unless the admin names it.
        reserved_hosts=(settings.APP_HOST, settings.SANDBOX_DOMAIN),
    )


def view_permissions(resource: UiResource, binding: AppBinding | None) -> tuple[str, list[str]]:
    declared = (resource.meta or {}).get("permissions")
    granted = set(binding.granted_permissions or []) if binding else set()
    return permissions_allow_attribute(declared, granted)


PERMISSION_LABELS = {
    "camera": "the camera",
    "microphone": "the microphone",
    "geolocation": "your location",
    "clipboardWrite": "the clipboard (write)",
}


def permission_request(
    resource: UiResource, binding: AppBinding | None, *, role: str | None
) -> dict[str, Any] | None:
    """What a view asks for that its binding has not granted (its prompt), or None.
    `canGrant`: the person may answer "Allow for this app" (owners only)."""
    if binding is None:
        return None
    declared = parse_permissions((resource.meta or {}).get("permissions")) or ()
    granted = set(binding.granted_permissions or [])
    missing = [name for name in declared if name not in granted]
    if not missing:
        return None
    return {
        "missing": missing,
        "labels": [PERMISSION_LABELS.get(name, name) for name in missing],
        "canGrant": role == "owner",
    }


def _decode_data_uri(src: str) -> tuple[str, str] | None:
    if not src.startswith("data:") or ";base64," not in src:
        return None
    header, data = src[5:].split(";base64,", 1)
    try:
        base64.b64decode(data, validate=True)
    except binascii.Error:
        return None
    return header, data


def call_tool_result(sanitized: dict[str, Any] | None) -> dict[str, Any] | None:
    """A whole MCP `CallToolResult` for a view, rebuilt from the canonical result.

    Views get the same stored object on every reload and for every member. Inline media is
    returned as image/audio blocks; staged media and UI parts as short text descriptions.
    """
    if not sanitized:
        return None

    content: list[dict[str, Any]] = []
    for part in sanitized.get("parts", []):
        kind = part.get("type")
        if kind == "text":
            content.append({"type": "text", "text": part.get("text", "")})
            continue
        if kind in ("image", "file") and isinstance(part.get("src"), str):
            decoded = _decode_data_uri(part["src"])
            media = part.get("mediaKind", "image") if kind == "file" else "image"
            if decoded and media in ("image", "audio"):
                content.append({"type": media, "mimeType": decoded[0], "data": decoded[1]})
                continue
        if kind == "link" and part.get("uri"):
            content.append(
                {
                    "type": "resource_link",
                    "uri": part["uri"],
                    "name": part.get("name") or part["uri"],
                }
            )
            continue
        if kind == "ui":
            continue
        described = describe_part(part)
        if described:
            content.append({"type": "text", "text": described})
    result: dict[str, Any] = {"content": content, "isError": bool(sanitized["meta"]["isError"])}
    if sanitized.get("structured") is not None:
        result["structuredContent"] = sanitized["structured"]
    if sanitized.get("uiMeta"):
        result["_meta"] = sanitized["uiMeta"]
    return result
