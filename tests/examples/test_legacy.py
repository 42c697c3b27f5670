"""examples/legacy: legacy MCP-UI resources built as embedded resources."""

from __future__ import annotations

import httpx
import pytest
from mcp import Client
from mcp.types import CallToolResult, TextResourceContents

from tests.examples.support import texts

SERVER = ("legacy",)
pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

FRAME_SIZE_KEY = "mcpui.dev/ui-preferred-frame-size"
RENDER_DATA_KEY = "mcpui.dev/ui-initial-render-data"


def ui_resource(result: CallToolResult) -> TextResourceContents:
    resources = [b for b in result.content if b.type == "resource"]
    assert len(resources) == 1
    resource = resources[0].resource
    assert isinstance(resource, TextResourceContents)
    assert resource.uri.startswith("ui://legacy/")
    assert resource.meta[FRAME_SIZE_KEY] == ["100%", "320px"]
    assert isinstance(resource.meta[RENDER_DATA_KEY], dict)
    return resource


async def test_tools(module_client: Client) -> None:
    names = {t.name for t in (await module_client.list_tools()).tools}
    assert names == {"show_raw_html", "show_external_url", "show_remote_dom", "legacy_echo"}


async def test_raw_html_speaks_the_legacy_protocol(module_client: Client) -> None:
    result = await module_client.call_tool("show_raw_html", {"greeting": "Hi there"})
    resource = ui_resource(result)
    assert resource.uri == "ui://legacy/raw" and resource.mime_type == "text/html"
    assert resource.meta[RENDER_DATA_KEY]["greeting"] == "Hi there"
    assert "Hi there" in texts(result), "a text fallback for the model"
    html = resource.text
    for needle in (
        'send("tool", { toolName: "legacy_echo", params })',
        'send("prompt", { prompt',
        'send("link", { url',
        'send("notify", { message',
        '"ui-size-change"',
        '"ui-lifecycle-iframe-ready"',
        '"ui-message-received"',
        '"ui-message-response"',
        '"ui-lifecycle-iframe-render-data"',
        "window.parent.postMessage({ type, messageId, payload }",
    ):
        assert needle in html, needle


async def test_external_url_points_at_a_live_page(module_client: Client) -> None:
    result = await module_client.call_tool("show_external_url", {})
    resource = ui_resource(result)
    assert resource.mime_type == "text/uri-list"
    lines = resource.text.splitlines()
    assert lines[0].startswith("#")
    url = next(line for line in lines if line and not line.startswith("#"))
    assert url.startswith("http://127.0.0.1:")
    async with httpx.AsyncClient(timeout=5) as http:
        page = await http.get(url)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "An external page in a frame" in page.text

    custom = ui_resource(
        await module_client.call_tool("show_external_url", {"url": "https://example.com/"})
    )
    assert custom.text.splitlines()[-1] == "https://example.com/"
    refused = await module_client.call_tool("show_external_url", {"url": "javascript:alert(1)"})
    assert refused.is_error


async def test_remote_dom(module_client: Client) -> None:
    resource = ui_resource(await module_client.call_tool("show_remote_dom", {}))
    assert resource.mime_type == "application/vnd.mcp-ui.remote-dom+javascript; framework=react"
    assert "root.appendChild" in resource.text and "ui-button" in resource.text


async def test_legacy_echo(module_client: Client) -> None:
    result = await module_client.call_tool(
        "legacy_echo", {"message": "ping", "data": {"clicks": 2}}
    )
    assert texts(result) == "Echo: ping"
    assert result.structured_content["echo"] == {"message": "ping", "data": {"clicks": 2}}
