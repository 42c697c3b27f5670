"""Websocket actions: one small async handler per client message type.

Handlers are registered with :func:`action` and receive an :class:`ActionContext`. They
check what they need (membership is re-read before every action: by the consumer, or by
the handler itself in its first database trip with ``admits_itself``), call services through
``database_sync_to_async``, and return a reply payload (or None). Anything slow runs in a
task (see :mod:`chat.calls.runtime`), never inside the handler.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async

from bindings import ratelimit
from chat.services.refusals import action_record_refused, rate_limit_record

from ..models import Membership, Thread
from ..selectors import SessionPin, membership_for_session


@dataclass
class ActionContext:
    user: Any
    thread: Thread
    membership: Membership
    capabilities: set[str]
    channel_name: str
    send: Callable[[dict[str, Any]], Awaitable[None]]
    state: dict[str, Any] = field(default_factory=dict)
    # What the socket was opened with (`admit` re-checks it) and how it is ended when the
    # check fails in a task the handler spawned (the consumer catches `SessionEnded` itself).
    pin: SessionPin | None = None
    end_session: Callable[[Any], Awaitable[None]] | None = None

    @property
    def can_act(self) -> bool:
        return self.membership.can_act


Handler = Callable[[ActionContext, dict[str, Any]], Awaitable[dict[str, Any] | None]]
HANDLERS: dict[str, Handler] = {}
# Handlers that call `admit` in their first database trip, instead of the consumer's trip
# before every action (a view's `tools/call`: membership, token and decision in one trip).
SELF_ADMITTING: set[str] = set()


class ActionError(Exception):
    """A refused action. `audited`: its audit row is already written (by the policy
    decision or the refusal itself); otherwise the consumer writes one (DESIGN §8.10)."""

    def __init__(
        self, code: str, message: str, details: Any = None, *, audited: bool = False
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details
        self.audited = audited

    def to_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            error["details"] = self.details
        return error


def action(name: str, *, admits_itself: bool = False) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        HANDLERS[name] = handler
        if admits_itself:
            SELF_ADMITTING.add(name)
        return handler

    return register


class SessionEnded(ActionError):
    """The member left the workspace, or the session or account changed: the socket ends."""

    def __init__(self) -> None:
        super().__init__("forbidden", "Your session has ended.", audited=True)


def refusal_record(
    ctx: ActionContext, action: str, code: str, extra: dict[str, Any] | None = None
) -> None:
    """Audit a refused action whose refusal is not audited yet, at a bounded rate per user
    (the service's `refusal_gate`): bad input must not become a flood of audit rows."""
    action_record_refused(
        user=ctx.user,
        workspace_id=ctx.thread.workspace_id,
        thread_id=ctx.thread.pk,
        action=action,
        reason=code,
        extra=extra,
    )


def admit(ctx: ActionContext) -> None:
    """Re-read the membership (and session, password, active flag) on the database thread;
    a self-admitting handler calls this first in its first trip. Raises `SessionEnded`."""
    assert ctx.pin is not None, "a socket's context carries its session pin"
    membership = membership_for_session(membership_id=ctx.membership.pk, pin=ctx.pin)
    if membership is None:
        raise SessionEnded()
    ctx.membership = membership


def require_actor(ctx: ActionContext) -> None:
    if not ctx.can_act:
        raise ActionError("forbidden", "Viewers can read this thread but not act in it.")


def rate_limited_error(verdict: ratelimit.Verdict, what: str) -> ActionError:
    wait = verdict.retry_after
    shown = "a moment" if wait == float("inf") else f"{max(1, round(wait))} s"
    return ActionError(
        "rate_limited",
        f"Too many {what}; try again in {shown}.",
        {"retryAfter": None if wait == float("inf") else round(wait, 3)},
        audited=True,
    )


async def take_tokens(ctx: ActionContext, buckets: list[tuple[str, str]]) -> ratelimit.Verdict:
    """Take a token from each (kind, key) bucket; the first refusal is returned (and
    audited, at most once per bucket every few seconds: a flood leaves a trace, not a
    flood of rows). Allowed: a verdict with ``allowed`` set. All the buckets in one trip to
    the store (``ratelimit.take_all_async``: in order, up to the first refusal)."""
    verdict = await ratelimit.take_all_async(buckets)
    if not verdict.allowed:
        if verdict.audit:
            await database_sync_to_async(rate_limit_record)(
                user=ctx.user,
                workspace_id=ctx.thread.workspace_id,
                thread_id=ctx.thread.pk,
                bucket=verdict.kind,
                refused_since_last=verdict.refused_since_audit,
            )
        return verdict
    return ratelimit.Verdict(True, 0.0)
