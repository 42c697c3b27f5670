"""The per-server log (MCP logging, `notifications/message`) and its level.

A log line is not a state change of Atrium: ``server_log_record`` stores it without an
audit row (a chatty server would otherwise flood the audit log), bounded per server.
Changing the level a server is asked for is an admin's decision: ``server_log_level_set``
audits it (``SERVER_LOG_LEVEL_SET``). See docs/mcp-client.md.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import transaction

from audit.types import AuditEventType, Decision
from audit.writer import record

from ..models import LOG_LEVELS, McpServer, ServerLogEntry

MAX_PER_SERVER = 2_000  # the newest lines kept per server
PRUNE_EVERY = 50  # prune when a server's new line id is a multiple of this
MAX_DATA_CHARS = 8_000  # a line's data, as JSON text; longer is cut (and says so)
MAX_LOGGER_CHARS = 200


class ServerLogError(ValueError):
    pass


def _bounded_data(data: Any) -> Any:
    try:
        text = json.dumps(data, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return {"unreadable": True}
    if len(text) <= MAX_DATA_CHARS:
        return data
    return {"truncated": text[:MAX_DATA_CHARS], "chars": len(text)}


def server_log_record(*, server_id: int, params: dict[str, Any]) -> ServerLogEntry | None:
    """Store one `notifications/message` (``params``: wire JSON); a line with no known
    level is malformed and dropped (returns None)."""
    level = params.get("level")
    if level not in LOG_LEVELS:
        return None
    logger = params.get("logger")
    entry = ServerLogEntry.objects.create(
        server_id=server_id,
        level=level,
        logger=logger[:MAX_LOGGER_CHARS] if isinstance(logger, str) else "",
        data=_bounded_data(params.get("data")),
    )
    if entry.pk % PRUNE_EVERY == 0:
        server_log_prune(server_id=server_id)
    return entry


def server_log_prune(*, server_id: int, keep: int = MAX_PER_SERVER) -> int:
    """Delete all but the newest ``keep`` lines of a server; returns how many went."""
    boundary = (
        ServerLogEntry.objects.filter(server_id=server_id)
        .order_by("-id")
        .values_list("id", flat=True)[keep : keep + 1]
    )
    oldest_kept = list(boundary)
    if not oldest_kept:
        return 0
    deleted, _ = ServerLogEntry.objects.filter(server_id=server_id, id__lte=oldest_kept[0]).delete()
    return deleted


def server_log_level_set(*, server: McpServer, level: str, actor: Any) -> bool:
    """Set the lowest level the server is asked to log ("" for its default). The level is
    part of the server's connection spec: the next request opens a connection that asks
    for it (``logging/setLevel`` on 2025-era servers, the per-request opt-in on 2026-era
    ones). Returns False when nothing changed (and writes nothing)."""
    if level and level not in LOG_LEVELS:
        raise ServerLogError(f"Unknown log level '{level}' (one of {', '.join(LOG_LEVELS)}).")
    with transaction.atomic():
        row = McpServer.objects.select_for_update().get(pk=server.pk)
        if row.log_level == level:
            return False
        previous = row.log_level
        McpServer.objects.filter(pk=row.pk).update(log_level=level)
        record(
            event_type=AuditEventType.SERVER_LOG_LEVEL_SET,
            decision=Decision.ALLOWED,
            actor_kind="user",
            actor_user_id=getattr(actor, "pk", None),
            server_id=row.pk,
            extra={"level": level or "default", "previous": previous or "default"},
        )
    server.log_level = level
    return True
