"""Server notifications about prompts and resources (``mcp_bridge.signals.server_notified``):
list changes forget the remembered listings; an update refreshes attached copies."""

from __future__ import annotations

import asyncio
from typing import Any

from django.dispatch import receiver

from mcp_bridge.signals import server_notified

from . import flows, listings

_refreshes: set[asyncio.Task[Any]] = set()


@receiver(server_notified, dispatch_uid="chat.server_context")
async def on_server_notified(
    sender: Any, *, server: Any, method: str, params: Any, **_: Any
) -> None:
    if method == "notifications/prompts/list_changed":
        listings.forget(server.pk, "prompts")
    elif method == "notifications/resources/list_changed":
        listings.forget(server.pk, "resources", "templates")
    elif method == "notifications/resources/updated" and isinstance(params, dict):
        uri = params.get("uri")
        if isinstance(uri, str):
            # Reading the resource is a request on the same connection: not on its
            # callback task (receivers must be quick).
            task = asyncio.get_running_loop().create_task(
                flows.resource_updated(server=server, uri=uri)
            )
            _refreshes.add(task)
            task.add_done_callback(_refreshes.discard)
