"""Websocket guard: app host only, and only from the app's own origin."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from .hosts import is_sandbox_host


def allowed_ws_origins() -> set[str]:
    extra = getattr(settings, "ATRIUM_EXTRA_WS_ORIGINS", [])
    return {settings.ATRIUM_APP_ORIGIN.lower(), *(o.lower().rstrip("/") for o in extra)}


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
            await send({"type": "websocket.close", "code": 4403})
            return
        await self.app(scope, receive, send)
