"""The one way a call's ``toolcall`` event leaves: stored and numbered in the caller's
transaction, broadcast on commit (``chat.realtime.events.emit``)."""

from __future__ import annotations

from typing import Any

from chat.calls.requests import KnownApproval
from chat.models import ToolCall
from chat.presenters import serialize_tool_call
from chat.realtime.events import emit
from chat.selectors import tool_calls_queryset


def call_emit(
    call: ToolCall, *, approval: KnownApproval | None = None, reread: bool = False
) -> None:
    """Emit the call as every member sees it.

    By default the event is built from the call in memory: the decision and the finish
    hold the row they wrote with every relation loaded, and the payload is then what
    ``tool_calls_queryset()`` would read back, without its five-join re-read (bench/README).
    ``approval``: the call's approval (or that it has none) as the caller knows it, which
    spares its read. ``reread``: the caller holds a partial row (read for update, or
    changed by ``update()``): the call is read again with its relations first.
    """
    if reread:
        call = tool_calls_queryset().get(pk=call.pk)
    emit(thread_id=call.thread_id, kind="toolcall", payload=call_payload(call, approval=approval))


def call_payload(call: ToolCall, *, approval: KnownApproval | None = None) -> dict[str, Any]:
    """The call as every member sees it, built from the row in memory (see ``call_emit``)."""
    if approval is None:
        return serialize_tool_call(call)
    return serialize_tool_call(call, approval=approval.approval)
