"""A member's side pane (docs/side-pane.md): ``layout.set`` pins an app view beside the
conversation, unpins it, or sets the pane's width. Any member may (viewers too): it changes
only their own page, and their other sockets follow (``ThreadConsumer.thread_layout``)."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from bindings import ratelimit

from ..layout.services import LayoutError, thread_layout_set
from .registry import ActionContext, ActionError, action, rate_limited_error, take_tokens

# Pins, unpins and resizes one person sends (a drag writes once, when it ends).
ratelimit.limits_declare({"thread_layout": (20, 1.0)})


def _width(msg: dict[str, Any]) -> int | None:
    width = msg.get("width")
    if width is None:
        return None
    if isinstance(width, bool) or not isinstance(width, (int, float)) or not 0 < width < 100000:
        raise ActionError("invalid_params", "'width' must be a number of pixels.")
    return int(width)


@action("layout.set")
async def layout_set(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any] | None:
    width = _width(msg)
    kwargs: dict[str, Any] = {"user": ctx.user, "thread": ctx.thread, "width": width}
    if "toolCallId" in msg:
        kwargs["tool_call_id"] = msg["toolCallId"]
    elif width is None:
        raise ActionError("invalid_params", "Send 'toolCallId' (a view, or null) or 'width'.")
    verdict = await take_tokens(ctx, [("thread_layout", str(ctx.user.pk))])
    if not verdict.allowed:
        raise rate_limited_error(verdict, "layout changes")
    try:
        change = await database_sync_to_async(thread_layout_set)(**kwargs)
    except LayoutError as exc:
        raise ActionError(exc.code, exc.message, audited=True) from exc
    return {"layout": change.layout}
