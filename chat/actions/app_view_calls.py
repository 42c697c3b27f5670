"""A view's ``tools/call`` on the socket's side, and the admission every view request
starts with (docs/view-bridge.md).

The socket knows who asks (its person, thread, membership and session pin) and reads the
view's token; it hands that down as a ``ViewAdmission`` — the call pipeline
(``chat.calls``) checks it on the database thread, in the decision's own trip — and
answers the view from a task, so a call waiting on an approval never holds the socket.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from channels.db import database_sync_to_async

from bindings.policy import ActionKind
from chat.app_view_bridge import ViewToken
from chat.calls import runtime
from chat.calls.admission import (
    POLICY_DENIED,
    RATE_LIMITED,
    SessionGone,
    ViewRefused,
    view_admit,
)
from chat.calls.app_view import app_view_call_answer, view_call_key
from chat.calls.requests import ViewAdmission, ViewCallRequest
from chat.models import ToolCall

from .registry import (
    ActionContext,
    ActionError,
    SessionEnded,
    rate_limited_error,
    refusal_record,
    take_tokens,
)
from .view_methods import RateBucket

log = logging.getLogger(__name__)


class ViewRequestError(ActionError):
    """A view's request refused, answered as a JSON-RPC error (``jsonrpcCode``)."""

    def __init__(
        self,
        code: str,
        message: str,
        jsonrpc_code: int = POLICY_DENIED,
        *,
        audited: bool = False,
        details: Any = None,
    ) -> None:
        super().__init__(code, message, details, audited=audited)
        self.jsonrpc_code = jsonrpc_code

    @classmethod
    def of(cls, refused: ViewRefused) -> ViewRequestError:
        return cls(
            refused.code,
            refused.message,
            refused.jsonrpc_code,
            audited=refused.audited,
            details=refused.details,
        )

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "jsonrpcCode": self.jsonrpc_code}


def view_admission(ctx: ActionContext, claims: ViewToken | None) -> ViewAdmission:
    """What this socket knows of a view request's sender (nothing is read here)."""
    assert ctx.pin is not None, "a socket's context carries its session pin"
    return ViewAdmission(
        user=ctx.user,
        thread=ctx.thread,
        membership_id=ctx.membership.pk,
        pin=ctx.pin,
        claims=claims,
    )


def admitted_view(ctx: ActionContext, claims: ViewToken | None) -> ToolCall:
    """On the database thread, first: the member's session and membership (re-read, kept
    in the context) and the view the token names. Raises ``SessionEnded`` or
    ``ViewRequestError``."""
    try:
        admitted = view_admit(view_admission(ctx, claims))
    except SessionGone:
        raise SessionEnded() from None
    except ViewRefused as exc:
        raise ViewRequestError.of(exc) from None
    ctx.membership = admitted.membership
    return admitted.view


async def view_limit(ctx: ActionContext, buckets: list[tuple[RateBucket, str]]) -> None:
    """Take a token from each ``(bucket, key)``, in order and in one trip to the store, or
    refuse the request (audited), saying what the refusing bucket limits."""
    verdict = await take_tokens(ctx, [(bucket.name, key) for bucket, key in buckets])
    if not verdict.allowed:
        what = {bucket.name: bucket.what for bucket, _ in buckets}[verdict.kind]
        error = rate_limited_error(verdict, what)
        raise ViewRequestError(
            error.code, error.message, RATE_LIMITED, audited=True, details=error.details
        )


def app_view_tool_call(
    ctx: ActionContext, claims: ViewToken | None, msg: dict[str, Any], kind: ActionKind
) -> None:
    """A view's ``tools/call`` (audited as ``kind``): answered from a task keyed by this
    socket (``chat.calls.app_view.view_call_key``), with the reply to ``msg["rid"]``. Its
    rate buckets are taken (``view.request``: the person's tool calls with the view's)."""
    found = msg.get("params")
    params: dict[str, Any] = found if isinstance(found, dict) else {}
    request = ViewCallRequest(
        admission=view_admission(ctx, claims),
        tool_name=params.get("name"),
        arguments=params.get("arguments") or {},
        action_kind=kind,
    )
    rid = msg.get("rid")
    runtime.spawn(view_call_key(ctx.channel_name, rid), _answer(ctx, request, rid))


async def _answer(ctx: ActionContext, request: ViewCallRequest, rid: Any) -> None:
    async def answer() -> Any:
        try:
            return await app_view_call_answer(request)
        except SessionGone:
            raise SessionEnded() from None
        except ViewRefused as exc:
            raise ViewRequestError.of(exc) from None

    await reply_when_answered(ctx, rid, answer, failure="The call failed.")


async def reply_when_answered(
    ctx: ActionContext, rid: Any, answer: Callable[[], Awaitable[Any]], *, failure: str
) -> None:
    """Run a view request's answer in its own task and reply to the view: the result, or the
    refusal (audited once), or ``failure`` for what went wrong unexpectedly. A session that
    ended meanwhile closes the socket instead."""
    try:
        reply = {"type": "reply", "rid": rid, "ok": True, "result": await answer()}
    except SessionEnded:
        if ctx.end_session is not None:
            await ctx.end_session(rid)
        return
    except ActionError as exc:
        if not exc.audited:
            await database_sync_to_async(refusal_record)(ctx, "view.request", exc.code)
        reply = {"type": "reply", "rid": rid, "ok": False, "error": exc.to_dict()}
    except Exception:
        log.exception("a view's request failed")
        reply = {
            "type": "reply",
            "rid": rid,
            "ok": False,
            "error": {"code": "internal_error", "message": failure, "jsonrpcCode": -32603},
        }
    # The socket may have closed meanwhile; the result is stored anyway.
    with contextlib.suppress(Exception):
        await ctx.send(reply)
