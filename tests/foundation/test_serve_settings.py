"""The ASGI server's settings that matter beyond speed (config/serve.py): checked as passed
to uvicorn, since a live server shows them only by their absence."""

from __future__ import annotations

from typing import Any

import uvicorn

from config import serve


def test_the_server_runs_the_tested_loop_without_compression_or_forwarded_headers(monkeypatch):
    passed: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: passed.update(kwargs, app=app))

    serve.serve(host="127.0.0.1", port=8123)

    assert passed["app"] == "config.asgi:application"
    # The standard event loop: uvicorn's "auto" would take uvloop wherever it is installed.
    assert passed["loop"] == "asyncio"
    assert passed["ws"] == "websockets-sansio"
    # Compressed frames leak secrets by their length (CRIME); the peer is the client.
    assert passed["ws_per_message_deflate"] is False
    assert passed["proxy_headers"] is False
    assert passed["ws_max_size"] == serve.WEBSOCKET_MAX_MESSAGE_BYTES
