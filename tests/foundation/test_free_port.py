"""`free_port` holds the port it hands out (tests/fixtures/http_servers.py): parallel
pytest-xdist workers start servers on loopback ports, and a port released before its server
bound it went to the other worker's server once (session 17)."""

from __future__ import annotations

import socket

import pytest

from tests.fixtures.http_servers import free_port


def test_a_handed_out_port_is_taken_by_nobody_else_yet_its_server_can_listen_on_it():
    port = free_port()
    # Held: a socket that does not ask to share the address cannot bind it.
    with socket.socket() as squatter, pytest.raises(OSError):
        squatter.bind(("127.0.0.1", port))
    # Its server (SO_REUSEADDR, as uvicorn, nginx, redis-server, Node and http.server set)
    # binds and listens, and a client reaches it.
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
        server.listen()
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    # Once its server is gone, nothing listens there: connecting is refused, not queued.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
