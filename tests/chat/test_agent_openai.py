"""The agent loop over the real OpenAI-compatible provider path, against a local fake
Chat Completions server and the real `board` example (plus a sentinel MCP App server)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from channels.db import database_sync_to_async

from tests.chat.fake_llm import (
    ALL_SENTINELS,
    PEEK_TEXT,
    SSE,
    FakeLLM,
    Reply,
    openai_text,
    openai_tool_calls,
)
from tests.conftest import ROOT_DIR, next_frame, open_socket, toolcall_event

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

API_KEY = "sk-test-do-not-leak-1234"
UI_ONLY_STRINGS = ("board/renderedAt", "board/version", "uiMeta", *ALL_SENTINELS)


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
def model_workspace(personas, llm):
    workspace = personas.workspace
    workspace.provider = "openai"
    workspace.model = "fake-model"
    workspace.provider_base_url = llm.base_url
    workspace.provider_api_key = API_KEY
    workspace.save()
    return workspace


@pytest.fixture
def sentinel_server(personas):
    from bindings.services.bindings import binding_create
    from mcp_bridge.services.servers import server_add

    server = server_add(
        name="Sentinel",
        slug="sentinel",
        transport="stdio",
        command=sys.executable,
        args=[str(Path(__file__).with_name("fake_llm.py")), "mcp"],
    )
    binding_create(server=server, workspace=personas.workspace)
    return server


async def _collect(communicator, stop, limit: int = 400, timeout: float = 20):
    """Every frame up to and including the first one matching ``stop``."""
    frames = []
    for _ in range(limit):
        frame = await communicator.receive_json_from(timeout=timeout)
        frames.append(frame)
        if stop(frame):
            return frames
    raise AssertionError("stop frame never came")


def _assistant(status: str = "complete", contains: str = ""):
    def match(frame) -> bool:
        if frame.get("type") != "event" or frame.get("kind") != "message":
            return False
        data = frame["data"]
        return data["role"] == "assistant" and data["status"] == status and contains in data["text"]

    return match


def _assert_nothing_ui_only(llm: FakeLLM) -> None:
    for raw in llm.bodies():
        for needle in UI_ONLY_STRINGS:
            assert needle not in raw, f"{needle!r} reached the model provider"


def _tool_names(request) -> set[str]:
    return {t["function"]["name"] for t in request.body.get("tools", [])}


async def test_turn_calls_tools_streams_and_answers_from_their_content(
    personas, board_server, sentinel_server, llm, model_workspace, ws_connect
):
    from mcp_bridge import gateway
    from mcp_bridge.services.servers import server_add

    # A server with a known catalogue but no binding here: none of its tools are offered.
    faulty = await database_sync_to_async(server_add)(
        name="Faulty",
        slug="faulty",
        transport="stdio",
        command=sys.executable,
        args=[str(ROOT_DIR / "tests" / "fixtures" / "mcp_servers" / "faulty.py")],
    )
    await gateway.refresh_catalogue(faulty)

    llm.push(
        openai_tool_calls(
            ("call_a", "board__list_items", ["{", "}"]),
            ("call_b", "sentinel__peek", ["{}"]),
            text=("Let me ", "check."),
        ),
        openai_text("The board has ", "seven items; ", "the first ", "is ATR-101.", delay=0.08),
    )
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "What is on the board?", "rid": 1})
    frames = await _collect(owner, _assistant(contains="ATR-101"))

    # The provider got a real streamed Chat Completions request, with the key.
    first, second = llm.requests
    assert first.path == "/v1/chat/completions"
    assert first.headers["authorization"] == f"Bearer {API_KEY}"
    assert first.body["stream"] is True and first.body["model"] == "fake-model"
    names = _tool_names(first)
    assert {"board__list_items", "board__add_item", "board__delete_item", "sentinel__peek"} <= names
    assert not {"board__move_item", "board__refresh"} & names  # app-only tools
    assert not [n for n in names if n.startswith("faulty__")]  # unbound server
    assert first.body["messages"][0]["role"] == "system"
    assert first.body["messages"][-1] == {"role": "user", "content": "What is on the board?"}

    # The second request carries both tool results (text content + structuredContent).
    tool_messages = {m["tool_call_id"]: m for m in second.body["messages"] if m["role"] == "tool"}
    assert "ATR-101" in tool_messages["call_a"]["content"]
    assert "Draft the Q3 onboarding checklist" in tool_messages["call_a"]["content"]
    assert PEEK_TEXT in tool_messages["call_b"]["content"]
    assert "detail text for everyone" in tool_messages["call_b"]["content"]
    assert '"answer":42' in tool_messages["call_b"]["content"]
    assistant = next(m for m in second.body["messages"] if m.get("tool_calls"))
    assert assistant["content"] == "Let me check."
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_a", "call_b"]
    # Invariant 8: nothing of result, embedded-resource, resource or tool _meta.
    _assert_nothing_ui_only(llm)

    # Events: numbered in order; the tool calls belong to the first assistant message.
    events = [f for f in frames if f.get("type") == "event"]
    seqs = [f["seq"] for f in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    calls = [
        f["data"] for f in events if f["kind"] == "toolcall" and f["data"]["status"] == "success"
    ]
    assert {c["tool"] for c in calls} == {"list_items", "peek"}
    assert {c["origin"] for c in calls} == {"model"}
    first_message = calls[0]["messageId"]
    assert {c["messageId"] for c in calls} == {first_message}
    final = events[-1]["data"]
    assert final["id"] != first_message
    assert final["text"] == "The board has seven items; the first is ATR-101."
    assert final["html"] and "ATR-101" in final["html"]
    deltas = [
        f["data"]["delta"]
        for f in events
        if f["kind"] == "message.delta" and f["data"]["id"] == final["id"]
    ]
    assert len(deltas) >= 2  # streamed, not one blob
    assert "".join(deltas) == final["text"]
    streaming = [f for f in events if f["kind"] == "message" and f["data"]["id"] == final["id"]]
    assert streaming[0]["data"]["status"] == "streaming"

    # Stored as shown; audited with the tool list the model was offered.
    from audit.models import AuditEvent
    from chat.models import Message

    stored = await database_sync_to_async(Message.objects.get)(pk=final["id"])
    assert stored.text == final["text"] and stored.status == "complete"
    offered = await database_sync_to_async(
        lambda: list(AuditEvent.objects.filter(event_type=303).values_list("extra", flat=True))
    )()
    assert offered and "board__list_items" in offered[0]["tools"]
    assert "board__move_item" not in offered[0]["tools"]
    await owner.disconnect()


async def test_destructive_call_waits_for_approval_and_a_rejection_reaches_the_model(
    personas, board_server, llm, model_workspace, ws_connect
):
    llm.push(
        openai_tool_calls(
            ("call_del", "board__delete_item", ['{"i', 'd": "AT', "R-1", '01"}']), delay=0.08
        ),
        openai_tool_calls(("call_del2", "board__delete_item", ['{"id": "ATR-102"}'])),
        openai_text("Deleted ATR-101; ", "ATR-102 was kept."),
    )
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    member = await open_socket(ws_connect, personas.member, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "Delete ATR-101 and ATR-102"})

    frames = await _collect(owner, toolcall_event("awaiting_approval", "delete_item"))
    waiting = frames[-1]["data"]
    assert waiting["origin"] == "model" and waiting["arguments"] == {"id": "ATR-101"}
    partials = [f["data"] for f in frames if f.get("kind") == "toolcall.input-partial"]
    assert partials, "no toolcall.input-partial event"
    for partial in partials:
        assert partial["id"] is None and partial["providerCallId"] == "call_del"
        assert (partial["server"], partial["tool"]) == ("board", "delete_item")
        assert partial["messageId"] == waiting["messageId"]
        assert "ATR-101".startswith(partial["arguments"].get("id", ""))
    assert len(llm.requests) == 1  # the loop waits for the approval

    await member.send_json_to(
        {
            "type": "approval.decide",
            "approvalId": waiting["approval"]["id"],
            "decision": "approve",
            "rid": 2,
        }
    )
    second = await next_frame(owner, toolcall_event("awaiting_approval", "delete_item"))
    assert second["data"]["arguments"] == {"id": "ATR-102"}
    await member.send_json_to(
        {
            "type": "approval.decide",
            "approvalId": second["data"]["approval"]["id"],
            "decision": "reject",
            "rid": 3,
        }
    )
    await next_frame(owner, _assistant(contains="ATR-102 was kept"))

    assert len(llm.requests) == 3
    results = [m for m in llm.requests[2].body["messages"] if m["role"] == "tool"]
    assert "Deleted ATR-101" in results[0]["content"]
    assert "not run" in results[1]["content"] and "rejected" in results[1]["content"]
    _assert_nothing_ui_only(llm)
    await owner.disconnect()
    await member.disconnect()


async def test_view_model_context_and_call_notes_reach_the_next_request(
    personas, board_server, llm, model_workspace, ws_connect
):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "/call board.list_items"})
    done = await next_frame(owner, toolcall_event("success", "list_items"))
    await owner.send_json_to({"type": "view.open", "toolCallId": done["data"]["id"], "rid": "o"})
    opened = await next_frame(owner, lambda f: f.get("type") == "reply" and f.get("rid") == "o")
    token = opened["result"]["token"]
    for rid, text, selected in (
        ("c1", "Looking at column Doing", "ATR-104"),
        ("c2", "The user selected a card", "ATR-105"),
    ):
        await owner.send_json_to(
            {
                "type": "view.request",
                "rid": rid,
                "token": token,
                "method": "ui/update-model-context",
                "params": {
                    "content": [{"type": "text", "text": text}],
                    "structuredContent": {"selected": selected},
                },
            }
        )
        reply = await next_frame(
            owner, lambda f, r=rid: f.get("type") == "reply" and f.get("rid") == r
        )
        assert reply["ok"], reply

    llm.push(openai_text("You selected ATR-105."))
    await owner.send_json_to({"type": "message.post", "text": "What did I select?"})
    await next_frame(owner, _assistant(contains="ATR-105"))

    messages = llm.requests[0].body["messages"]
    system = messages[0]["content"]
    assert "The user selected a card" in system and '"selected":"ATR-105"' in system
    assert "Looking at column Doing" not in system  # last write wins
    user_texts = [m["content"] for m in messages if m["role"] == "user"]
    assert not any(t.startswith("/call") for t in user_texts)
    note = next(t for t in user_texts if "ran the tool board.list_items" in t)
    assert "ATR-101" in note
    _assert_nothing_ui_only(llm)
    await owner.disconnect()


async def test_step_limit_ends_the_turn_with_a_notice(
    personas, board_server, llm, model_workspace, ws_connect, settings
):
    settings.ATRIUM_AGENT_MAX_STEPS = 2
    llm.push(
        openai_tool_calls(("c1", "board__list_items", ["{}"])),
        openai_tool_calls(("c2", "board__list_items", ["{}"])),
    )
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "Loop forever"})
    notice = await next_frame(owner, _assistant(contains="ATRIUM_AGENT_MAX_STEPS"))
    assert "stopped after 2" in notice["data"]["text"]
    assert len(llm.requests) == 2
    await owner.disconnect()


async def test_text_no_database_stores_from_the_model_is_replaced_or_refused(
    personas, board_server, llm, model_workspace, ws_connect
):
    """A model's stream may escape U+0000 or half a surrogate pair: its text keeps U+FFFD
    in their place (as a server's does), and a tool call whose arguments hold one is not
    run — the model is told why (PostgreSQL would fail the write; SQLite would keep it)."""
    from chat.models import Message, ToolCall

    llm.push(
        openai_tool_calls(
            ("c1", "board__add_item", ['{"title": "nul \\u0000', ' here"}']),
            text=("Adding \x00 it, \ud83d half.",),
        ),
        openai_text("Could not add it."),
    )
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "Add an item", "rid": 1})
    await next_frame(owner, _assistant(contains="Could not add it."))

    texts = await database_sync_to_async(
        lambda: list(
            Message.objects.filter(thread=personas.thread, role="assistant")
            .order_by("pk")
            .values_list("text", flat=True)
        )
    )()
    assert texts == ["Adding \ufffd it, \ufffd half.", "Could not add it."]
    tool_messages = [m for m in llm.requests[1].body["messages"] if m["role"] == "tool"]
    assert "cannot be stored; the tool was not run" in tool_messages[0]["content"]
    ran = await database_sync_to_async(
        lambda: list(
            ToolCall.objects.filter(thread=personas.thread, tool_name="add_item").values_list(
                "status", flat=True
            )
        )
    )()
    assert "success" not in ran
    await owner.disconnect()


@pytest.mark.parametrize("failure", ["http_401", "refused", "malformed"])
async def test_provider_errors_become_an_error_message(
    personas, llm, model_workspace, ws_connect, failure
):
    from chat.models import Message

    expected = {
        "http_401": "refused the API key (HTTP 401)",
        "refused": "Could not reach",
        "malformed": "not JSON",
    }[failure]
    if failure == "http_401":
        llm.push(Reply(401, {"error": {"message": "Incorrect API key provided"}}))
    elif failure == "malformed":
        llm.push(SSE(["data: {this is not json\n\n"]))
    else:
        from tests.live import free_port

        model_workspace.provider_base_url = f"http://127.0.0.1:{free_port()}/v1"
        await database_sync_to_async(model_workspace.save)()
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "Hello?", "rid": 1})
    error = await next_frame(owner, _assistant(status="error"))
    assert expected in error["data"]["text"]
    assert API_KEY not in error["data"]["text"]
    texts = await database_sync_to_async(
        lambda: list(Message.objects.filter(thread=personas.thread).values_list("role", "text"))
    )()
    assert ("user", "Hello?") in texts  # never lost
    await owner.disconnect()


async def test_a_message_during_a_turn_is_folded_into_the_next_turn(
    personas, llm, model_workspace, ws_connect
):
    llm.push(openai_text("First ", "answer.", delay=0.25), openai_text("Second answer."))
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    member = await open_socket(ws_connect, personas.member, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "one", "rid": 1})
    # "two" must arrive while the first turn runs, i.e. after it sent its request: the
    # first streamed piece proves that (the rest follows 0.25 s later).
    await next_frame(
        owner,
        lambda f: f.get("kind") == "message.delta" and "First" in f["data"]["delta"],
        timeout=20,
    )
    await member.send_json_to({"type": "message.post", "text": "two", "rid": 2})
    await next_frame(owner, _assistant(contains="Second answer."))

    assert len(llm.requests) == 2
    first = [m["content"] for m in llm.requests[0].body["messages"] if m["role"] == "user"]
    assert first == ["one"]
    second = llm.requests[1].body["messages"]
    users = [m["content"] for m in second if m["role"] == "user"]
    assert users == ["olivia: one", "marco: two"]  # several people: names
    assert {"role": "assistant", "content": "First answer."} in second
    assert "Several people" in second[0]["content"]
    assert json.dumps(second).count("Second answer.") == 0
    await owner.disconnect()
    await member.disconnect()
