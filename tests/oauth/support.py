"""The example OAuth server (examples/oauth_server) for tests, and a consent-page driver."""

from __future__ import annotations

import contextlib
import html
import re
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx

from tests.fixtures.http_servers import free_port, serve_async

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "examples" / "oauth_server" / "server.py"
TOKEN_PREFIX = "atrium-oauth-sentinel-"


@dataclass
class NotesServer:
    port: int

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    async def control(self, path: str) -> dict:
        async with httpx.AsyncClient() as http:
            method = "GET" if path == "stats" else "POST"
            response = await http.request(method, f"{self.base}/_control/{path}")
            response.raise_for_status()
            return response.json()

    async def consent(self, authorize_url: str, account: str) -> str:
        """Follow the provider's pages as a person would; returns the callback URL."""
        async with httpx.AsyncClient() as http:
            page = await http.get(authorize_url, follow_redirects=True)
            assert page.status_code == 200, page.text
            request_id = parse_qs(urlparse(str(page.url)).query)["request"][0]
            answer = await http.post(
                f"{self.base}/consent", data={"request": request_id, "account": account}
            )
            assert answer.status_code == 302, answer.text
            return answer.headers["location"]


@contextlib.asynccontextmanager
async def notes_server(*options: str, log_path: Path | None = None) -> AsyncIterator[NotesServer]:
    port = free_port()
    command = [sys.executable, str(SERVER), "--port", str(port), *options]
    # Without metadata the server answers 401 at /mcp and 404 elsewhere: probe the port only.
    async with serve_async(command, port=port, probe_path=None, log_path=log_path, cwd=ROOT):
        yield NotesServer(port)


def authorize_url(response) -> str:
    """The provider URL of the connect view's "Continue to <server>" page."""
    assert response.status_code == 200, response.content
    found = re.search(rb'id="oauth-continue"[^>]*href="([^"]+)"', response.content)
    assert found, response.content
    return html.unescape(found.group(1).decode())


def callback_path(url: str) -> str:
    parsed = urlparse(url)
    return f"{parsed.path}?{parsed.query}"
