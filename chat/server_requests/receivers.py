"""``notifications/elicitation/complete`` (``mcp_bridge.signals.server_notified``) closes the
URL card it names and wakes a call waiting to be retried."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from mcp_bridge.signals import server_notified

from .services import server_request_complete

COMPLETE = "notifications/elicitation/complete"
_complete = database_sync_to_async(lambda **kw: server_request_complete(**kw))


async def on_server_notified(
    sender: Any, *, server: Any = None, method: str = "", params: Any = None, **_: Any
) -> None:
    if method != COMPLETE or server is None or not isinstance(params, dict):
        return
    elicitation_id = params.get("elicitationId")
    if isinstance(elicitation_id, str) and elicitation_id:
        await _complete(server_id=server.pk, elicitation_id=elicitation_id[:200])


def connect() -> None:
    server_notified.connect(on_server_notified, dispatch_uid="chat.server_requests.complete")
