"""A call's lifecycle over the real websocket, the real agent loop (against the fake
OpenAI-compatible server) and the real `examples/lifecycle` MCP server: the row and view
that exist while the model streams arguments, cancelling calls and turns, and the
permission prompt's grant. The browser side of the same lifecycle is
tests/browser/test_lifecycle.py."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path

import pytest
from channels.db import database_sync_to_async

from tests.chat.fake_llm import FakeLLM, openai_text, openai_tool_calls
from tests.conftest import ROOT_DIR, next_frame, open_socket, reply_frame, toolcall_event
from tests.waiting import apoll

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


@pytest.fixture
def llm():
    with FakeLLM("openai") as fake:
        yield fake


@pytest.fixture
def record(tmp_path) -> Path:
    return tmp_path / "cancelled.jsonl"


@pytest.fixture
def lifecycle(personas, llm, record):
    from bindings.services.bindings import binding_create
    from mcp_bridge.services.servers import server_add

    workspace = personas.workspace
    workspace.provider = "openai"
    workspace.model = "fake-model"
    workspace.provider_base_url = llm.base_url
    workspace.provider_api_key = "sk-test-lifecycle"
    workspace.save()
    server = server_add(
        name="Lifecycle recorder",
        slug="lifecycle",
        transport="stdio",
        command=sys.executable,
        args=[str(ROOT_DIR / "examples" / "lifecycle" / "server.py"), "--record", str(record)],
    )
    binding = binding_create(server=server, workspace=workspace)
    return server, binding


def _audit(**filters):
    from audit.models import AuditEvent

    return list(
        AuditEvent.objects.filter(**filters)
        .order_by("id")
        .values("event_type", "reason", "actor_kind", "actor_user_id", "extra")
    )


def _call(call_id):
    from chat.models import ToolCall

    return ToolCall.objects.get(pk=call_id)


def _read_record(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def _wait_for_record(path: Path, timeout: float = 20) -> list[dict]:
    """The server's own record of notifications/cancelled (no event reaches the test)."""
    return await apoll(
        lambda: asyncio.to_thread(_read_record, path),
        timeout=timeout,
        reason="the MCP server's record file of notifications/cancelled",
    )


def _is_event(kind):
    return lambda f: f.get("type") == "event" and f.get("kind") == kind


async def test_a_streaming_call_has_its_row_and_view_before_its_arguments_are_complete(
    personas, lifecycle, llm, ws_connect
):
    gate = threading.Event()
    llm.push(
        openai_tool_calls(
            (
                "call_1",
                "lifecycle__show_plan",
                ['{"title": "Q3"', gate, ', "steps": ["Hire", "Ship"]}'],
            )
        ),
        openai_text("Done."),
    )
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "Plan Q3"})
    opened = await next_frame(owner, toolcall_event("streaming", "show_plan"), limit=100)
    row = opened["data"]
    # A view from the first moment, not decided and not run.
    assert row["view"]["uri"] == "ui://lifecycle/recorder"
    assert row["origin"] == "model" and row["arguments"] == {}
    partial = await next_frame(owner, _is_event("toolcall.input-partial"), limit=100)
    assert partial["data"]["id"] == row["id"]
    assert partial["data"]["arguments"] == {"title": "Q3"}
    stored = await database_sync_to_async(_call)(row["id"])
    assert stored.status == "streaming" and stored.arguments == {"title": "Q3"}
    # A reload mid-stream: the view opens with what has arrived so far.
    await owner.send_json_to({"type": "view.open", "toolCallId": row["id"], "rid": "v"})
    opened_view = (await reply_frame(owner, "v"))["result"]
    assert opened_view["status"] == "streaming"
    assert opened_view["toolInput"] == {"title": "Q3"} and opened_view["toolResult"] is None

    gate.set()
    done = await next_frame(owner, toolcall_event("success", "show_plan"), limit=200)
    assert done["data"]["id"] == row["id"]
    assert done["data"]["arguments"] == {"title": "Q3", "steps": ["Hire", "Ship"]}
    started = await database_sync_to_async(_audit)(event_type=320)
    assert [a["extra"]["tool_call_id"] for a in started] == [row["id"]]
    decided = await database_sync_to_async(_audit)(event_type=300)
    assert decided and decided[0]["extra"].get("tool_call_id", row["id"]) == row["id"]
    await owner.disconnect()


async def test_stopping_a_turn_ends_its_streaming_call_and_is_audited(
    personas, lifecycle, llm, ws_connect
):
    never = threading.Event()
    llm.push(openai_tool_calls(("call_1", "lifecycle__show_plan", ['{"title": "Q4"', never])))
    member = await open_socket(ws_connect, personas.member, personas.thread)
    viewer = await open_socket(ws_connect, personas.viewer, personas.thread)
    await member.send_json_to({"type": "message.post", "text": "Plan Q4"})
    opened = await next_frame(member, toolcall_event("streaming", "show_plan"), limit=100)
    await next_frame(member, _is_event("toolcall.input-partial"), limit=100)

    # A viewer cannot stop it.
    await viewer.send_json_to({"type": "turn.cancel", "rid": "no"})
    refused = await reply_frame(viewer, "no")
    assert refused["ok"] is False and refused["error"]["code"] == "forbidden"

    await member.send_json_to({"type": "turn.cancel", "rid": "stop"})
    assert (await reply_frame(member, "stop"))["ok"] is True
    ended = await next_frame(member, toolcall_event("cancelled", "show_plan"), limit=100)
    assert ended["data"]["id"] == opened["data"]["id"]
    assert "stopped the assistant's answer" in ended["data"]["error"]["message"]
    never.set()

    turn = await database_sync_to_async(_audit)(event_type=322)
    assert [(a["actor_user_id"], a["reason"]) for a in turn] == [
        (personas.member.pk, "cancelled_by_member")
    ]
    cancelled = await database_sync_to_async(_audit)(event_type=321)
    assert [(a["actor_user_id"], a["reason"]) for a in cancelled] == [
        (personas.member.pk, "turn_cancelled")
    ]
    # Nothing was decided or run for it.
    assert await database_sync_to_async(_audit)(event_type=300) == []
    await member.send_json_to({"type": "turn.cancel", "rid": "again"})
    again = await reply_frame(member, "again")
    assert again["ok"] is False and again["error"]["code"] == "not_running"
    await member.disconnect()
    await viewer.disconnect()


async def test_stopping_a_turn_cancels_its_running_call_on_the_server(
    personas, lifecycle, llm, ws_connect, record
):
    llm.push(
        openai_tool_calls(
            ("call_1", "lifecycle__slow_task", ['{"label": "Crawl", "seconds": 300}'])
        )
    )
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "Crawl the site"})
    running = await next_frame(owner, toolcall_event("running", "slow_task"), limit=100)
    await next_frame(owner, _is_event("toolcall.progress"), limit=100)  # the server works
    await owner.send_json_to({"type": "turn.cancel", "rid": "stop"})
    assert (await reply_frame(owner, "stop"))["ok"] is True
    ended = await next_frame(owner, toolcall_event("cancelled", "slow_task"), limit=100)
    assert ended["data"]["id"] == running["data"]["id"]
    lines = await _wait_for_record(record)
    assert [(line["method"], line["label"]) for line in lines] == [
        ("notifications/cancelled", "Crawl")
    ]
    cancelled = await database_sync_to_async(_audit)(event_type=321)
    assert [(a["actor_user_id"], a["reason"]) for a in cancelled] == [
        (personas.owner.pk, "turn_cancelled")
    ]
    await owner.disconnect()


async def test_a_call_cancelled_while_streaming_never_runs(personas, lifecycle, llm, ws_connect):
    gate = threading.Event()
    llm.push(
        openai_tool_calls(("call_1", "lifecycle__show_plan", ['{"title": "X"', gate, "}"])),
        openai_text("Fine, I will not."),
    )
    member = await open_socket(ws_connect, personas.member, personas.thread)
    await member.send_json_to({"type": "message.post", "text": "Plan X"})
    opened = await next_frame(member, toolcall_event("streaming", "show_plan"), limit=100)
    call_id = opened["data"]["id"]
    await member.send_json_to({"type": "tool.cancel", "toolCallId": call_id, "rid": "c"})
    assert (await reply_frame(member, "c"))["ok"] is True
    await next_frame(member, toolcall_event("cancelled", "show_plan"), limit=100)
    gate.set()
    # The model hears it was cancelled and answers; the call stays cancelled, never decided.
    await next_frame(
        member,
        lambda f: f.get("kind") == "message" and f["data"]["text"] == "Fine, I will not.",
        limit=200,
    )
    assert (await database_sync_to_async(_call)(call_id)).status == "cancelled"
    assert await database_sync_to_async(_audit)(event_type=300) == []
    second = json.loads(llm.requests[1].raw)
    tool_messages = [m for m in second["messages"] if m.get("role") == "tool"]
    assert tool_messages and "cancel" in tool_messages[0]["content"].lower()
    await member.disconnect()


async def test_only_an_owner_grants_a_views_permissions(personas, lifecycle, ws_connect):
    _, binding = lifecycle
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    member = await open_socket(ws_connect, personas.member, personas.thread)
    await owner.send_json_to(
        {
            "type": "tool.call",
            "server": "lifecycle",
            "tool": "voice_note",
            "arguments": {"topic": "standup"},
            "rid": "call",
        }
    )
    call_id = (await reply_frame(owner, "call"))["result"]["toolCallId"]
    await next_frame(owner, toolcall_event("success", "voice_note"), limit=100)

    async def open_view(socket, rid):
        await socket.send_json_to({"type": "view.open", "toolCallId": call_id, "rid": rid})
        return (await reply_frame(socket, rid))["result"]

    as_owner = await open_view(owner, "o1")
    assert as_owner["allow"] == ""
    assert as_owner["permissionRequest"] == {
        "missing": ["microphone"],
        "labels": ["the microphone"],
        "canGrant": True,
    }
    assert (await open_view(member, "m1"))["permissionRequest"]["canGrant"] is False

    async def grant(socket, rid, permissions):
        await socket.send_json_to(
            {
                "type": "view.grant_permissions",
                "toolCallId": call_id,
                "permissions": permissions,
                "rid": rid,
            }
        )
        return await reply_frame(socket, rid)

    refused = await grant(member, "m2", ["microphone"])
    assert refused["ok"] is False and refused["error"]["code"] == "forbidden"
    undeclared = await grant(owner, "o2", ["camera"])
    assert undeclared["ok"] is False and undeclared["error"]["code"] == "invalid_permissions"
    allowed = await grant(owner, "o3", ["microphone"])
    assert allowed["ok"] is True and allowed["result"] == {"permissions": ["microphone"]}

    reopened = await open_view(owner, "o4")
    assert reopened["allow"] == "microphone" and reopened["permissionRequest"] is None
    refusals = await database_sync_to_async(_audit)(event_type=421)
    assert [(a["actor_user_id"], a["reason"]) for a in refusals] == [
        (personas.member.pk, "forbidden"),
        (personas.owner.pk, "invalid_permissions"),
    ]
    grants = await database_sync_to_async(_audit)(event_type=420)
    assert [(a["actor_user_id"], a["extra"]["permissions"]) for a in grants] == [
        (personas.owner.pk, ["microphone"])
    ]
    changes = await database_sync_to_async(_audit)(event_type=601, binding_id=binding.pk)
    assert [a["reason"] for a in changes] == ["view_permission_prompt"]
    await owner.disconnect()
    await member.disconnect()
