"""A call of a tool with a view no longer reads the whole UI document again each time
(bench/README.md issue 28): the connection keeps the version it read until the server
tells of a change. Through the real socket, the real pipeline and a real stdio server
(tests/fixtures/mcp_servers/ui_updates.py, which counts the host's reads); the view's
policy is still the binding's, applied whenever a view is opened."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from channels.db import database_sync_to_async

from tests import factories
from tests.conftest import next_frame, open_socket, reply_frame, toolcall_event
from tests.waiting import apoll

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_servers" / "ui_updates.py"
VIEW = "ui://updates/view"


@pytest.fixture
def updates_binding(personas):
    server = factories.McpServerFactory(
        name="Updates", slug="updates", command=sys.executable, args=[str(SERVER)]
    )
    binding = factories.AppBindingFactory(server=server, workspace=personas.workspace)
    for tool in ("show", "change"):
        factories.ToolPolicyFactory(binding=binding, tool_name=tool, approval="auto")
    return server, binding


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


async def _call(socket, text: str, tool: str) -> dict:
    await socket.send_json_to({"type": "message.post", "text": text})
    done = await next_frame(socket, toolcall_event("success", tool))
    return done["data"]


def _text(call: dict) -> str:
    return next(p["text"] for p in call["result"]["parts"] if p.get("type") == "text")


async def _resource_of(call_id: int) -> int | None:
    from chat.models import ToolCall

    return await database_sync_to_async(
        lambda: ToolCall.objects.values_list("ui_resource_id", flat=True).get(pk=call_id)
    )()


async def _open_view(socket, call_id: int, rid: str) -> dict:
    await socket.send_json_to({"type": "view.open", "toolCallId": call_id, "rid": rid})
    opened = await reply_frame(socket, rid)
    assert opened["ok"], opened
    return opened["result"]


async def test_calls_share_the_document_read_once_until_the_server_changes_it(
    personas, updates_binding, ws_connect
):
    from mcp_bridge import gateway

    server, binding = updates_binding
    socket = await open_socket(ws_connect, personas.owner, personas.thread)
    first = await _call(socket, "/call updates.show", "show")
    second = await _call(socket, "/call updates.show", "show")
    # The second call answers after the first call's view was read: once.
    assert _text(second) == "reads=1 lists=1"
    assert await _resource_of(first["id"]) == await _resource_of(second["id"]) is not None

    # The view of the call served from the kept version still gets the binding's policy,
    # read now: what the server declares, then narrowed by the admin.
    view = await _open_view(socket, second["id"], "open-1")
    assert "https://api.example.com" in view["csp"]
    await database_sync_to_async(
        lambda: (
            type(binding)
            .objects.filter(pk=binding.pk)
            .update(allowed_domains=["https://other.example.com"])
        )
    )()
    view = await _open_view(socket, second["id"], "open-2")
    assert "https://api.example.com" not in view["csp"]

    # The server changes its page and says so: the next call reads it and has the new one.
    await _call(socket, "/call updates.change", "change")
    spec = await gateway.server_spec(server)
    await apoll(
        lambda: gateway.manager().kept(spec, ("ui_resource", server.pk), VIEW) is None,
        reason="the update notification",
    )
    third = await _call(socket, "/call updates.show", "show")
    fourth = await _call(socket, "/call updates.show", "show")
    assert _text(fourth) == "reads=2 lists=2"
    changed = await _resource_of(third["id"])
    assert changed not in (None, await _resource_of(first["id"]))
    assert await _resource_of(fourth["id"]) == changed
    await socket.disconnect()
