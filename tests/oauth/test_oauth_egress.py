"""Security issue 23, F10: the URLs an MCP server names for signing in (its authorization
server's discovery, registration and token endpoints) must resolve to public addresses,
unless they are on the server's own origin or an administrator allows the origin; and
starting a sign-in is rate limited per person.

The flow tests run a real local HTTP server (a thread in this process) that asks for a
sign-in and names the authorization server the test chooses.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient

from audit.models import AuditEvent
from audit.types import AuditEventType
from mcp_bridge.egress import address_is_public, origin_of
from mcp_bridge.models import AuthMode, McpServer
from tests.conftest import make_user

# ---- the pure rule ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1", "127.8.9.10", "10.1.2.3", "172.16.0.1", "192.168.1.1",
        "169.254.169.254", "100.64.0.1", "0.0.0.0", "255.255.255.255", "224.0.0.251",
        "::1", "::", "fe80::1", "fc00::1", "fd12:3456::1", "ff02::1",
        "::ffff:127.0.0.1", "::ffff:169.254.169.254", "fe80::1%eth0", "not-an-address",
    ],
)  # fmt: skip
def test_non_public_addresses_are_refused(address: str) -> None:
    assert not address_is_public(address)


@pytest.mark.parametrize("address", ["8.8.8.8", "93.184.216.34", "2606:4700::1111"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert address_is_public(address)


def test_origins_are_compared_with_their_default_ports_written_out() -> None:
    assert origin_of("https://Auth.Example/x?y") == "https://auth.example:443"
    assert origin_of("https://auth.example:443") == "https://auth.example:443"
    assert origin_of("http://10.0.0.5:9000/token") == "http://10.0.0.5:9000"
    assert origin_of("http://[::1]:8080/") == "http://[::1]:8080"
    assert origin_of("http://localhost:9000") != origin_of("http://127.0.0.1:9000")


# ---- the flow, against a real local server ---------------------------------------------------


class _Stub:
    """An MCP endpoint at http://127.0.0.1:<port>/mcp that wants a sign-in and names
    ``authorization_server`` (which the stub also serves on ``localhost``: registration
    is refused, which proves the request got there)."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        self.authorization_server = ""
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def _json(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802
                stub.hits.append(f"{self.headers.get('Host')}{self.path}")
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path == "/mcp":
                    meta = f"{stub.base}/.well-known/oauth-protected-resource/mcp"
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", f'Bearer resource_metadata="{meta}"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self._json(400, {"error": "invalid_client_metadata"})  # /register

            def do_GET(self) -> None:  # noqa: N802
                stub.hits.append(f"{self.headers.get('Host')}{self.path}")
                if self.path.startswith("/.well-known/oauth-protected-resource"):
                    self._json(
                        200,
                        {
                            "resource": f"{stub.base}/mcp",
                            "authorization_servers": [stub.authorization_server],
                        },
                    )
                elif self.path.startswith("/.well-known/oauth-authorization-server"):
                    issuer = f"http://localhost:{stub.port}"
                    self._json(
                        200,
                        {
                            "issuer": issuer,
                            "authorization_endpoint": f"{issuer}/authorize",
                            "token_endpoint": f"{issuer}/token",
                            "registration_endpoint": f"{issuer}/register",
                            "response_types_supported": ["code"],
                            "code_challenge_methods_supported": ["S256"],
                        },
                    )
                else:
                    self._json(404, {})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"

    def as_hits(self) -> list[str]:
        """Requests that reached the authorization server (on the `localhost` origin)."""
        return [h for h in self.hits if h.startswith("localhost")]


@contextlib.contextmanager
def stub_server() -> Iterator[_Stub]:
    stub = _Stub()
    thread = threading.Thread(target=stub.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        stub.server.shutdown()
        stub.server.server_close()


@database_sync_to_async
def _setup(url: str):
    server = McpServer.objects.create(
        name="Notes", slug="notes", transport="streamable_http", url=url,
        auth_mode=AuthMode.OAUTH_MEMBER,
    )  # fmt: skip
    return server, make_user("amy")


@database_sync_to_async
def _failures() -> list[tuple[str, str]]:
    rows = AuditEvent.objects.filter(event_type=int(AuditEventType.OAUTH_CONNECT_FAILED))
    return [(row.reason, row.decision) for row in rows.order_by("pk")]


async def _connect(authorization_server: str, stub: _Stub):
    stub.authorization_server = authorization_server
    server, amy = await _setup(f"{stub.base}/mcp")
    client = AsyncClient()
    await client.aforce_login(amy)
    return await client.post(f"/oauth/connect/{server.slug}/")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "authorization_server",
    ["http://169.254.169.254", "http://10.1.2.3:8080", "http://127.0.0.2:9", "localhost"],
)
async def test_a_sign_in_that_names_a_private_address_is_refused_and_audited(
    authorization_server: str,
):
    with stub_server() as stub:
        if authorization_server == "localhost":  # reachable: the stub itself, by another name
            authorization_server = f"http://localhost:{stub.port}"
        response = await _connect(authorization_server, stub)
        assert response.status_code == 502
        assert b"a private or local network address" in response.content
        assert origin_of(authorization_server).encode() in response.content
        assert await _failures() == [("private_address", "denied")]
        assert stub.as_hits() == []  # nothing was sent there
        # The server's own origin (an administrator chose it) was asked, as always.
        assert any(h.endswith("/.well-known/oauth-protected-resource/mcp") for h in stub.hits)


@pytest.mark.django_db(transaction=True)
async def test_an_origin_an_administrator_allows_is_reached(settings):
    with stub_server() as stub:
        allowed = f"http://localhost:{stub.port}"
        settings.ATRIUM_OAUTH_ALLOWED_PRIVATE_ORIGINS = [allowed]
        response = await _connect(allowed, stub)
        # Discovery and registration reached the allowed origin (which refuses to register).
        assert response.status_code == 502
        assert b"refused to register Atrium" in response.content
        assert await _failures() == [("registration_refused", "failed")]
        assert f"localhost:{stub.port}/register" in stub.as_hits()


# ---- starting a sign-in is rate limited ------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_starting_sign_ins_is_rate_limited_per_person(settings):
    settings.ATRIUM_RATE_LIMITS = {**settings.ATRIUM_RATE_LIMITS, "oauth_connect": (2, 0.001)}
    amy, ben = await database_sync_to_async(lambda: (make_user("amy"), make_user("ben")))()
    clients = {}
    for user in (amy, ben):
        clients[user.username] = AsyncClient()
        await clients[user.username].aforce_login(user)
    codes = [(await clients["amy"].post("/oauth/connect/nowhere/")).status_code for _ in range(4)]
    assert codes == [404, 404, 429, 429]
    refused = await clients["amy"].post("/oauth/connect/nowhere/")
    assert b"Too many sign-ins started; try again in" in refused.content
    assert (await clients["ben"].post("/oauth/connect/nowhere/")).status_code == 404  # his own
    rows = await database_sync_to_async(
        lambda: list(AuditEvent.objects.filter(event_type=int(AuditEventType.RATE_LIMITED)))
    )()
    assert [(r.actor_user_id, r.extra["bucket"]) for r in rows] == [(amy.pk, "oauth_connect")]
