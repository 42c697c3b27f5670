"""A member's side pane: pin an app view beside the conversation, unpin it, resize the pane.

One typed, keyword-only service (``thread_layout_set``) that writes its audit row in the
same transaction and, once committed, tells only that member's own sockets (the per-user
channel group: their other tabs and devices follow live; nobody else hears of it).
Membership is checked by the caller (the websocket action re-reads it before every action);
any member, viewers too, may pin any view of the thread: it changes their page only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from audit.types import AuditEventType, Decision
from audit.writer import record
from bindings.ratelimit import refusal_gate
from chat.layout.models import MAX_PANE_WIDTH, MIN_PANE_WIDTH, ThreadLayout
from chat.layout.selectors import layout_payload, remembered_width
from chat.models import Thread, ToolCall
from chat.realtime.groups import user_group

# What the channel layer delivers to the member's sockets (ThreadConsumer.thread_layout).
LAYOUT_MESSAGE = "thread.layout"

_KEEP = object()


class LayoutError(Exception):
    """A refused layout change (audited): ``code`` and ``message`` go to the client."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class LayoutChange:
    layout: dict[str, Any]  # layout_payload(): what the member's pages show
    changed: bool


def has_app_view(call: ToolCall) -> bool:
    """Whether the call shows an app view of its own (static/chat/render/tool_call.js
    hasAppView): a UI resource, or a `ui` part in its result; a view's own calls do not."""
    if call.parent_view_id is not None:
        return False
    if call.ui_resource_id is not None:
        return True
    parts = (call.result or {}).get("parts") if isinstance(call.result, dict) else None
    return any(isinstance(p, dict) and p.get("type") == "ui" for p in parts or [])


def clamp_width(width: int) -> int:
    return max(MIN_PANE_WIDTH, min(MAX_PANE_WIDTH, int(width)))


def _refuse(*, user: Any, thread: Thread, tool_call_id: Any, code: str, message: str) -> None:
    gate = refusal_gate(user=user)
    if gate is not None:
        record(
            event_type=AuditEventType.VIEW_PIN_REFUSED,
            decision=Decision.DENIED,
            actor_kind="user",
            actor_user_id=user.pk,
            workspace_id=thread.workspace_id,
            thread_id=thread.pk,
            action="layout_set",
            reason=code,
            extra={"toolCallId": tool_call_id if isinstance(tool_call_id, int) else None, **gate},
        )
    raise LayoutError(code, message)


def _announce(*, user_id: int, thread_id: int, layout: dict[str, Any]) -> None:
    def send() -> None:
        layer = get_channel_layer()
        if layer is not None:
            async_to_sync(layer.group_send)(
                user_group(user_id),
                {"type": LAYOUT_MESSAGE, "thread_id": thread_id, "layout": layout},
            )

    transaction.on_commit(send)


def thread_layout_set(
    *,
    user: Any,
    thread: Thread,
    tool_call_id: int | None | object = _KEEP,
    width: int | None = None,
) -> LayoutChange:
    """Set ``user``'s side pane in ``thread``: pin the view of ``tool_call_id`` (a call of
    this thread that has an app view), unpin (``None``), or keep the pinned view and only
    set the ``width`` (clamped). One pane per member per thread: pinning another view
    replaces the one pinned. Audited (pinned / unpinned / resized) in the same transaction;
    refusals are audited at a bounded rate and raise ``LayoutError``."""
    call: ToolCall | None = None
    if tool_call_id is not _KEEP and tool_call_id is not None:
        if not isinstance(tool_call_id, int) or isinstance(tool_call_id, bool):
            _refuse(
                user=user,
                thread=thread,
                tool_call_id=None,
                code="invalid_params",
                message="'toolCallId' must be a tool call id or null.",
            )
        wanted = tool_call_id if isinstance(tool_call_id, int) else 0
        call = (
            ToolCall.objects.select_related("server", "ui_resource")
            .filter(pk=wanted, thread_id=thread.pk)
            .first()
        )
        if call is None or not has_app_view(call):
            _refuse(
                user=user,
                thread=thread,
                tool_call_id=tool_call_id,
                code="not_found",
                message="That tool call has no app view in this thread.",
            )
    with transaction.atomic():
        layout = ThreadLayout.objects.select_for_update().filter(user=user, thread=thread).first()
        if layout is None:
            layout = ThreadLayout(
                user=user, thread=thread, pane_width=remembered_width(user_id=user.pk)
            )
        before_call = layout.pinned_call_id
        before_width = layout.pane_width
        if tool_call_id is not _KEEP:
            layout.pinned_call = call
        if width is not None:
            layout.pane_width = clamp_width(width)
        pinned_changed = layout.pinned_call_id != before_call
        width_changed = layout.pane_width != before_width
        if layout.pk is None or pinned_changed or width_changed:
            layout.save()
        if pinned_changed or width_changed:
            shown = call or layout.pinned_call
            if pinned_changed and layout.pinned_call_id is not None:
                event = AuditEventType.VIEW_PINNED
            elif pinned_changed:
                event = AuditEventType.VIEW_UNPINNED
            else:
                event = AuditEventType.SIDE_PANE_RESIZED
            record(
                event_type=event,
                decision=Decision.ALLOWED,
                actor_kind="user",
                actor_user_id=user.pk,
                workspace_id=thread.workspace_id,
                thread_id=thread.pk,
                server_id=shown.server_id if shown is not None else None,
                binding_id=shown.binding_id if shown is not None else None,
                tool_name=shown.tool_name if shown is not None else "",
                action="layout_set",
                extra={
                    "toolCallId": layout.pinned_call_id,
                    "previousToolCallId": before_call,
                    "width": layout.pane_width,
                },
            )
        payload = layout_payload(layout)
        if pinned_changed or width_changed:
            _announce(user_id=user.pk, thread_id=thread.pk, layout=payload)
    return LayoutChange(layout=payload, changed=pinned_changed or width_changed)
