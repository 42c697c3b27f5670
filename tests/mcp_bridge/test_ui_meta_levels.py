"""`_meta.ui` read from the `resources/list` entry *and* the `resources/read` content, the
content winning key by key (MCP Apps draft spec; DESIGN §7), through the real gateway and a
real server (tests/fixtures/mcp_servers/ui_meta_levels.py) — the pure merge has its unit
test in tests/mcp_bridge/test_uimeta.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mcp_bridge import gateway
from tests.factories import McpServerFactory

pytestmark = pytest.mark.django_db(transaction=True)

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_servers" / "ui_meta_levels.py"


@pytest.fixture
def levels_server():
    return McpServerFactory(command=sys.executable, args=[str(SERVER)])


async def test_content_meta_wins_and_the_listing_fills_the_rest(levels_server) -> None:
    resource = await gateway.ui_resource(levels_server, "ui://levels/both")
    assert resource.meta["csp"]["connectDomains"] == ["https://content.example.com"]
    # Declared only in the listing entry: still read.
    assert resource.meta["prefersBorder"] is True


async def test_a_policy_declared_only_in_the_listing_is_not_lost(levels_server) -> None:
    resource = await gateway.ui_resource(levels_server, "ui://levels/listing-only")
    assert resource.meta["csp"]["connectDomains"] == ["https://only-listed.example.com"]
