"""Whatever a server says is stored, even text no database stores as sent: U+0000 in its
listings, its instructions, a progress message, a log line, a form's question and a
result (tests/fixtures/mcp_servers/unstorable.py). PostgreSQL refuses U+0000 in text and
jsonb and SQLite keeps it, so both profiles store U+FFFD in its place — one tool's
description must not fail its whole catalogue, nor a progress message its call."""

from __future__ import annotations

import json
import sys

import pytest
from channels.db import database_sync_to_async

from tests import factories
from tests.conftest import ROOT_DIR, next_frame, open_socket, reply_frame, toolcall_event
from tests.waiting import apoll

SERVER = str(ROOT_DIR / "tests" / "fixtures" / "mcp_servers" / "unstorable.py")

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
async def unstorable_server(personas):
    from mcp_bridge import gateway

    server = await database_sync_to_async(factories.McpServerFactory)(
        name="Unstorable",
        slug="nul",
        command=sys.executable,
        args=[SERVER],
        call_timeout=30.0,
    )
    server.log_level = "info"  # as an admin sets it: lines arrive on either protocol era
    await database_sync_to_async(server.save)(update_fields=["log_level"])
    await database_sync_to_async(factories.AppBindingFactory)(
        server=server, workspace=personas.workspace
    )
    yield server
    await gateway.close_all()


def _has_nul(value) -> bool:
    return "\\u0000" in json.dumps(value) or "\x00" in json.dumps(value, ensure_ascii=False)


async def test_a_servers_nul_everywhere_is_stored_as_a_replacement_character(
    personas, unstorable_server, ws_connect
):
    from chat.models import ToolCall
    from mcp_bridge import gateway
    from mcp_bridge.models import ServerLogEntry, Tool

    # The listings: the catalogue stored, and what the resources and prompts list says.
    await gateway.refresh_catalogue(unstorable_server)
    tool = await database_sync_to_async(Tool.objects.get)(
        server=unstorable_server, name="say_everything"
    )
    assert tool.description == "Says \ufffd everything."
    assert "A topic \ufffd" in json.dumps(tool.input_schema, ensure_ascii=False)
    spec = await gateway.server_spec(unstorable_server)
    manager = gateway.manager()
    described = await manager.connect(spec)
    assert described["instructions"] == "Instructions \ufffd with a NUL."
    resources = await manager.list_resources(spec)
    prompts = await manager.list_prompts(spec)
    assert resources and prompts
    assert not _has_nul(resources) and not _has_nul(prompts)

    # A member's call: progress, a log line, a form, a result — each with a NUL.
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "/call nul.say_everything"})
    card = await next_frame(
        owner, lambda f: f.get("kind") == "serverrequest" and f["data"]["status"] == "pending"
    )
    assert "Your name \ufffd?" in card["data"]["message"]
    await owner.send_json_to(
        {
            "rid": "d1",
            "type": "serverrequest.answer",
            "requestId": card["data"]["id"],
            "answer": "decline",
        }
    )
    assert (await reply_frame(owner, "d1"))["ok"]
    done = await next_frame(owner, toolcall_event("success", "say_everything"))
    texts = [p["text"] for p in done["data"]["result"]["parts"] if p["type"] == "text"]
    assert texts == ["said \ufffd all: decline"]

    call = await database_sync_to_async(ToolCall.objects.get)(pk=done["data"]["id"])
    assert call.progress["message"] == "half \ufffd way"

    def log_lines() -> list:
        return list(
            ServerLogEntry.objects.filter(server=unstorable_server).values_list("data", flat=True)
        )

    lines = await apoll(database_sync_to_async(log_lines), reason="the server's log line")
    assert lines == ["log \ufffd line"]
    await owner.disconnect()
