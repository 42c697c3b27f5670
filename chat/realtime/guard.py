"""Websocket guard: app host only, and only from the app's own origin."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from audit.types import AuditEventType
from chat.services.refusals import action_record_refused

from ..sandbox_hosts import is_sandbox_host


def allowed_ws_origins() -> set[str]:
    extra = getattr(settings, "ATRIUM_EXTRA_WS_ORIGINS", [])
    return {settings.ATRIUM_APP_ORIGIN.lower(), *(o.lower().rstrip("/") for o in extra)}


def client_address(scope: dict) -> str:
    """The client address of an ASGI connection (the socket's peer: config.serve trusts
    no forwarding header), or "" when the server does not say."""
    client = scope.get("client")
    return str(client[0]) if client else ""


@database_sync_to_async
def _audit_refused(reason: str, extra: dict[str, Any], client: str) -> None:
    """Every refused handshake is audited, at a bounded rate per client address (nobody is
    signed in yet): a page that retries forever leaves a few rows and a count of the rest."""
    action_record_refused(
        user=None,
        workspace_id=None,
        thread_id=None,
        action="websocket",
        reason=reason,
        event_type=AuditEventType.SOCKET_REJECTED,
        extra=extra,
        client=client,
    )


class WebsocketGuard:
    """Refuse the handshake (403) for the sandbox host or a foreign Origin."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        headers = {k.decode("latin1").lower(): v.decode("latin1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        origin = headers.get("origin", "").lower().rstrip("/")
        if is_sandbox_host(host) or origin not in allowed_ws_origins():
            await receive()  # the websocket.connect message
            await _audit_refused(
                "sandbox_host" if is_sandbox_host(host) else "origin_not_allowed",
                {"origin": origin[:200], "host": host[:200], "path": str(scope.get("path"))[:200]},
                client_address(scope),
            )
            await send({"type": "websocket.close", "code": 4403})
            return
        await self.app(scope, receive, send)
