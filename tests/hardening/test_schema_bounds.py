"""Security issue 23, finding F2: a server's input schema cannot stall a web process.

Through the real websocket path (the ASGI application, a real MCP server over stdio):
a read-only tool whose schema takes exponential time is checked in a worker process and
refused past its deadline while another member's socket keeps answering; a schema past
the complexity cap is refused when the catalogue is read, shown to the admin, and its
calls are refused. The pure measure has its own tests (tests/mcp_bridge/test_schema_bounds.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys

import pytest
from channels.db import database_sync_to_async

from tests.conftest import ROOT_DIR, next_frame, open_socket, toolcall_event
from tests.fixtures.mcp_servers.schema_bombs import nested_arguments

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SCHEMA_BOMBS = ROOT_DIR / "tests" / "fixtures" / "mcp_servers" / "schema_bombs.py"
# Levels of nesting in the arguments of `nested_choice`: each doubles the work. 16 levels
# hold a checker for seconds (tens of them on this machine) — far past the deadline.
LEVELS = 16


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


@pytest.fixture
def bombs_server(personas):
    from bindings.services.bindings import binding_create
    from mcp_bridge.services.servers import server_add

    server = server_add(
        name="Schema bombs", slug="bombs", transport="stdio", command=sys.executable,
        args=[str(SCHEMA_BOMBS)],
    )  # fmt: skip
    binding = binding_create(server=server, workspace=personas.workspace)
    return server, binding


def _db(fn):
    return database_sync_to_async(fn)()


def _finished(tool: str):
    return lambda f: (
        f.get("kind") == "toolcall"
        and f["data"]["tool"] == tool
        and f["data"]["status"] in ("error", "success")
    )


async def _call(communicator, tool: str, arguments: dict, rid: str) -> None:
    await communicator.send_json_to(
        {"type": "tool.call", "rid": rid, "server": "bombs", "tool": tool, "arguments": arguments}
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_an_exponential_schema_is_checked_in_a_worker_that_is_killed_at_its_deadline(
    personas, bombs_server, ws_connect
):
    from audit.models import AuditEvent
    from audit.types import AuditEventType
    from mcp_bridge import schema_pool
    from mcp_bridge.models import Tool
    from tests.resilience.support import ping_latency

    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    other = await open_socket(ws_connect, personas.member, personas.thread)
    # Warm: the server's connection, its catalogue, and a schema checker.
    await _call(owner, "nested_choice", {"x": {"n": {}}}, "warm")
    await next_frame(owner, toolcall_event("success", "nested_choice"), timeout=60)
    tool = await _db(lambda: Tool.objects.get(server__slug="bombs", name="nested_choice"))
    assert not tool.schema_refusal and tool.inline_check_values == 0  # worker, not inline
    checkers = schema_pool.pool().pids()
    await ping_latency(other, rid="drain")  # past `other`'s copies of those events

    await _call(owner, "nested_choice", nested_arguments(LEVELS), "bomb")
    latencies: list[float] = []

    async def keep_pinging() -> None:
        # Always inside a measured ping: any stall of the event loop lands in one of them.
        while True:
            latencies.append(await ping_latency(other, rid=f"p{len(latencies)}", timeout=60))

    pinger = asyncio.ensure_future(keep_pinging())
    finished = await next_frame(owner, _finished("nested_choice"), timeout=120)
    pinger.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await pinger
    latencies.append(await ping_latency(other, rid="after"))

    # Pings are answered within 100 ms (99 in 100; a ping on the old inline path waited
    # for the whole check: 19 s). The rest only bounds scheduler noise: the burning check
    # and, in `make test`, Chromium in the other worker share the machine's two cores.
    ordered = sorted(latencies)
    p99 = ordered[int(len(ordered) * 0.99) - 1] if len(ordered) >= 100 else ordered[-1]
    assert p99 < 0.1 and ordered[-1] < 0.5, (p99, ordered[-1], len(ordered))
    assert finished["data"]["status"] == "error"
    error = finished["data"]["error"]
    assert error["code"] == "schema_too_complex", error
    assert "too complex to check in time" in error["message"]
    # The worker that burned is gone (killed, reaped); the next check gets another one.
    assert checkers
    burned = schema_pool.pool().killed[-1]
    assert burned in checkers and not _alive(burned)
    await _call(owner, "nested_choice", {"x": {}}, "again")
    await next_frame(owner, toolcall_event("success", "nested_choice"), timeout=60)
    assert schema_pool.pool().pids() and burned not in schema_pool.pool().pids()
    # Audited: the call's failure names why.
    failed = await _db(
        lambda: list(
            AuditEvent.objects.filter(
                event_type=AuditEventType.TOOL_CALL_FAILED, tool_name="nested_choice"
            ).values_list("reason", flat=True)
        )
    )
    assert failed == ["schema_too_complex"]
    await owner.disconnect()
    await other.disconnect()


async def test_a_schema_past_the_cap_is_refused_when_the_catalogue_is_read(
    personas, bombs_server, ws_connect
):
    from audit.models import AuditEvent
    from audit.types import AuditEventType
    from mcp_bridge import gateway
    from mcp_bridge.models import Tool

    server, _binding = bombs_server
    await gateway.refresh_catalogue(server)
    tools = await _db(lambda: {t.name: t for t in Tool.objects.filter(server=server)})
    assert set(tools) == {"nested_choice", "deep_choice", "plain_echo"}  # stored, all three
    refusal = tools["deep_choice"].schema_refusal
    assert refusal.startswith("the tool's input schema is too complex to check:"), refusal
    assert "$refs expand to more than" in refusal
    assert not tools["plain_echo"].schema_refusal and tools["plain_echo"].inline_check_values
    refreshed = await _db(
        lambda: list(
            AuditEvent.objects.filter(event_type=AuditEventType.CATALOGUE_REFRESHED).values_list(
                "extra", flat=True
            )
        )
    )
    assert refreshed[-1]["unusable"] == {"deep_choice": refusal}
    # Neither the model nor a person's tool picker is offered a tool that cannot be called.
    from bindings.selectors import offered_tools

    offered = await _db(
        lambda: {o.tool.name for o in offered_tools(thread=personas.thread, role="owner")}
    )
    assert "plain_echo" in offered and "deep_choice" not in offered, offered

    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await _call(owner, "deep_choice", {"x": 1}, "deep")
    finished = await next_frame(owner, _finished("deep_choice"), timeout=60)
    assert finished["data"]["status"] == "error"
    assert finished["data"]["error"]["code"] == "schema_refused"
    assert (
        finished["data"]["error"]["message"]
        == f"The tool 'deep_choice' cannot be called: {refusal}."
    )
    await _call(owner, "plain_echo", {"text": "still fine"}, "plain")
    await next_frame(owner, toolcall_event("success", "plain_echo"), timeout=60)
    # Audited once per reading of the catalogue, not per call.
    count = await _db(
        lambda: AuditEvent.objects.filter(event_type=AuditEventType.CATALOGUE_REFRESHED).count()
    )
    assert count == len(refreshed)
    await owner.disconnect()


@pytest.mark.django_db
def test_the_admin_sees_why_a_tool_cannot_be_called(admin_client, bombs_server):
    from mcp_bridge.models import Tool

    server, _binding = bombs_server
    response = admin_client.post(
        "/admin/mcp_bridge/mcpserver/",
        {"action": "refresh_catalogue", "_selected_action": [server.pk]},
        follow=True,
    )
    texts = [str(m) for m in response.context["messages"]]
    assert any(t.startswith("Schema bombs:") and "1 with problems" in t for t in texts), texts
    deep = Tool.objects.get(server=server, name="deep_choice")
    plain = Tool.objects.get(server=server, name="plain_echo")
    page = admin_client.get(f"/admin/mcp_bridge/tool/{deep.pk}/change/").content.decode()
    assert "No — the tool&#x27;s input schema is too complex to check:" in page
    assert "$refs expand to more than 50,000 subschemas" in page
    page = admin_client.get(f"/admin/mcp_bridge/tool/{plain.pk}/change/").content.decode()
    assert "No — " not in page
    listing = admin_client.get("/admin/mcp_bridge/tool/?callable=no").content.decode()
    assert "deep_choice" in listing and "plain_echo" not in listing
