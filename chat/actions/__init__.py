"""Websocket actions: one small async handler per client message type.

Handlers are registered with :func:`action` and receive an :class:`ActionContext`. They
check what they need (membership is re-read before every action), call services through
``database_sync_to_async``, and return a reply payload (or None). Anything slow runs in a
task (see :mod:`chat.runtime`), never inside the handler.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..models import Membership, Thread


@dataclass
class ActionContext:
    user: Any
    thread: Thread
    membership: Membership
    capabilities: set[str]
    channel_name: str
    send: Callable[[dict[str, Any]], Awaitable[None]]
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def can_act(self) -> bool:
        return self.membership.can_act


Handler = Callable[[ActionContext, dict[str, Any]], Awaitable[dict[str, Any] | None]]
HANDLERS: dict[str, Handler] = {}


class ActionError(Exception):
    def __init__(self, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            error["details"] = self.details
        return error


def action(name: str) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        HANDLERS[name] = handler
        return handler

    return register


def require_actor(ctx: ActionContext) -> None:
    if not ctx.can_act:
        raise ActionError("forbidden", "Viewers can read this thread but not act in it.")


def load_all() -> None:
    """Import every action module so its handlers register."""
    from . import messages, tools, views  # noqa: F401
