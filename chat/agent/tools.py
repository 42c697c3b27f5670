"""Running the tool calls a model step asked for: each through ``tool_call_start``
(origin ``model``: the same policy and approval flow as every call), waited for until it
is final, its result sent back as ``result_for_model``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from mcp_bridge.uimeta import unstorable

from ..calls import runtime
from ..calls.cancel import tool_call_stop
from ..calls.requests import CallRequest, task_key
from ..calls.run import tool_call_start
from ..models import Message, ToolCall, ToolCallStatus
from ..providers.base import AssistantTurn, ConversationItem, ToolCallComplete, ToolResult, ToolUse
from ..realtime import waiters
from ..view_tools.calls import view_tool_for_model
from .context import TurnContext, result_for_model
from .steps import _StepOutput, _turn_stopper


def _message(message_id: int) -> Message:
    return Message.objects.get(pk=message_id)


def _call(call_id: int) -> ToolCall:
    return ToolCall.objects.select_related("server").get(pk=call_id)


async def _run_tools(
    ctx: TurnContext, output: _StepOutput, *, user: Any, role: str, used_ids: set[str]
) -> list[ConversationItem]:
    """Run the step's tool calls in order; the assistant turn and its results."""
    assert output.message_id is not None
    message = await database_sync_to_async(_message)(output.message_id)
    uses: list[ToolUse] = []
    results: list[ToolResult] = []
    unstarted = dict(output.call_rows)  # rows opened while streaming, not decided yet
    try:
        for complete in output.completed:
            row = unstarted.pop(complete.index, None)
            result = await _run_tool(ctx, output, message, complete, row, user, role, used_ids)
            uses.append(result[0])
            results.append(result[1])
    finally:
        # A stopped turn: calls that never started end cancelled (their views are told).
        if unstarted:
            await asyncio.shield(output.abandon_rows(unstarted.values()))
    return [AssistantTurn(text=output.text, tool_uses=tuple(uses)), *results]


async def _run_tool(
    ctx: TurnContext,
    output: _StepOutput,
    message: Message,
    complete: ToolCallComplete,
    row: int | None,
    user: Any,
    role: str,
    used_ids: set[str],
) -> tuple[ToolUse, ToolResult]:
    """One of the step's tool calls: decided, run and waited for; its use and result."""
    call_id = complete.id
    if call_id in used_ids:  # some servers number calls per response: call_0 again
        call_id = f"{complete.id}_{len(used_ids)}"
    used_ids.add(call_id)
    arguments, problem = _parse_arguments(complete.arguments)
    offered = ctx.by_wire_name.get(complete.name)
    use = ToolUse(id=call_id, name=complete.name, arguments=arguments or {})
    if offered is None:
        # A tool an open app view provides (issue 27): decided, asked and answered there.
        by_view = await view_tool_for_model(
            thread=ctx.thread,
            user=user,
            role=role,
            name=complete.name,
            arguments=arguments,
            problem=problem,
        )
        if by_view is not None:
            return use, ToolResult(call_id, complete.name, by_view.text, is_error=by_view.is_error)
        text = (
            f"There is no tool named '{complete.name[:80]}' here. Available tools: "
            + (", ".join(sorted(ctx.by_wire_name)) or "none")
            + "."
        )
        return use, ToolResult(call_id, complete.name, text, is_error=True)
    if problem is not None:
        if row is not None:
            await output.abandon_rows([row], reason="input_abandoned")
        return use, ToolResult(call_id, complete.name, problem, is_error=True)
    call = await tool_call_start(
        CallRequest(
            thread=ctx.thread,
            server=offered.tool.server,
            tool_name=offered.tool.name,
            arguments=arguments or {},
            origin="model",
            user=user,
            role=role,
            message=message,
            provider_call_id=call_id,
            streamed_call_id=row,
        )
    )
    try:
        final = await wait_for_call(call)
    except asyncio.CancelledError:
        # The turn was stopped: the call it waits for stops too (MCP cancellation).
        fresh = await asyncio.shield(database_sync_to_async(_call)(call.pk))
        if fresh.status in (ToolCallStatus.RUNNING, ToolCallStatus.STREAMING):
            await asyncio.shield(
                tool_call_stop(
                    call=fresh, user_id=_turn_stopper(ctx.thread.pk), reason="turn_cancelled"
                )
            )
        raise
    text, is_error = result_for_model(final)
    return use, ToolResult(call_id, complete.name, text, is_error=is_error)


def _parse_arguments(raw: str) -> tuple[dict[str, Any] | None, str | None]:
    try:
        value = json.loads(raw or "{}")
    except (ValueError, RecursionError) as exc:
        # JSONDecodeError says where; an integer past Python's digit limit or nesting past
        # the recursion limit raise plain ValueError / RecursionError.
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "too long or too deep"
        return None, f"The arguments were not valid JSON ({reason}); the tool was not run."
    if not isinstance(value, dict):
        return None, "The arguments must be a JSON object; the tool was not run."
    if unstorable(value):
        return None, (
            "The arguments held U+0000 or an unpaired surrogate, which cannot be stored; "
            "the tool was not run."
        )
    return value, None


async def wait_for_call(call: ToolCall) -> ToolCall:
    """Wait until the call is final (approvals included, up to the approval TTL), on its
    final event from whichever process ends it (``waiters.wait_final``)."""
    timeout = settings.ATRIUM_APPROVAL_TTL + settings.ATRIUM_TOOL_CALL_TIMEOUT + 30
    if call.status not in waiters.FINAL:
        await waiters.wait_final(
            call_id=call.pk,
            thread_id=call.thread_id,
            timeout=timeout,
            read_final=database_sync_to_async(lambda: _final_payload(call.pk)),
            runs_here=runtime.is_running(task_key(call.pk)),
        )
    return await database_sync_to_async(_call)(call.pk)


def _final_payload(call_id: int) -> dict[str, Any] | None:
    status = ToolCall.objects.filter(pk=call_id).values_list("status", flat=True).first()
    return {"id": call_id, "status": status} if status in waiters.FINAL else None
