"""Reads of server requests."""

from __future__ import annotations

from typing import Any

from .models import ServerRequest, ServerRequestStatus
from .presenters import serialize_server_request


def thread_server_requests(*, thread_id: int, limit: int = 100) -> list[dict[str, Any]]:
    """The thread's recent server requests (pending ones always), for its snapshot."""
    rows = ServerRequest.objects.select_related("server", "tool_call", "for_user", "decided_by")
    recent = list(rows.filter(thread_id=thread_id).order_by("-id")[:limit])
    pending_ids = {r.pk for r in recent}
    older_pending = rows.filter(thread_id=thread_id, status=ServerRequestStatus.PENDING).exclude(
        pk__in=pending_ids
    )
    return [
        serialize_server_request(r) for r in sorted([*recent, *older_pending], key=lambda r: r.pk)
    ]
