"""A connection keeps the UI document it read (``gateway.ui_resource(..., reuse=True)``,
``ConnectionManager.kept``; bench/README.md issue 28) until the server tells of a change:
a real stdio server (tests/fixtures/mcp_servers/ui_updates.py) that counts every
``resources/read`` and ``resources/list`` and changes its page on request."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mcp_bridge import gateway
from mcp_bridge.connections import ConnectionManager
from mcp_bridge.server_spec import ServerSpec
from tests.factories import McpServerFactory
from tests.waiting import apoll

pytestmark = pytest.mark.django_db(transaction=True)

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_servers" / "ui_updates.py"
VIEW = "ui://updates/view"


@pytest.fixture
def updates_server():
    return McpServerFactory(slug="updates", command=sys.executable, args=[str(SERVER)])


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    await gateway.close_all()


async def _reads(server) -> str:
    """What the server says it was asked: ``reads=N lists=M``."""
    tool = await gateway.tool_for(server, "show")
    raw, _ = await gateway.call_tool(server, tool, {})
    return raw["content"][0]["text"]


async def _change(server, notify: str) -> None:
    tool = await gateway.tool_for(server, "change")
    await gateway.call_tool(server, tool, {"notify": notify})


async def _forgotten(server) -> bool:
    spec = await gateway.server_spec(server)
    return gateway.manager().kept(spec, ("ui_resource", server.pk), VIEW) is None


async def test_a_kept_document_is_not_read_again_until_the_server_says_it_changed(
    updates_server,
) -> None:
    first = await gateway.ui_resource(updates_server, VIEW, reuse=True)
    again = await gateway.ui_resource(updates_server, VIEW, reuse=True)
    assert again.pk == first.pk
    assert await _reads(updates_server) == "reads=1 lists=1"
    # Its policy is the one read with it (parsed and checked then; the binding is applied
    # to it whenever a view is served).
    assert again.meta["csp"]["connectDomains"] == ["https://api.example.com"]

    # notifications/resources/updated for the page: the next call reads it again and
    # finds the new version.
    await _change(updates_server, "updated")
    await apoll(lambda: _forgotten(updates_server), reason="the update notification")
    changed = await gateway.ui_resource(updates_server, VIEW, reuse=True)
    assert changed.pk != first.pk and "version 2" in changed.text
    assert await _reads(updates_server) == "reads=2 lists=2"
    assert (await gateway.ui_resource(updates_server, VIEW, reuse=True)).pk == changed.pk

    # resources/list_changed drops it too.
    await _change(updates_server, "list")
    await apoll(lambda: _forgotten(updates_server), reason="the list_changed notification")
    listed = await gateway.ui_resource(updates_server, VIEW, reuse=True)
    assert "version 3" in listed.text
    assert await _reads(updates_server) == "reads=3 lists=3"


async def test_a_reconnect_reads_again(updates_server) -> None:
    first = await gateway.ui_resource(updates_server, VIEW, reuse=True)
    await gateway.manager().close(await gateway.server_spec(updates_server))
    # A fresh process: its own counts, and nothing kept from the old connection.
    again = await gateway.ui_resource(updates_server, VIEW, reuse=True)
    assert again.pk == first.pk  # the same document, found by its hash
    assert await _reads(updates_server) == "reads=1 lists=1"


async def test_without_reuse_the_document_is_always_read(updates_server) -> None:
    await gateway.ui_resource(updates_server, VIEW, reuse=True)
    # A server that changes its page without a word: kept until it says so (or a
    # reconnect); a plain read (the admin's `mcp` command) still reads and finds it.
    await _change(updates_server, "none")
    assert "version 1" in (await gateway.ui_resource(updates_server, VIEW, reuse=True)).text
    fresh = await gateway.ui_resource(updates_server, VIEW)
    assert "version 2" in fresh.text
    assert await _reads(updates_server) == "reads=2 lists=2"
    # What a plain read found is kept for the next call.
    assert (await gateway.ui_resource(updates_server, VIEW, reuse=True)).pk == fresh.pk
    assert await _reads(updates_server) == "reads=2 lists=2"


async def test_a_server_that_cannot_tell_of_changes_is_read_every_time(tmp_path) -> None:
    # A handshake-era connection to a server that does not declare resources.subscribe:
    # no notifications/resources/updated is promised, so nothing is kept.
    spec = ServerSpec(key="updates-legacy", command=sys.executable, args=(str(SERVER),))
    spec = ServerSpec(
        key=spec.key, command=spec.command, args=spec.args, mode="legacy", name="legacy"
    )
    async with ConnectionManager(stderr_dir=tmp_path) as manager:
        assert await manager.keep_mark(spec, VIEW) is None
        result = await manager.call_tool(spec, "show", {})
        assert result["content"][0]["text"] == "reads=0 lists=0"
    # A 2026-era connection to the same server names the page in its listen stream.
    spec = ServerSpec(key="updates-modern", command=sys.executable, args=(str(SERVER),))
    async with ConnectionManager(stderr_dir=tmp_path) as manager:
        mark = await manager.keep_mark(spec, VIEW)
        assert mark is not None
        assert manager.keep(mark, "owner", "value")
        assert manager.kept(spec, "owner", VIEW) == "value"
        # A change heard after the mark: a read that raced it is not kept.
        stale = await manager.keep_mark(spec, VIEW)
        assert stale is not None
        await manager.call_tool(spec, "change", {"notify": "updated"})
        await apoll(lambda: manager.kept(spec, "owner", VIEW) is None, reason="the update")
        assert not manager.keep(stale, "owner", "stale")
        assert manager.kept(spec, "owner", VIEW) is None
