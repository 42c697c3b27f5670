"""Tool actions from people: the picker, /call, cancelling, and deciding approvals."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from bindings.selectors import ensure_thread_catalogues, offered_tools
from bindings.services import BindingError
from mcp_bridge.models import McpServer

from .. import runtime, toolcalls
from ..models import ToolCall, ToolCallStatus
from . import (
    ActionContext,
    ActionError,
    action,
    rate_limited_error,
    require_actor,
    take_tokens,
)


@database_sync_to_async
def _offered(ctx: ActionContext) -> list[dict[str, Any]]:
    return [t.to_dict() for t in offered_tools(thread=ctx.thread, role=ctx.membership.role)]


@action("tools.list")
async def list_tools(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    await ensure_thread_catalogues(ctx.thread)
    return {"tools": await _offered(ctx)}


@database_sync_to_async
def _server(slug: str) -> McpServer | None:
    return McpServer.objects.filter(slug=slug, enabled=True).first()


async def call_tool_as_user(
    ctx: ActionContext, server_slug: str, tool_name: str, arguments: Any, message: Any = None
) -> ToolCall:
    require_actor(ctx)
    if not isinstance(arguments, dict):
        raise ActionError("invalid_arguments", "Tool arguments must be a JSON object.")
    server = await _server(server_slug) if isinstance(server_slug, str) else None
    if server is None:
        raise ActionError("server_not_found", f"There is no enabled server named '{server_slug}'.")
    if not isinstance(tool_name, str) or not tool_name:
        raise ActionError("invalid_message", "'tool' must name a tool.")
    verdict = await take_tokens(ctx, [("tool_call", str(ctx.user.pk))])
    if not verdict.allowed:
        raise rate_limited_error(verdict, "tool calls")
    return await toolcalls.start_tool_call(
        toolcalls.CallRequest(
            thread=ctx.thread,
            server=server,
            tool_name=tool_name,
            arguments=arguments,
            origin="user",
            user=ctx.user,
            role=ctx.membership.role,
            message=message,
        )
    )


@action("tool.call")
async def call_tool(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    call = await call_tool_as_user(
        ctx, msg.get("server"), msg.get("tool"), msg.get("arguments", {})
    )
    return {"toolCallId": call.pk, "status": call.status, "error": call.error}


@database_sync_to_async
def _call_in_thread(call_id: Any, thread_id: int) -> ToolCall | None:
    if not isinstance(call_id, int):
        return None
    return ToolCall.objects.filter(pk=call_id, thread_id=thread_id).first()


@action("tool.cancel")
async def cancel_tool(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    require_actor(ctx)
    call = await _call_in_thread(msg.get("toolCallId"), ctx.thread.pk)
    if call is None:
        raise ActionError("not_found", "That tool call is not in this thread.")
    if call.status != ToolCallStatus.RUNNING:
        raise ActionError("not_running", "That tool call is not running.")
    cancelled = runtime.cancel(toolcalls.task_key(call.pk))
    if not cancelled:
        # Running in another process (or lost with a restart): record the cancellation.
        await database_sync_to_async(toolcalls.finish_failure)(
            call_id=call.pk,
            error={"code": "cancelled", "message": "The tool call was cancelled."},
            status=ToolCallStatus.CANCELLED,
        )
    return {"cancelled": True}


@action("approval.decide")
async def decide_approval(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    require_actor(ctx)
    approval_id = msg.get("approvalId")
    decision = msg.get("decision")
    if not isinstance(approval_id, int) or decision not in ("approve", "reject"):
        raise ActionError(
            "invalid_message", "Send approvalId and decision ('approve' or 'reject')."
        )
    if not await database_sync_to_async(_approval_in_thread)(approval_id, ctx.thread.pk):
        raise ActionError("not_found", "That approval request is not in this thread.")
    try:
        call = await toolcalls.decide_approval(
            approval_id=approval_id,
            decider=ctx.user,
            role=ctx.membership.role,
            approve=decision == "approve",
        )
    except BindingError as exc:
        raise ActionError(exc.code, exc.message) from exc
    if call is None:
        return {"toolCallId": None, "status": "decided"}
    return {"toolCallId": call.pk, "status": call.status}


def _approval_in_thread(approval_id: int, thread_id: int) -> bool:
    from bindings.models import ApprovalRequest

    return ApprovalRequest.objects.filter(pk=approval_id, thread_id=thread_id).exists()
