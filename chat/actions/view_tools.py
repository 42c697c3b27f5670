"""The draft-spec view features on the socket (issue 27, docs/view-bridge.md):

- ``sampling/createMessage`` from a view (a deferred row of the view-method table):
  rate-limited (``view_sampling``, taken with the view's own buckets by ``view.request``),
  admitted, decided by the binding (``VIEW_SAMPLING``), then the consent card and the model
  (``chat.view_tools.calls``), answered from a task;
- ``view.tools``: the browser registers the tools an open view provides (its ``tools/list``
  answer), or withdraws them (an empty list); ``view.tools_withdraw``: the view unmounted;
- ``viewtool.answer``: the view's answer to a host→view call, under its signed ticket.
A closed socket withdraws its views' tools (``socket_closed``, from the consumer).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async

from bindings.policy import ActionKind
from chat.app_view_bridge import ViewToken, read_view_token
from chat.calls import runtime
from chat.calls.admission import JSONRPC_INVALID_PARAMS
from chat.calls.app_view import view_call_key
from chat.models import ToolCall
from chat.server_requests import waiting
from chat.services.app_views import app_view_authorize
from chat.view_tools.calls import ViewSamplingRefused, read_ticket, view_sampling_answer
from chat.view_tools.services import view_tools_register, view_tools_withdraw
from mcp_bridge.server_requests import USER_REJECTED

from .app_view_calls import ViewRequestError, admitted_view, reply_when_answered, view_limit
from .app_views import handles
from .registry import ActionContext, ActionError, action
from .view_methods import VIEW_REQUEST, ViewMethod

log = logging.getLogger(__name__)

MAX_ANSWER_BYTES = 256 * 1024
MAX_SAMPLING_PARAMS_BYTES = 64 * 1024
_channels_with_tools: set[str] = set()  # sockets of this process that registered tools


# ------------------------------------------------------------------ sampling from a view


@handles("sampling/createMessage")
def _sampling(
    ctx: ActionContext, claims: ViewToken | None, row: ViewMethod, msg: dict[str, Any]
) -> None:
    rid = msg.get("rid")
    found = msg.get("params")
    params: dict[str, Any] = found if isinstance(found, dict) else {}
    # Keyed like a view's tools/call: the socket's close cancels it (its card expires).
    runtime.spawn(view_call_key(ctx.channel_name, rid), _sampling_reply(ctx, claims, params, rid))


def _sampling_decide(
    ctx: ActionContext, claims: ViewToken | None, params: dict[str, Any]
) -> ToolCall:
    view = admitted_view(ctx, claims)
    messages = params.get("messages")
    max_tokens = params.get("maxTokens")
    auth = app_view_authorize(
        view=view,
        user=ctx.user,
        role=ctx.membership.role,
        thread=ctx.thread,
        kind=ActionKind.VIEW_SAMPLING,
        extra={
            "messages": len(messages) if isinstance(messages, list) else 0,
            "maxTokens": max_tokens if isinstance(max_tokens, int) else None,
        },
    )
    if not auth.allowed:
        raise ViewRequestError(str(auth.decision.reason_code), auth.decision.message, audited=True)
    view.server, view.thread  # noqa: B018  (loaded here: the task reads them off the loop)
    return view


def _well_formed(params: dict[str, Any]) -> str | None:
    messages = params.get("messages")
    if not isinstance(messages, list) or not messages:
        return "sampling/createMessage needs a list of messages."
    max_tokens = params.get("maxTokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        return "sampling/createMessage needs maxTokens (a positive integer)."
    if len(json.dumps(params, default=str)) > MAX_SAMPLING_PARAMS_BYTES:
        return "The sampling request is too large."
    return None


async def _sampling_reply(
    ctx: ActionContext, claims: ViewToken | None, params: dict[str, Any], rid: Any
) -> None:
    async def answer() -> Any:
        view = await database_sync_to_async(_sampling_decide)(ctx, claims, params)
        problem = _well_formed(params)
        if problem is not None:
            raise ViewRequestError("invalid_params", problem, JSONRPC_INVALID_PARAMS)
        try:
            return await view_sampling_answer(view=view, user=ctx.user, params=params)
        except ViewSamplingRefused as exc:
            code = USER_REJECTED if exc.code == "user_rejected" else -32603
            raise ViewRequestError(exc.code, exc.message, code, audited=True) from None

    await reply_when_answered(ctx, rid, answer, failure="Sampling failed.")


# ------------------------------------------------------------------ app-provided tools


def _register(
    ctx: ActionContext, claims: ViewToken | None, tools: Any, protocol: str
) -> list[dict[str, Any]]:
    view = admitted_view(ctx, claims)
    auth, kept = view_tools_register(
        view=view,
        user=ctx.user,
        role=ctx.membership.role,
        thread=ctx.thread,
        channel_name=ctx.channel_name,
        tools=tools,
        protocol=protocol,
    )
    if not auth.allowed:
        raise ViewRequestError(str(auth.decision.reason_code), auth.decision.message, audited=True)
    return kept


@action("view.tools", admits_itself=True)
async def register_tools(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    """The tools an open view provides (its ``tools/list`` answer), offered to the model in
    this person's turns while the view stays open in this page."""
    claims = read_view_token(msg.get("token"))
    await view_limit(ctx, [(VIEW_REQUEST, str(claims.call_id if claims else "invalid"))])
    protocol = msg.get("protocol") if isinstance(msg.get("protocol"), str) else ""
    kept = await database_sync_to_async(_register)(ctx, claims, msg.get("tools"), protocol)
    if kept:
        _channels_with_tools.add(ctx.channel_name)
    return {"tools": [t["name"] for t in kept]}


@action("view.tools_withdraw")
async def withdraw_tools(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    """The view unmounted in this page: its tools are no longer offered (this socket's only)."""
    view_id = msg.get("toolCallId")
    if not isinstance(view_id, int) or isinstance(view_id, bool):
        raise ActionError("invalid_message", "'toolCallId' must be a number.")
    gone = await database_sync_to_async(view_tools_withdraw)(
        channel_name=ctx.channel_name, view_id=view_id, reason="view_closed"
    )
    return {"withdrawn": gone}


@action("viewtool.answer")
async def answer(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    """A view's answer to the host's call of its tool (or the page's word that the view
    closed, or refused): handed to whoever waits for it, in any process."""
    key = read_ticket(msg.get("ticket"), user_id=ctx.user.pk, thread_id=ctx.thread.pk)
    if key is None:
        raise ActionError("invalid_ticket", "That call is not yours or is no longer valid.")
    if "error" in msg:
        found = msg.get("error")
        error: dict[str, Any] = found if isinstance(found, dict) else {}
        message: dict[str, Any] = {
            "status": "error",
            "error": {
                "code": str(error.get("code") or "view_error")[:60],
                "message": str(error.get("message") or "")[:500],
            },
        }
    else:
        result = msg.get("result")
        try:
            size = len(json.dumps(result, default=str))
        except (TypeError, ValueError, RecursionError):
            size = MAX_ANSWER_BYTES + 1
        if size > MAX_ANSWER_BYTES:
            message = {
                "status": "error",
                "error": {"code": "too_large", "message": "The view's answer is too large."},
            }
        else:
            message = {"status": "answered", "result": result}
    # Off the event loop: with a cross-process layer it sends through async_to_sync.
    await sync_to_async(waiting.deliver)(key, message)
    return {}


async def socket_closed(channel_name: str) -> None:
    """The socket closed: the tools of the views it showed are withdrawn."""
    if channel_name not in _channels_with_tools:
        return
    _channels_with_tools.discard(channel_name)
    await database_sync_to_async(view_tools_withdraw)(
        channel_name=channel_name, reason="socket_closed"
    )
