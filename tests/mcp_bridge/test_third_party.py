"""ConnectionManager against the published MCP servers (tools/mcp-servers), stdio and HTTP."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mcp_bridge.connection_pool import UI_MIME_TYPE
from mcp_bridge.connections import ConnectionManager
from mcp_bridge.server_spec import ServerSpec
from tests.fixtures import third_party
from tests.fixtures.third_party import SERVERS, SKIP_REASON, http_server_async, stdio_spec

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not third_party.installed(), reason=SKIP_REASON),
]

NAMES = sorted(SERVERS)


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[ConnectionManager]:
    manager = ConnectionManager(stderr_dir=tmp_path / "stderr")
    try:
        yield manager
    finally:
        await manager.aclose()


async def check_server(manager: ConnectionManager, name: str, spec: ServerSpec) -> None:
    """List tools, read every UI view, call the sample tool; check the raw wire results."""
    server = SERVERS[name]
    info = await manager.connect(spec)
    assert info["protocolVersion"] == "2025-11-25"  # TypeScript SDK servers: handshake era

    tools = {tool["name"]: tool for tool in await manager.list_tools(spec)}
    assert server.sample_tool in tools
    for tool in tools.values():
        assert tool["inputSchema"]["type"] == "object"

    ui_uris: set[str] = set()
    for tool_name in server.ui_tools:
        ui = tools[tool_name]["_meta"]["ui"]
        assert isinstance(ui, dict)
        if "resourceUri" in ui:
            assert ui["resourceUri"].startswith("ui://")
            # These servers also set the deprecated flat key, with the same value.
            assert tools[tool_name]["_meta"]["ui/resourceUri"] == ui["resourceUri"]
            ui_uris.add(ui["resourceUri"])
    if server.ui_tools:
        assert ui_uris, f"{name} links no view"
    else:
        assert all("ui" not in (tool.get("_meta") or {}) for tool in tools.values())

    listed = {resource["uri"]: resource for resource in await manager.list_resources(spec)}
    for uri in ui_uris:
        assert listed[uri]["mimeType"] == UI_MIME_TYPE
        read = await manager.read_resource(spec, uri)
        (content,) = read["contents"]
        assert content["uri"] == uri
        assert content["mimeType"] == UI_MIME_TYPE
        html = content.get("text") or base64.b64decode(content["blob"]).decode()
        assert "<html" in html.lower()
        assert len(html) > 50_000  # single-file apps: scripts and styles inlined

    result = await manager.call_tool(spec, server.sample_tool, server.sample_arguments)
    check_sample_result(name, result)


def check_sample_result(name: str, result: dict[str, Any]) -> None:
    assert result["isError"] is False
    assert result["content"] and result["content"][0]["type"] == "text"
    if name == "everything":
        assert result["content"] == [{"type": "text", "text": "Echo: hello"}]
    elif name == "basic-vanillajs":
        assert result["structuredContent"]["time"] == result["content"][0]["text"]
    elif name == "system-monitor":
        info = result["structuredContent"]
        assert info["cpu"]["count"] >= 1 and info["memory"]["totalBytes"] > 0
    elif name == "debug":
        # Result `_meta` (UI-only data) arrives untouched in wire form.
        assert "debugInfo" in result["_meta"]
        assert result["structuredContent"]["config"]


@pytest.mark.parametrize("name", NAMES)
async def test_over_stdio(manager: ConnectionManager, name: str) -> None:
    await check_server(manager, name, stdio_spec(name))


@pytest.mark.parametrize("name", NAMES)
async def test_over_streamable_http(manager: ConnectionManager, tmp_path: Path, name: str) -> None:
    async with http_server_async(name, log_path=tmp_path / f"{name}.log") as spec:
        await check_server(manager, name, spec)
        await manager.close(spec)  # end the HTTP session while the server still runs


async def test_everything_rich_results_and_progress(manager: ConnectionManager) -> None:
    spec = stdio_spec("everything")
    image = await manager.call_tool(spec, "get-tiny-image")
    kinds = [block["type"] for block in image["content"]]
    assert "image" in kinds
    picture = next(block for block in image["content"] if block["type"] == "image")
    assert picture["mimeType"] == "image/png"
    assert base64.b64decode(picture["data"]).startswith(b"\x89PNG")

    weather = await manager.call_tool(spec, "get-structured-content", {"location": "New York"})
    assert json.loads(weather["content"][0]["text"]) == weather["structuredContent"]

    updates: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total))

    done = await manager.call_tool(
        spec,
        "trigger-long-running-operation",
        {"duration": 0.4, "steps": 4},
        progress=on_progress,
    )
    assert "completed" in done["content"][0]["text"]
    assert sorted(updates) == [(1.0, 4.0), (2.0, 4.0), (3.0, 4.0), (4.0, 4.0)]

    # The stdio child sees a clean environment: no variables of ours beyond the basics.
    env = json.loads((await manager.call_tool(spec, "get-env"))["content"][0]["text"])
    assert set(env) <= {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL"} | {
        "LC_CTYPE",
        "TZ",
        "TMPDIR",
    }
