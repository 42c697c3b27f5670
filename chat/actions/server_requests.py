"""Answering a server's question: ``serverrequest.answer`` (accept with content, decline,
cancel; sampling: approve once / allow in this thread / reject) and ``serverrequest.finish``
(a URL card's "I've finished")."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from bindings import ratelimit
from chat.server_requests.models import ServerRequest
from chat.server_requests.services import (
    ServerRequestRefused,
    server_request_answer,
    server_request_complete,
)

from .registry import ActionContext, ActionError, action, rate_limited_error, take_tokens

BUCKET = "server_request_answer"
ratelimit.limits_declare({BUCKET: (20, 2.0)})
ANSWERS = ("accept", "decline", "cancel")


@database_sync_to_async
def _request_in_thread(request_id: Any, thread_id: int) -> int | None:
    if not isinstance(request_id, int) or isinstance(request_id, bool):
        return None
    found = ServerRequest.objects.filter(pk=request_id, thread_id=thread_id).values_list(
        "pk", flat=True
    )
    return next(iter(found), None)


def _error(exc: ServerRequestRefused) -> ActionError:
    details = {"problems": [p.to_dict() for p in exc.problems]} if exc.problems else None
    audited = exc.code in ("not_for_you", "viewer_cannot_act")
    code = "forbidden" if audited else exc.code
    return ActionError(code, exc.message, details, audited=audited)


async def _found(ctx: ActionContext, msg: dict[str, Any]) -> int:
    verdict = await take_tokens(ctx, [(BUCKET, str(ctx.user.pk))])
    if not verdict.allowed:
        raise rate_limited_error(verdict, "answers")
    request_id = await _request_in_thread(msg.get("requestId"), ctx.thread.pk)
    if request_id is None:
        raise ActionError("not_found", "That question is not in this thread.")
    return request_id


@action("serverrequest.answer")
async def answer(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    request_id = await _found(ctx, msg)
    choice = msg.get("answer")
    if choice not in ANSWERS:
        raise ActionError("invalid_message", "'answer' is accept, decline or cancel.")
    remember = msg.get("remember") if msg.get("remember") == "thread" else ""
    try:
        row = await database_sync_to_async(server_request_answer)(
            request_id=request_id,
            user=ctx.user,
            answer=choice,
            content=msg.get("content"),
            remember=remember,
        )
    except ServerRequestRefused as exc:
        raise _error(exc) from None
    return {"requestId": row.pk, "status": row.status}


@action("serverrequest.finish")
async def finish(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    request_id = await _found(ctx, msg)
    try:
        rows = await database_sync_to_async(server_request_complete)(
            request_id=request_id, user=ctx.user
        )
    except ServerRequestRefused as exc:
        raise _error(exc) from None
    return {"requestId": request_id, "completed": bool(rows)}
