"""Reads of a member's side pane (docs/side-pane.md)."""

from __future__ import annotations

from typing import Any

from chat.layout.models import DEFAULT_PANE_WIDTH, ThreadLayout


def remembered_width(*, user_id: int) -> int:
    """The width of the member's most recently changed pane (any thread): a pane opened in
    another thread starts as wide as the last one they set."""
    width = (
        ThreadLayout.objects.filter(user_id=user_id)
        .order_by("-updated_at", "-id")
        .values_list("pane_width", flat=True)
        .first()
    )
    return int(width) if width else DEFAULT_PANE_WIDTH


def width_step(width: int) -> int:
    """The width rounded to the 40 px steps the page's stylesheet knows (320…1200): the
    first paint has (nearly) the member's width, with no inline style (the host page's CSP
    has none); the page then sets the exact one."""
    return max(320, min(1200, round(width / 40) * 40))


def layout_payload(
    layout: ThreadLayout | None, *, default_width: int = DEFAULT_PANE_WIDTH
) -> dict[str, Any]:
    """What the member's pages render: the pinned call (and its app, for the pane's chrome
    before the view is mounted) and the width."""
    if layout is None:
        return {
            "toolCallId": None,
            "width": default_width,
            "widthStep": width_step(default_width),
            "app": None,
        }
    call = layout.pinned_call
    app = None
    if call is not None:
        server = call.server
        app = {
            "server": server.name or server.slug,
            "serverSlug": server.slug,
            "tool": call.tool_name,
        }
    return {
        "toolCallId": layout.pinned_call_id,
        "width": layout.pane_width,
        "widthStep": width_step(layout.pane_width),
        "app": app,
    }


def thread_layout_for(*, user: Any, thread_id: int) -> dict[str, Any]:
    """The member's layout of a thread (the thread page's first render embeds it)."""
    layout = (
        ThreadLayout.objects.select_related("pinned_call__server")
        .filter(user_id=user.pk, thread_id=thread_id)
        .first()
    )
    if layout is None:
        return layout_payload(None, default_width=remembered_width(user_id=user.pk))
    return layout_payload(layout)
