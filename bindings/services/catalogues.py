"""Catalogues of the servers bound to a thread, loaded when missing."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from bindings.selectors import bindings_for_thread
from mcp_bridge import gateway


async def thread_catalogues_ensure(*, thread: Any) -> None:
    """Have the catalogue of every server bound to the thread loaded (asked of a server
    that was never listed; stored by ``mcp_bridge``'s catalogue service)."""
    for binding in await database_sync_to_async(bindings_for_thread)(thread):
        await gateway.ensure_catalogue(binding.server)
