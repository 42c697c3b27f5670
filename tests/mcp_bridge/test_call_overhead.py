"""What a tool call repeats, built once (issue 28: the host's part of a view's `tools/call`).

A call asks for its server's spec twice (the task-support question, then the call itself),
and each used to build a ``ServerSpec`` (hashing the whole config). Specs are now kept by
everything they are made of: the same config is built once, any change — the row, a
`${NAME}` variable's value — is a new spec with a new key (so a new connection), exactly as
before.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_bridge import gateway
from mcp_bridge.models import McpServer, Tool
from mcp_bridge.server_spec import ServerSpec
from mcp_bridge.services import servers
from mcp_bridge.services.servers import ServerConfigError, spec_for

BOARD = Path(__file__).resolve().parents[2] / "examples" / "board" / "server.py"


@pytest.fixture
def builds(monkeypatch) -> list[str]:
    """The slugs of the specs built (``ServerSpec.create``), from an empty cache."""
    built: list[str] = []
    create = ServerSpec.create.__func__  # type: ignore[attr-defined]

    def counted(cls: type[ServerSpec], slug: str, **config: Any) -> ServerSpec:
        built.append(slug)
        return create(cls, slug, **config)

    monkeypatch.setattr(ServerSpec, "create", classmethod(counted))
    servers._cached_spec.cache_clear()
    yield built
    servers._cached_spec.cache_clear()


def _row(**fields: Any) -> McpServer:
    values: dict[str, Any] = {
        "pk": 7,
        "name": "Files",
        "slug": "files",
        "transport": "stdio",
        "command": "node",
        "args": ["server.js", "--root", "/srv"],
        "env": {"TOKEN": "t0k3n"},
        "headers": {},
        "cwd": "",
        "url": "",
        "call_timeout": 60.0,
        "connect_timeout": 20.0,
        "log_level": "",
    }
    values.update(fields)
    return McpServer(**values)


def test_the_same_config_is_built_once(builds) -> None:
    first = spec_for(_row())
    assert spec_for(_row()) is first  # another instance of the same row
    assert spec_for(_row(pk=8, enabled=False, last_error="down")) is first  # not spec fields
    assert builds == ["files"]


@pytest.mark.parametrize(
    "change",
    [
        {"name": "Files 2"},
        {"slug": "files-2"},
        {"command": "deno"},
        {"args": ["server.js"]},
        {"env": {"TOKEN": "other"}},
        {"env": {"TOKEN": "t0k3n", "MORE": "1"}},
        {"cwd": "/srv"},
        {"call_timeout": 5},
        {"connect_timeout": 3},
        {"log_level": "debug"},
        {"transport": "streamable_http", "url": "https://mcp.example/mcp", "command": ""},
    ],
)
def test_any_change_of_the_row_is_a_new_spec(builds, change: dict[str, Any]) -> None:
    before = spec_for(_row())
    after = spec_for(_row(**change))
    assert after.key != before.key  # a new connection, as before
    assert len(builds) == 2
    assert spec_for(_row()) is before  # the old config still maps to its spec


def test_headers_are_part_of_the_key(builds) -> None:
    http = {"transport": "streamable_http", "url": "https://mcp.example/mcp", "command": ""}
    one = spec_for(_row(headers={"Authorization": "Bearer a"}, **http))
    two = spec_for(_row(headers={"Authorization": "Bearer b"}, **http))
    assert one.key != two.key
    assert dict(two.headers) == {"Authorization": "Bearer b"}


def test_a_changed_variable_is_read_again(builds, monkeypatch) -> None:
    """`${NAME}` is resolved on every call: a new value is a new spec, never a stale one."""
    row = _row(env={"TOKEN": "${ATRIUM_MCP_TEST_TOKEN}"})
    monkeypatch.setenv("ATRIUM_MCP_TEST_TOKEN", "first")
    first = spec_for(row)
    assert first.env["TOKEN"] == "first"
    monkeypatch.setenv("ATRIUM_MCP_TEST_TOKEN", "second")
    second = spec_for(row)
    assert second.env["TOKEN"] == "second"
    assert second.key != first.key
    assert builds == ["files", "files"]


def test_a_refused_config_is_refused_every_time(builds) -> None:
    row = _row(env={"TOKEN": "${SECRET_KEY}"})
    for _ in range(2):
        with pytest.raises(ServerConfigError, match="ATRIUM_MCP_"):
            spec_for(row)
    broken = _row(call_timeout=0)
    for _ in range(2):
        with pytest.raises(ServerConfigError, match="misconfigured"):
            spec_for(broken)
    assert builds == ["files", "files"]  # tried each time, never kept


def test_the_spec_is_what_it_was(builds) -> None:
    """The cached path builds exactly the spec the row made before (same key, same fields)."""
    row = _row(log_level="warning")
    spec = spec_for(row)
    expected = ServerSpec.create(
        "files",
        name="Files",
        transport="stdio",
        command="node",
        args=("server.js", "--root", "/srv"),
        env={"TOKEN": "t0k3n"},
        cwd=None,
        url=None,
        headers={},
        call_timeout=60.0,
        connect_timeout=20.0,
        log_level="warning",
    )
    assert spec == expected and spec.key == expected.key
    assert dict(spec.env) == dict(expected.env)


@pytest.mark.slow
async def test_calls_build_their_spec_once(builds, tmp_path) -> None:
    """The web process's sequence for each call (task support, then the call) against the
    real board server: one spec for all of them."""
    server = _row(
        name="Board",
        slug="board",
        command=sys.executable,
        args=[str(BOARD)],
        env={"BOARD_STATE_FILE": str(tmp_path / "board.json")},
    )
    tool = Tool(server=server, name="refresh", input_schema={"type": "object"})
    try:
        for _ in range(3):
            _declared, mode = await gateway.tool_task_support(server, tool)
            raw, _ms = await gateway.call_tool(server, tool, {})
            assert mode == "forbidden" and raw.get("isError") is not True
    finally:
        await gateway.close_all()
    assert builds == ["board"]
