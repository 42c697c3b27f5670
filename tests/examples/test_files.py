"""examples/files: a file passed as a link (fetched) or embedded gives its exact stats."""

from __future__ import annotations

import base64
import hashlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from mcp import Client

from tests.examples.support import dump, texts

SERVER = ("files",)
pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]
BODY = b"line one\nline two\nline three\n" + "é\n".encode()


class _Files(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path == "/notes.txt":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY)
        elif self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/notes.txt")
            self.end_headers()
        else:
            self.send_error(404)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def origin() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


async def test_the_tools_declare_their_file_arguments(module_client: Client) -> None:
    tools = {t.name: dump(t) for t in (await module_client.list_tools()).tools}
    assert set(tools) == {"file_stats", "url_stats", "embedded_stats"}
    assert all(t["annotations"]["readOnlyHint"] for t in tools.values())
    assert tools["url_stats"]["inputSchema"]["properties"]["url"]["format"] == "uri"
    refs = tools["file_stats"]["inputSchema"]["properties"]["file"]["anyOf"]
    assert [r["$ref"] for r in refs] == ["#/$defs/ResourceLink", "#/$defs/EmbeddedResource"]


async def test_a_link_is_fetched_and_described_exactly(module_client: Client, origin) -> None:
    link = {"type": "resource_link", "uri": f"{origin}/notes.txt", "name": "notes.txt"}
    result = await module_client.call_tool("file_stats", {"file": link, "lines": 2})
    assert not result.is_error, texts(result)
    assert result.structured_content == {
        "name": "notes.txt",
        "mimeType": "text/plain; charset=utf-8",
        "size": len(BODY),
        "sha256": hashlib.sha256(BODY).hexdigest(),
        "lines": 4,
        "firstLines": ["line one", "line two"],
        "via": "link",
    }
    back = [b for b in result.content if b.type == "resource_link"]
    assert [str(b.uri) for b in back] == [f"{origin}/notes.txt"]
    plain = await module_client.call_tool("url_stats", {"url": f"{origin}/notes.txt"})
    assert plain.structured_content["sha256"] == hashlib.sha256(BODY).hexdigest()


async def test_embedded_text_and_blob_are_read(module_client: Client) -> None:
    text = {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "a\nb\n"}}
    result = await module_client.call_tool("embedded_stats", {"file": text})
    assert result.structured_content["lines"] == 2 and result.structured_content["name"] == "a.txt"
    blob = {
        "type": "resource",
        "resource": {"uri": "x:b.bin", "blob": base64.b64encode(BODY).decode()},
    }
    result = await module_client.call_tool("file_stats", {"file": blob})
    assert result.structured_content["sha256"] == hashlib.sha256(BODY).hexdigest()
    assert result.structured_content["via"] == "embedded"


async def test_failures_are_error_results(module_client: Client, origin) -> None:
    for uri in (f"{origin}/missing", f"{origin}/moved", "file:///etc/passwd"):
        result = await module_client.call_tool("url_stats", {"url": uri})
        assert result.is_error, uri
    assert "HTTP 302" in texts(
        await module_client.call_tool("url_stats", {"url": f"{origin}/moved"})
    )
