"""Posting messages: slash commands, or a turn of the assistant."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from .. import services
from ..agent import start_turn
from . import commands
from .registry import (
    ActionContext,
    ActionError,
    action,
    rate_limited_error,
    require_actor,
    take_tokens,
)


@action("message.post")
async def post_message(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any] | None:
    require_actor(ctx)
    text = msg.get("text")
    if not isinstance(text, str):
        raise ActionError("invalid_message", "'text' must be a string.")
    attachments = msg.get("attachments") or []  # uploaded file ids (issue 26)
    if not isinstance(attachments, list):
        raise ActionError("invalid_message", "'attachments' must be a list of file ids.")
    verdict = await take_tokens(ctx, [("message", str(ctx.user.pk))])
    if not verdict.allowed:
        raise rate_limited_error(verdict, "messages")
    try:
        message = await database_sync_to_async(services.message_post)(
            thread=ctx.thread, author=ctx.user, text=text, attachment_ids=attachments
        )
    except services.ChatError as exc:
        raise ActionError(exc.code, exc.message) from exc
    if not await commands.dispatch_command(ctx, message):
        await start_turn(thread=ctx.thread, user=ctx.user, role=ctx.membership.role)
    return {"messageId": message.pk}
