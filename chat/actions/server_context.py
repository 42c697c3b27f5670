"""Prompts and resources of the thread's bound servers (issue 25; docs/mcp-client.md):
``prompts.list``, ``resources.list``, ``context.complete``, ``prompt.use``,
``message.post_resources``. Members only for what posts; every ask is rate-limited."""

from __future__ import annotations

from typing import Any

from bindings import ratelimit

from ..agent import start_turn
from ..server_context import flows, listings
from ..server_context import receivers as _receivers  # noqa: F401  (connects them)
from .registry import ActionContext, ActionError, action, rate_limited_error, take_tokens

# kind -> (burst, tokens per second); settings.ATRIUM_RATE_LIMITS overrides.
RATE_LIMITS = {
    "context_list": (10, 0.5),  # prompt / resource pickers opened (each asks the servers)
    "context_complete": (30, 5.0),  # completion requests while a member types arguments
    "context_post": (10, 0.5),  # prompts posted and resources attached
}
ratelimit.limits_declare(RATE_LIMITS)


async def _bucket(ctx: ActionContext, kind: str, what: str) -> None:
    verdict = await take_tokens(ctx, [(kind, str(ctx.user.pk))])
    if not verdict.allowed:
        raise rate_limited_error(verdict, what)


def _refused(exc: flows.ContextRefused) -> ActionError:
    return ActionError(exc.code, exc.message, audited=exc.audited)


@action("prompts.list")
async def list_prompts(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    await _bucket(ctx, "context_list", "prompt list requests")
    found = await listings.thread_listing(ctx.thread, ctx.user.pk, ("prompts",))
    return {"prompts": found.entries, "problems": found.problems}


@action("resources.list")
async def list_resources(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    await _bucket(ctx, "context_list", "resource list requests")
    found = await listings.thread_listing(ctx.thread, ctx.user.pk, ("resources", "templates"))
    return {"resources": found.entries, "problems": found.problems}


@action("context.complete")
async def complete(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    await _bucket(ctx, "context_complete", "completion requests")
    try:
        return await flows.complete(
            thread=ctx.thread,
            user=ctx.user,
            server_slug=msg.get("server"),
            ref=msg.get("ref"),
            argument=msg.get("argument"),
            context=msg.get("context"),
        )
    except flows.ContextRefused as exc:
        raise ActionError(exc.code, exc.message) from exc


@action("prompt.use")
async def use_prompt(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    await _bucket(ctx, "context_post", "prompts")
    try:
        posted = await flows.prompt_use(
            thread=ctx.thread,
            user=ctx.user,
            can_act=ctx.can_act,
            server_slug=msg.get("server"),
            name=msg.get("name"),
            arguments=msg.get("arguments", {}),
        )
    except flows.ContextRefused as exc:
        raise _refused(exc) from exc
    await start_turn(thread=ctx.thread, user=ctx.user, role=ctx.membership.role)
    return {"messageIds": [m.pk for m in posted]}


@action("message.post_resources")
async def post_with_resources(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    await _bucket(ctx, "context_post", "attachments")
    try:
        message = await flows.resources_attach(
            thread=ctx.thread,
            user=ctx.user,
            can_act=ctx.can_act,
            text=msg.get("text", ""),
            refs=msg.get("resources"),
            attachment_ids=msg.get("attachments") or [],
        )
    except flows.ContextRefused as exc:
        raise _refused(exc) from exc
    await start_turn(thread=ctx.thread, user=ctx.user, role=ctx.membership.role)
    return {"messageId": message.pk}
