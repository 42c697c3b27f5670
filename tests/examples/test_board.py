"""examples/board: an MCP App with app-only tools, structured content and result _meta."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.examples.support import APP_MIME, dump, http_server, stdio_client, texts, ui_extension

pytestmark = pytest.mark.slow


def items_by_column(board: dict[str, Any]) -> dict[str, list[str]]:
    return {column["id"]: [item["id"] for item in column["items"]] for column in board["columns"]}


async def test_tools_declare_visibility_annotations_and_view() -> None:
    async with stdio_client("board") as client:
        tools = {tool.name: dump(tool) for tool in (await client.list_tools()).tools}

    assert set(tools) == {"list_items", "add_item", "move_item", "refresh", "delete_item"}
    assert tools["list_items"]["_meta"]["ui"] == {
        "resourceUri": "ui://board/app",
        "visibility": ["model", "app"],
    }
    assert tools["list_items"]["annotations"]["readOnlyHint"] is True
    assert tools["add_item"]["_meta"]["ui"]["visibility"] == ["model", "app"]
    assert tools["add_item"]["annotations"]["readOnlyHint"] is False
    assert tools["move_item"]["_meta"]["ui"]["visibility"] == ["app"]
    assert tools["move_item"]["annotations"]["idempotentHint"] is True
    assert tools["refresh"]["_meta"]["ui"]["visibility"] == ["app"]
    assert tools["refresh"]["annotations"]["readOnlyHint"] is True
    assert tools["delete_item"]["_meta"]["ui"]["visibility"] == ["model", "app"]
    assert tools["delete_item"]["annotations"]["destructiveHint"] is True
    assert set(tools["move_item"]["inputSchema"]["required"]) == {"id", "to"}


async def test_ui_resource_is_a_self_contained_app() -> None:
    async with stdio_client("board") as client:
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        contents = (await client.read_resource("ui://board/app")).contents

    assert listed["ui://board/app"].mime_type == APP_MIME
    assert len(contents) == 1
    item = dump(contents[0])
    assert item["mimeType"] == APP_MIME
    # _meta.ui sits on the content item: a border, and no external domains at all.
    assert item["_meta"]["ui"] == {"csp": {}, "prefersBorder": True}
    html = item["text"]
    assert html.lstrip().lower().startswith("<!doctype html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html), "no external loads"
    for needle in (
        '"ui/initialize"',
        '"2026-01-26"',
        '"ui/notifications/initialized"',
        '"ui/notifications/tool-result"',
        '"ui/notifications/host-context-changed"',
        '"ui/resource-teardown"',
        '"ui/notifications/size-changed"',
        '"tools/call"',
        '"move_item"',
        '"delete_item"',
        "--color-background-primary",
    ):
        assert needle in html, needle


async def test_list_add_move_delete() -> None:
    async with stdio_client("board") as client:
        listed = await client.call_tool("list_items", {})
        assert not listed.is_error
        board = listed.structured_content
        assert [c["id"] for c in board["columns"]] == ["todo", "doing", "done"]
        assert board["total"] == 7
        # Text fallback for the model; UI-only data in the result _meta.
        assert "[ATR-101]" in texts(listed) and "To do (3)" in texts(listed)
        meta = listed.meta or {}
        assert meta["board/version"] == board["version"]
        assert "board/renderedAt" in meta
        version = board["version"]

        added = await client.call_tool(
            "add_item", {"title": "  Write release notes ", "column": "doing"}
        )
        new_id = next(
            item["id"]
            for item in added.structured_content["columns"][1]["items"]
            if item["title"] == "Write release notes"
        )
        assert added.meta["board/version"] == version + 1
        assert f"Added {new_id}" in texts(added)

        moved = await client.call_tool("move_item", {"id": new_id, "to": "done", "position": 0})
        assert items_by_column(moved.structured_content)["done"][0] == new_id
        again = await client.call_tool("move_item", {"id": new_id, "to": "done", "position": 0})
        assert again.structured_content == moved.structured_content, "move_item is idempotent"
        assert again.meta["board/version"] == moved.meta["board/version"]

        deleted = await client.call_tool("delete_item", {"id": new_id})
        assert new_id not in sum(items_by_column(deleted.structured_content).values(), [])
        assert deleted.structured_content["total"] == 7

        missing = await client.call_tool("delete_item", {"id": new_id})
        assert missing.is_error and f"No item with id '{new_id}'" in texts(missing)
        bad_column = await client.call_tool("add_item", {"title": "x", "column": "later"})
        assert bad_column.is_error
        refreshed = await client.call_tool("refresh", {})
        assert refreshed.structured_content == deleted.structured_content


async def test_state_file_survives_restart(tmp_path: Path) -> None:
    state = tmp_path / "board.json"
    env = {"BOARD_STATE_FILE": str(state)}
    async with stdio_client("board", env=env) as client:
        added = await client.call_tool("add_item", {"title": "Persist me"})
        version = added.structured_content["version"]
    assert state.exists() and "Persist me" in state.read_text()

    async with stdio_client("board", env=env) as client:
        listed = await client.call_tool("list_items", {})
    assert "Persist me" in texts(listed)
    assert listed.structured_content["version"] == version
    assert json.loads(state.read_text())["version"] == version


async def test_streamable_http() -> None:
    with http_server("board") as url:
        async with Client(url, extensions=[ui_extension()], cache=None) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "move_item" in names
            resource = (await client.read_resource("ui://board/app")).contents[0]
            assert resource.mime_type == APP_MIME
            added = await client.call_tool("add_item", {"title": "Over HTTP"})
            listed = await client.call_tool("list_items", {})
    assert not added.is_error
    assert "Over HTTP" in texts(listed)
