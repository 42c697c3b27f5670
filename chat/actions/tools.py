"""Tool actions from people: the picker, /call, cancelling, deciding approvals, revoking
allowances."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from bindings.models import ApprovalRequest
from bindings.policy import ActionKind
from bindings.selectors import offered_tools
from bindings.services.allowances import allowance_revoke as revoke
from bindings.services.catalogues import thread_catalogues_ensure
from bindings.services.errors import BindingError
from chat.media.tool_files import ToolFileRefused, thread_files_for_tools, tool_files_resolve
from chat.media.tool_inputs import file_fields, file_references
from chat.services.refusals import request_record_refused
from mcp_bridge import gateway
from mcp_bridge.errors import BridgeError
from mcp_bridge.models import McpServer

from .. import agent
from ..calls import approvals
from ..calls.cancel import tool_call_stop
from ..calls.requests import CallRequest
from ..calls.run import tool_call_start
from ..models import ToolCall, ToolCallStatus
from .registry import (
    ActionContext,
    ActionError,
    action,
    rate_limited_error,
    require_actor,
    take_tokens,
)


def _with_file_fields(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool as the picker lists it, with the arguments that take a file (``fileFields``:
    the picker offers the thread's files for them; ``chat.media.tool_inputs``)."""
    fields = file_fields(tool.get("inputSchema"))
    tool["fileFields"] = [f.to_dict() for f in fields.values()]
    return tool


@database_sync_to_async
def _offered(ctx: ActionContext) -> list[dict[str, Any]]:
    return [
        _with_file_fields(t.to_dict())
        for t in offered_tools(thread=ctx.thread, role=ctx.membership.role)
    ]


@action("tools.list")
async def list_tools(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    # Each may refresh every server's catalogue: bounded per person.
    verdict = await take_tokens(ctx, [("tools_list", str(ctx.user.pk))])
    if not verdict.allowed:
        raise rate_limited_error(verdict, "tool list requests")
    await thread_catalogues_ensure(thread=ctx.thread)
    return {"tools": await _offered(ctx)}


@action("tools.files")
async def list_thread_files(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    """The ready files of this thread's messages: what a file argument may take."""
    require_actor(ctx)
    verdict = await take_tokens(ctx, [("tools_list", str(ctx.user.pk))])
    if not verdict.allowed:
        raise rate_limited_error(verdict, "file list requests")
    files = await database_sync_to_async(thread_files_for_tools)(thread=ctx.thread)
    return {"files": files}


async def _with_files(
    ctx: ActionContext, server: McpServer, tool_name: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    """The person's ``{"$file": …}`` arguments resolved to what the tool takes (checked
    and, when refused, audited on the server: ``chat.media.tool_files``)."""
    if not file_references(arguments):
        return arguments
    try:
        tool = await gateway.tool_for(server, tool_name)
    except BridgeError:
        return arguments  # the decision refuses (and audits) the unknown tool
    try:
        return await database_sync_to_async(tool_files_resolve)(
            thread=ctx.thread,
            user=ctx.user,
            server_id=server.pk,
            tool_name=tool_name,
            input_schema=tool.input_schema,
            arguments=arguments,
        )
    except ToolFileRefused as exc:
        raise ActionError(exc.code, exc.message, audited=True) from exc


@database_sync_to_async
def _server(slug: str) -> McpServer | None:
    return McpServer.objects.filter(slug=slug, enabled=True).first()


async def call_tool_as_user(
    ctx: ActionContext, server_slug: str, tool_name: str, arguments: Any, message: Any = None
) -> ToolCall:
    server = await _server(server_slug) if isinstance(server_slug, str) else None
    if not ctx.can_act:
        # Viewers never call; the refusal is audited like the policy's own (rule 3).
        await database_sync_to_async(request_record_refused)(
            action_kind=ActionKind.USER_TOOL_CALL,
            actor_kind="user",
            user=ctx.user,
            thread=ctx.thread,
            server_id=getattr(server, "pk", None),
            binding_id=None,
            reason="viewer_cannot_act",
            extra={"tool": str(tool_name)[:200]},
        )
        raise ActionError(
            "forbidden", "Viewers can read this thread but not act in it.", audited=True
        )
    if not isinstance(arguments, dict):
        raise ActionError("invalid_arguments", "Tool arguments must be a JSON object.")
    if server is None:
        raise ActionError("server_not_found", f"There is no enabled server named '{server_slug}'.")
    if not isinstance(tool_name, str) or not tool_name:
        raise ActionError("invalid_message", "'tool' must name a tool.")
    verdict = await take_tokens(ctx, [("tool_call", str(ctx.user.pk))])
    if not verdict.allowed:
        raise rate_limited_error(verdict, "tool calls")
    arguments = await _with_files(ctx, server, tool_name, arguments)
    return await tool_call_start(
        CallRequest(
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


CANCELLABLE = (ToolCallStatus.RUNNING, ToolCallStatus.STREAMING)


@action("tool.cancel")
async def cancel_tool(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    require_actor(ctx)
    call = await _call_in_thread(msg.get("toolCallId"), ctx.thread.pk)
    if call is None:
        raise ActionError("not_found", "That tool call is not in this thread.")
    if call.status not in CANCELLABLE:
        raise ActionError("not_running", "That tool call is not running.")
    await tool_call_stop(call=call, user_id=ctx.user.pk, reason="cancelled_by_member")
    return {"cancelled": True}


@action("turn.cancel")
async def cancel_turn(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    """Stop the assistant's answer in this thread, and every call it has open."""
    require_actor(ctx)
    stopped = await agent.cancel_turn(thread_id=ctx.thread.pk, user_id=ctx.user.pk)
    if not stopped:
        raise ActionError("not_running", "The assistant is not answering in this thread.")
    return {"cancelled": True}


# decision → (approve?, remember at scope)
APPROVAL_DECISIONS = {
    "approve": (True, ""),
    "allow_thread": (True, "thread"),
    "allow_workspace": (True, "workspace"),
    "allow_app": (True, "app"),  # the app's app-only tools in this thread
    "reject": (False, ""),
}


@action("approval.decide")
async def approval_decide_request(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    # No require_actor: a viewer's attempt is refused (and audited) by the service.
    verdict = await take_tokens(ctx, [("approval_decide", str(ctx.user.pk))])
    if not verdict.allowed:
        raise rate_limited_error(verdict, "approval decisions")
    approval_id = msg.get("approvalId")
    decision = msg.get("decision")
    if (
        not isinstance(approval_id, int)
        or not isinstance(decision, str)
        or decision not in APPROVAL_DECISIONS
    ):
        raise ActionError(
            "invalid_message",
            "Send approvalId and decision: 'approve' (once), 'allow_thread', "
            "'allow_workspace', 'allow_app' or 'reject'.",
        )
    if not await database_sync_to_async(_approval_in_thread)(approval_id, ctx.thread.pk):
        raise ActionError("not_found", "That approval request is not in this thread.")
    approve, remember = APPROVAL_DECISIONS[decision]
    try:
        call = await approvals.approval_decide(
            approval_id=approval_id,
            decider=ctx.user,
            role=ctx.membership.role,
            approve=approve,
            remember=remember,
        )
    except BindingError as exc:
        raise ActionError(exc.code, exc.message) from exc
    if call is None:
        return {"toolCallId": None, "status": "decided"}
    return {"toolCallId": call.pk, "status": call.status}


@action("allowance.revoke")
async def allowance_revoke_request(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    """Revoke an allowance that applies to this thread: the next call it covered asks."""
    allowance_id = msg.get("allowanceId")
    if not isinstance(allowance_id, int) or isinstance(allowance_id, bool):
        raise ActionError("invalid_message", "Send allowanceId (a number).")
    try:
        await database_sync_to_async(revoke)(
            allowance_id=allowance_id,
            actor=ctx.user,
            role=ctx.membership.role,
            thread=ctx.thread,
        )
    except BindingError as exc:
        raise ActionError(exc.code, exc.message) from exc
    return {"revoked": allowance_id}


def _approval_in_thread(approval_id: int, thread_id: int) -> bool:
    return ApprovalRequest.objects.filter(pk=approval_id, thread_id=thread_id).exists()
