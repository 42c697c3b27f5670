"""Posting messages (slash commands, or a turn of the assistant) and deleting them."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from .. import services
from ..agent import start_turn
from ..services.messages import message_delete, message_in_thread
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


def _delete(ctx: ActionContext, message_id: Any) -> int:
    message = message_in_thread(thread=ctx.thread, message_id=message_id)
    return message_delete(message=message, actor=ctx.user)


@action("message.delete")
async def delete_message(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any] | None:
    """Delete a person's message for everyone (its author, or an owner): issue 26,
    docs/files.md "Deleting a message". Refusals: ``viewer``, ``not_yours``,
    ``not_deletable``, ``has_tool_calls``, ``already_deleted``, ``not_in_thread``."""
    if not ctx.can_act:
        raise ActionError("viewer", "Viewers can read this thread but not delete messages.")
    verdict = await take_tokens(ctx, [("message", str(ctx.user.pk))])
    if not verdict.allowed:
        raise rate_limited_error(verdict, "messages")
    try:
        files = await database_sync_to_async(_delete)(ctx, msg.get("messageId"))
    except services.ChatError as exc:
        raise ActionError(exc.code, exc.message) from exc
    return {"messageId": msg.get("messageId"), "files": files}
