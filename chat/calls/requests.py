"""The typed values a tool call is decided and run from (no database, no I/O).

A call is asked for as a :class:`CallRequest` (a person's ``/call``, the model, the
admin's replay); an app view's ``tools/call`` arrives as a :class:`ViewCallRequest`: what
the socket knows of the person and the view (:class:`ViewAdmission`) with what the view
asked, which the pipeline admits and validates on the database thread before deciding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bindings.models import ApprovalRequest
from bindings.policy import ActionKind
from chat.app_view_bridge import ViewToken
from chat.models import Message, Thread, ToolCall, ToolCallStatus
from chat.selectors import SessionPin
from mcp_bridge.models import McpServer

ACTION_FOR_ORIGIN = {
    "user": ActionKind.USER_TOOL_CALL,
    "model": ActionKind.MODEL_TOOL_CALL,
    "app_view": ActionKind.APP_TOOL_CALL,
}
FINAL_STATUSES = {
    ToolCallStatus.SUCCESS,
    ToolCallStatus.ERROR,
    ToolCallStatus.REJECTED,
    ToolCallStatus.CANCELLED,
}
OPEN_STATUSES = (
    ToolCallStatus.STREAMING,
    ToolCallStatus.AWAITING_APPROVAL,
    ToolCallStatus.RUNNING,
)


def task_key(call_id: int) -> str:
    """The key of the background task running a call (``chat.calls.runtime``)."""
    return f"toolcall:{call_id}"


class ToolCallRefused(Exception):
    """A call refused before it was recorded (audited by whoever refused it)."""

    def __init__(self, code: str, message: str, call: ToolCall | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.call = call


@dataclass
class CallRequest:
    thread: Thread
    server: McpServer
    tool_name: str
    arguments: dict[str, Any]
    origin: str  # user | model | app_view
    user: Any  # the person on whose behalf the call runs
    role: str | None
    message: Message | None = None
    parent_view: ToolCall | None = None
    provider_call_id: str = ""
    action_kind: ActionKind | None = None
    # The row opened while a model streamed this call's arguments (its view is mounted):
    # deciding the call fills it in instead of creating another.
    streamed_call_id: int | None = None


@dataclass(frozen=True)
class ViewAdmission:
    """Who sends a view's request, as the socket knows them (nothing read yet): the person,
    their thread and membership, the session the socket was opened with, and the view
    token's claims (``None``: forged or expired). Admitted on the database thread
    (``chat.calls.admission.view_admit``)."""

    user: Any
    thread: Thread
    membership_id: int
    pin: SessionPin
    claims: ViewToken | None


@dataclass(frozen=True)
class ViewCallRequest:
    """An app view's ``tools/call`` as it arrived: its name and arguments are not
    validated yet (that happens, audited, once the view is admitted)."""

    admission: ViewAdmission
    tool_name: Any
    arguments: Any
    action_kind: ActionKind


@dataclass(frozen=True)
class KnownApproval:
    """A call's approval as the service that just wrote or read it knows it (``None``:
    the call has none): its event is built from memory, without reading it again."""

    approval: ApprovalRequest | None
