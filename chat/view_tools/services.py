"""The tools open app views provide: registered, withdrawn, listed (issue 27).

Every change is decided by the view's binding (``ActionKind.VIEW_TOOLS_REGISTER``:
members only, the view of this thread, its binding enabled) and audited in its
transaction; withdrawals are audited too (``VIEW_TOOLS_WITHDRAWN``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from audit.types import AuditEventType, Decision
from audit.writer import record
from bindings.policy import ActionKind
from bindings.services.authorize import Authorization
from chat.models import Thread, ToolCall
from chat.providers.base import ImageInput, ProviderTool
from chat.services.app_views import app_view_authorize

from . import naming
from .models import OpenViewTools


def view_tools_register(
    *,
    view: ToolCall,
    user: Any,
    role: str | None,
    thread: Thread,
    channel_name: str,
    tools: Any,
    protocol: str = "",
) -> tuple[Authorization, list[dict[str, Any]]]:
    """The view's ``tools/list`` answer, kept for this socket (an empty list withdraws)."""
    kept = naming.clean_tools(tools)
    with transaction.atomic():
        auth = app_view_authorize(
            view=view,
            user=user,
            role=role,
            thread=thread,
            kind=ActionKind.VIEW_TOOLS_REGISTER,
            extra={"tools": [t["name"] for t in kept], "protocol": protocol[:40]},
        )
        if not auth.allowed:
            return auth, []
        if not kept:
            OpenViewTools.objects.filter(view=view, channel_name=channel_name).delete()
            return auth, []
        OpenViewTools.objects.update_or_create(
            view=view,
            channel_name=channel_name[:200],
            defaults={
                "thread": thread,
                "user": user,
                "tools": kept,
                "protocol": protocol[:40],
            },
        )
    return auth, kept


def view_tools_withdraw(
    *, channel_name: str, view_id: int | None = None, reason: str = "closed"
) -> int:
    """The view unmounted (``view_id``) or its socket closed (all of that socket's views):
    its tools are no longer offered. Returns how many views' tools went (audited)."""
    with transaction.atomic():
        rows = OpenViewTools.objects.select_related("thread", "view").filter(
            channel_name=channel_name
        )
        if view_id is not None:
            rows = rows.filter(view_id=view_id)
        gone = list(rows)
        for row in gone:
            record(
                event_type=AuditEventType.VIEW_TOOLS_WITHDRAWN,
                decision=Decision.ALLOWED,
                actor_kind="app_view",
                actor_user_id=row.user_id,
                workspace_id=row.thread.workspace_id,
                thread_id=row.thread_id,
                server_id=row.view.server_id,
                binding_id=row.view.binding_id,
                action="view_tools_withdraw",
                reason=reason,
                extra={"view": row.view_id, "tools": [t.get("name") for t in row.tools]},
            )
        OpenViewTools.objects.filter(pk__in=[r.pk for r in gone]).delete()
    return len(gone)


@dataclass(frozen=True)
class OfferedViewTool:
    wire_name: str
    tool: dict[str, Any]
    row: OpenViewTools
    app_name: str
    app_slug: str


def open_view_tools(*, thread_id: int, user_id: int, taken: set[str]) -> list[OfferedViewTool]:
    """The tools of the views open in ``user_id``'s browser in this thread (newest view
    first wins a name), without names a server tool already has."""
    rows = (
        OpenViewTools.objects.select_related("view__server", "view__binding", "thread")
        .filter(thread_id=thread_id, user_id=user_id, view__thread_id=thread_id)
        .order_by("-updated_at", "-id")[:20]
    )
    live = [
        r
        for r in rows
        if r.view.server.enabled and (r.view.binding is None or r.view.binding.enabled)
    ]
    named = naming.pick_wire_names(
        ((r.view.server.slug, t, r) for r in live for t in r.tools), taken
    )
    return [
        OfferedViewTool(
            wire_name=name,
            tool=dict(tool),
            row=row,
            app_name=row.view.server.name,
            app_slug=row.view.server.slug,
        )
        for name, (tool, row) in sorted(named.items())
    ]


def view_tool_outcome_record(
    *,
    offered: OfferedViewTool,
    user_id: int | None,
    ok: bool,
    reason: str,
    latency_ms: float = 0.0,
) -> None:
    """The end of a model's call of a view's tool: answered, or why not."""
    row = offered.row
    with transaction.atomic():
        record(
            event_type=AuditEventType.VIEW_TOOL_ANSWERED if ok else AuditEventType.VIEW_TOOL_FAILED,
            decision=Decision.ALLOWED if ok else Decision.FAILED,
            actor_kind="app_view",
            actor_user_id=user_id,
            workspace_id=row.thread.workspace_id,
            thread_id=row.thread_id,
            server_id=row.view.server_id,
            binding_id=row.view.binding_id,
            tool_name=str(offered.tool.get("name") or "")[:200],
            action="view_tool_call",
            reason=reason[:200],
            extra={"view": row.view_id, "wireName": offered.wire_name, "latency_ms": latency_ms},
        )


def view_provider_tools(*, thread_id: int, user_id: int | None, taken: set[str]) -> list[Any]:
    """The ``ProviderTool`` of each tool the views open in ``user_id``'s browser provide
    (``view__<app>__<tool>``, described as coming from that view)."""
    if user_id is None:
        return []
    return [
        ProviderTool(
            name=o.wire_name,
            description=naming.description(o.app_name, o.tool),
            parameters=dict(o.tool.get("inputSchema") or {"type": "object", "properties": {}}),
        )
        for o in open_view_tools(thread_id=thread_id, user_id=user_id, taken=taken)
    ]


def view_context_images(*, thread_id: int, limit: int = 4) -> tuple[ImageInput, ...]:
    """The images of the views' latest model context in this thread (newest first), as
    image parts for the model; their described reference is in the system prompt anyway."""
    contexts = (
        ToolCall.objects.filter(thread_id=thread_id, model_context__isnull=False)
        .order_by("-model_context_updated_at", "-id")
        .values_list("model_context", flat=True)[:20]
    )
    images: list[ImageInput] = []
    for context in contexts:
        for mime, data in naming.context_images(context):
            if len(images) < limit:
                images.append(ImageInput(mime_type=mime, data=data))
    return tuple(images)
