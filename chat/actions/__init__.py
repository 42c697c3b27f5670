"""Websocket actions: one small async handler per client message type.

The registry (:mod:`.registry`: ``ActionContext``, ``action``, ``HANDLERS``…) is below the
handler modules, which register their handlers when this package is imported.
"""

from . import app_views, messages, tools  # noqa: F401  (register their handlers)
from .registry import (  # noqa: F401
    HANDLERS,
    SELF_ADMITTING,
    ActionContext,
    ActionError,
    Handler,
    SessionEnded,
    action,
    admit,
    rate_limited_error,
    refusal_record,
    require_actor,
    take_tokens,
)
