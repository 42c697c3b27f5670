"""The ASGI server: `python -m config.serve --port 8000` (scripts/run.sh, scripts/fleet.sh,
tests/live.py and bench.probe all start Atrium through here, so they share one setting).

uvicorn rather than daphne: uvicorn pauses a response while the client's socket buffer is
full, so a slow reader of a 50 MB media file costs the server a buffer, not the file
(daphne applies no backpressure: django/daphne#170; docs/media.md).
"""

from __future__ import annotations

import argparse

import uvicorn

# Frames up to 8 MiB reach Atrium, which answers anything past ATRIUM_MAX_WS_MESSAGE with an
# error and keeps the socket; a larger frame is refused from its header, before its payload
# is buffered, and the socket closes with 1009 (docs/security.md).
WEBSOCKET_MAX_MESSAGE_BYTES = 8 * 1024 * 1024
# On SIGTERM: sockets get 1012 (service restart) at once and reconnect elsewhere; requests
# in flight get this long to finish.
GRACEFUL_SHUTDOWN_SECONDS = 5


def serve(*, host: str, port: int) -> None:
    uvicorn.run(
        "config.asgi:application",
        host=host,
        port=port,
        # The standard library's event loop, whatever else is installed: uvicorn would take
        # uvloop when present, which the suite never runs, and which measured no faster
        # here (bench/README.md, session 18).
        loop="asyncio",
        # The sans-I/O websockets implementation: the legacy one is deprecated upstream.
        ws="websockets-sansio",
        ws_max_size=WEBSOCKET_MAX_MESSAGE_BYTES,
        # No compression: compressed frames mixing secrets with attacker-chosen text leak
        # through their length (CRIME), and daphne never offered it either.
        ws_per_message_deflate=False,
        # Channels' router answers no lifespan events.
        lifespan="off",
        # The client address is the socket's peer: nginx in the fleet, never a header a
        # browser on loopback could forge.
        proxy_headers=False,
        server_header=False,
        access_log=False,
        log_level="warning",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m config.serve", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    serve(host=args.host, port=args.port)


if __name__ == "__main__":
    main()
