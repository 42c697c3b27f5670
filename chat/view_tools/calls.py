"""The model calling a tool an open app view provides, and a view's sampling request
(issue 27, docs/view-bridge.md "Draft-spec features").

A model's call: the view's binding decides (``VIEW_TOOL_CALL``), the tool's risk from its
own annotations sets the consent (read-only runs; anything else asks the person whose turn
it is, on the server-request card), then the host sends ``tools/call`` (v2 draft:
``ui/call-view-tool``) to that view in that person's browser and waits for its answer
(``chat.server_requests.waiting``: in this process or through the channel layer). No such
view, a closed view or no answer in time fails the call with a sentence the model can
read; a stopped turn sends the view ``ui/notifications/tool-cancelled``.

A view's ``sampling/createMessage``: the same consent card as a server's, naming the app
(``requester="app_view"``; *Allow in this thread* is per app and apart from its server's),
then the sampling engine on the workspace's model (``_meta`` stripped, token counts
audited); the answer goes back to the view.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.core import signing

from bindings.policy import (
    ActionKind,
    ActorKind,
    Approval,
    RiskSource,
    default_approval,
    derive_risk,
    risk_label,
)
from chat.models import Thread, ToolCall
from chat.server_requests import waiting
from chat.server_requests.models import Requester, ServerRequestKind, ServerRequestStatus
from chat.server_requests.sampling import SamplingFailed, sampling_run
from chat.server_requests.services import (
    ServerRequestRefused,
    request_state,
    server_request_expire,
    server_request_fail,
    server_request_open,
)
from chat.services.app_views import app_view_authorize

from . import naming
from .models import OpenViewTools
from .services import OfferedViewTool, open_view_tools, view_tool_outcome_record

VIEW_TOOL_TIMEOUT = 120.0  # seconds a view has to answer the model's call
CONSENT_TIMEOUT = 600.0  # seconds a card waits for its person
TICKET_SALT = "atrium.view_tools.answer"
TICKET_MAX_AGE = int(VIEW_TOOL_TIMEOUT) + 60


@dataclass(frozen=True)
class ViewToolAnswer:
    text: str
    is_error: bool


class ViewSamplingRefused(Exception):
    """A view's sampling request not run: ``code`` (``user_rejected``, ``sampling_failed``,
    …) and ``message`` for the view's JSON-RPC error."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _person(user: Any) -> str:
    return user.get_full_name() or user.get_username()


def _find(thread_id: int, user_id: int, name: str) -> OfferedViewTool | None:
    return next(
        (
            o
            for o in open_view_tools(thread_id=thread_id, user_id=user_id, taken=set())
            if o.wire_name == name
        ),
        None,
    )


def _authorize(offered: OfferedViewTool, user: Any, role: str, thread: Thread, arguments: Any):
    return app_view_authorize(
        view=offered.row.view,
        user=user,
        role=role,
        thread=thread,
        kind=ActionKind.VIEW_TOOL_CALL,
        extra={
            "tool": offered.tool.get("name"),
            "wireName": offered.wire_name,
            "argumentNames": sorted(str(k)[:60] for k in arguments)[:20],
        },
    )


def _still_open(row_id: int) -> dict[str, Any] | None:
    if OpenViewTools.objects.filter(pk=row_id).exists():
        return None
    return {"status": "closed"}


async def _to_socket(channel_name: str, payload: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is not None:
        await layer.send(channel_name, {"type": "view.message", "payload": payload})


def answer_ticket(*, key: str, user_id: int, thread_id: int, view_id: int) -> str:
    return signing.dumps({"k": key, "u": user_id, "t": thread_id, "v": view_id}, salt=TICKET_SALT)


def read_ticket(ticket: Any, *, user_id: int, thread_id: int) -> str | None:
    """The waiting key of a signed answer ticket, if it was issued to this person and thread."""
    if not isinstance(ticket, str) or len(ticket) > 500:
        return None
    try:
        data = signing.loads(ticket, salt=TICKET_SALT, max_age=TICKET_MAX_AGE)
    except signing.BadSignature:
        return None
    if not isinstance(data, dict) or data.get("u") != user_id or data.get("t") != thread_id:
        return None
    key = data.get("k")
    return key if isinstance(key, str) else None


async def _consent(offered: OfferedViewTool, user: Any, arguments: dict[str, Any]) -> str | None:
    """None once the call may run (read-only, or the person approved), else why not."""
    notes = offered.tool.get("annotations") or {}
    risk = derive_risk(notes)
    approval = default_approval(risk, ActorKind.MODEL)
    declared = isinstance(notes.get("destructiveHint"), bool) or notes.get("readOnlyHint") is True
    label = risk_label(risk, RiskSource.DECLARED if declared else RiskSource.DEFAULT)
    key = secrets.token_urlsafe(16)
    waiting.reserve(key)
    try:
        opened = await database_sync_to_async(server_request_open)(
            call_id=offered.row.view_id,
            kind=ServerRequestKind.VIEW_TOOL,
            params={
                "name": offered.tool.get("name"),
                "title": offered.tool.get("title") or "",
                "arguments": arguments,
                "risk": label,
                "wireName": offered.wire_name,
            },
            key=key,
            expires_in=CONSENT_TIMEOUT,
            requester=Requester.APP_VIEW,
            for_user_id=user.pk,
            preapproved="read_only" if approval is Approval.AUTO else "",
        )
    except ServerRequestRefused as exc:
        waiting.release(key)
        return exc.message
    row_id = opened.row.pk
    if opened.row.status != ServerRequestStatus.PENDING:
        waiting.release(key)
        return None
    try:
        message = await waiting.wait_answer(
            key=key,
            timeout=CONSENT_TIMEOUT,
            read_state=lambda: database_sync_to_async(request_state)(request_id=row_id),
        )
    finally:
        waiting.release(key)
    if message is None:
        await database_sync_to_async(server_request_expire)(request_id=row_id, reason="expired")
        return "nobody approved it in time"
    if message["status"] != ServerRequestStatus.ACCEPTED:
        return f"{_person(user)} rejected it"
    return None


async def view_tool_for_model(
    *,
    thread: Thread,
    user: Any,
    role: str,
    name: str,
    arguments: dict[str, Any] | None,
    problem: str | None,
) -> ViewToolAnswer | None:
    """The answer to the model's call of ``name`` if it names a view's tool (None: it does
    not, the caller says there is no such tool)."""
    if not naming.is_view_wire_name(name):
        return None
    offered = await database_sync_to_async(_find)(thread.pk, user.pk, name)
    if offered is None:
        return ViewToolAnswer(
            f"No view providing '{name[:80]}' is open in {_person(user)}'s browser any more; "
            "the tool was not run.",
            True,
        )
    if problem is not None:
        return ViewToolAnswer(problem, True)
    arguments = arguments or {}
    auth = await database_sync_to_async(_authorize)(offered, user, role, thread, arguments)
    if not auth.allowed:
        return ViewToolAnswer(f"The tool call was not run: {auth.decision.message}", True)
    refused = await _consent(offered, user, arguments)
    if refused is not None:
        await database_sync_to_async(view_tool_outcome_record)(
            offered=offered, user_id=user.pk, ok=False, reason="not_approved"
        )
        return ViewToolAnswer(f"The tool call was not run: {refused}.", True)
    return await _call_view(offered, user, arguments)


async def _call_view(
    offered: OfferedViewTool, user: Any, arguments: dict[str, Any]
) -> ViewToolAnswer:
    row = offered.row
    key = secrets.token_urlsafe(16)
    ticket = answer_ticket(key=key, user_id=user.pk, thread_id=row.thread_id, view_id=row.view_id)
    app = offered.app_name
    started = time.monotonic()
    waiting.reserve(key)
    outcome, reason = False, "no_answer"
    try:
        await _to_socket(
            row.channel_name,
            {
                "type": "viewtool.call",
                "ticket": ticket,
                "toolCallId": row.view_id,
                "method": naming.call_method(row.protocol),
                "name": offered.tool.get("name"),
                "arguments": arguments,
            },
        )
        try:
            message = await waiting.wait_answer(
                key=key,
                timeout=VIEW_TOOL_TIMEOUT,
                read_state=lambda: database_sync_to_async(_still_open)(row.pk),
            )
        except asyncio.CancelledError:
            reason = "cancelled"
            await asyncio.shield(
                _to_socket(
                    row.channel_name,
                    {
                        "type": "viewtool.cancel",
                        "ticket": ticket,
                        "toolCallId": row.view_id,
                        "reason": "The turn was stopped.",
                    },
                )
            )
            raise
        if message is None:
            reason = "timeout"
            await _to_socket(
                row.channel_name,
                {
                    "type": "viewtool.cancel",
                    "ticket": ticket,
                    "toolCallId": row.view_id,
                    "reason": "No answer in time.",
                },
            )
            return ViewToolAnswer(
                f"The {app} view did not answer within {int(VIEW_TOOL_TIMEOUT)} seconds; "
                "the call was cancelled.",
                True,
            )
        if message.get("status") == "closed":
            reason = "view_closed"
            return ViewToolAnswer(
                f"The {app} view was closed before it answered; the tool call failed.", True
            )
        if message.get("status") == "error":
            error = message.get("error") if isinstance(message.get("error"), dict) else {}
            reason = str(error.get("code") or "view_error")[:60]
            text = str(error.get("message") or "the view refused the call")[:500]
            return ViewToolAnswer(f"The {app} view could not run the tool: {text}", True)
        text, is_error = naming.result_text(message.get("result"))
        outcome, reason = True, "error_result" if is_error else "ok"
        return ViewToolAnswer(text, is_error)
    finally:
        waiting.release(key)
        await asyncio.shield(
            database_sync_to_async(view_tool_outcome_record)(
                offered=offered,
                user_id=user.pk,
                ok=outcome,
                reason=reason,
                latency_ms=round((time.monotonic() - started) * 1000, 1),
            )
        )


# ----------------------------------------------------------------- sampling from a view


async def view_sampling_answer(
    *, view: ToolCall, user: Any, params: dict[str, Any]
) -> dict[str, Any]:
    """Ask the person (unless their app is allowed in this thread), then run the request on
    the workspace's model; the ``CreateMessageResult``. Raises ``ViewSamplingRefused``."""
    key = secrets.token_urlsafe(16)
    waiting.reserve(key)
    try:
        opened = await database_sync_to_async(server_request_open)(
            call_id=view.pk,
            kind=ServerRequestKind.SAMPLING,
            params=params,
            key=key,
            expires_in=CONSENT_TIMEOUT,
            requester=Requester.APP_VIEW,
            for_user_id=user.pk,
        )
    except ServerRequestRefused as exc:
        waiting.release(key)
        raise ViewSamplingRefused(exc.code, exc.message) from None
    row_id = opened.row.pk
    try:
        if opened.allowance_id is None:
            message = await waiting.wait_answer(
                key=key,
                timeout=CONSENT_TIMEOUT,
                read_state=lambda: database_sync_to_async(request_state)(request_id=row_id),
            )
            if message is None:
                await database_sync_to_async(server_request_expire)(
                    request_id=row_id, reason="expired"
                )
            if message is None or message["status"] != ServerRequestStatus.ACCEPTED:
                raise ViewSamplingRefused(
                    "user_rejected", "The user rejected the sampling request."
                )
    except asyncio.CancelledError:
        await asyncio.shield(
            database_sync_to_async(server_request_expire)(request_id=row_id, reason="view_closed")
        )
        raise
    finally:
        waiting.release(key)
    try:
        return dict(
            await sampling_run(
                thread=view.thread,
                server=view.server,
                params=opened.row.params,  # _meta stripped when it was stored
                actor_user_id=user.pk,
                request_ref=row_id,
            )
        )
    except SamplingFailed as exc:
        await database_sync_to_async(server_request_fail)(request_id=row_id, reason=str(exc))
        raise ViewSamplingRefused(exc.code, exc.message) from None
