"""mcp_bridge's own receivers of ``signals.server_notified``: the per-server log."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from django.dispatch import receiver

from .services.server_log import server_log_record
from .signals import server_notified


@receiver(server_notified, dispatch_uid="mcp_bridge.server_log")
async def store_log_line(sender: Any, *, server: Any, method: str, params: Any, **_: Any) -> None:
    """`notifications/message` → one bounded log line (no audit row: a log, not a change)."""
    if method == "notifications/message" and isinstance(params, dict):
        await database_sync_to_async(server_log_record)(server_id=server.pk, params=params)
