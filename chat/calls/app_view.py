"""An app view's ``tools/call``, from admission to its JSON-RPC result (docs/view-bridge.md).

The socket (``chat.actions.app_view_calls``) rate-limits the request and hands down a
``ViewCallRequest``; ``app_view_call_answer`` starts the call — admitted, decided and
recorded in one trip to the database thread — and waits for its final event (an approval
or a slow tool may take minutes). The task answering it is keyed by the socket
(``view_call_key``) so a closed socket stops waiting (``view_calls_cancel``).
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from chat.app_view_bridge import call_tool_result
from chat.calls import runtime
from chat.calls.admission import RATE_LIMITED, ViewRefused
from chat.calls.requests import ToolCallRefused, ViewCallRequest, task_key
from chat.calls.run import call_start
from chat.models import ToolCallStatus
from chat.presenters import serialize_tool_call
from chat.realtime import waiters
from chat.selectors import tool_calls_queryset

VIEW_CALL_WAIT = 15 * 60  # seconds a view's tools/call may wait (e.g. for an approval)


async def app_view_call_answer(request: ViewCallRequest) -> dict[str, Any]:
    """The result a view's ``tools/call`` gets: the call's ``CallToolResult`` once it has
    ended. Raises ``ViewRefused`` (refused, rejected, cancelled, failed without a result,
    or still waiting after VIEW_CALL_WAIT) or ``SessionGone``."""
    try:
        call = await call_start(request)
    except ToolCallRefused as exc:
        # Past the caps on pending approvals (audited by the service): asked nothing.
        raise ViewRefused(exc.code, exc.message, RATE_LIMITED, audited=True) from exc
    if call.status not in waiters.FINAL:
        runner = runtime.running_task(task_key(call.pk))
        payload = await waiters.wait_final(
            call_id=call.pk,
            thread_id=request.admission.thread.pk,
            timeout=VIEW_CALL_WAIT,
            read_final=database_sync_to_async(lambda: _final_payload(call.pk)),
            runs_here=runner is not None,
            runner=runner,
        )
        if payload is None:
            raise ViewRefused("timeout", "The tool call is still waiting.")
    else:
        payload = await database_sync_to_async(_final_payload)(call.pk)
        assert payload is not None
    if payload["status"] in (ToolCallStatus.REJECTED, ToolCallStatus.CANCELLED):
        error = payload.get("error") or {}
        raise ViewRefused(
            error.get("code", payload["status"]), error.get("message", "The call was refused.")
        )
    if payload["status"] == ToolCallStatus.ERROR and not payload.get("result"):
        error = payload.get("error") or {}
        raise ViewRefused(error.get("code", "error"), error.get("message", "The call failed."))
    return call_tool_result(payload["result"]) or {"content": [], "isError": True}


def _final_payload(call_id: int) -> dict[str, Any] | None:
    call = tool_calls_queryset().get(pk=call_id)
    return serialize_tool_call(call) if call.status in waiters.FINAL else None


def view_call_key(channel_name: str, rid: Any) -> str:
    """The task answering one of a socket's view tools/call requests."""
    return f"view-call:{channel_name}:{rid}"


def view_calls_cancel(channel_name: str) -> int:
    """A socket closed: its views' pending tools/call requests stop waiting (their waiters
    leave, and a call's shared watcher stops with its last waiter). The calls themselves
    stay as they are: a pending approval can still be decided, and its result is stored."""
    prefix = view_call_key(channel_name, "")
    return sum(runtime.cancel(key) for key in runtime.running() if key.startswith(prefix))
