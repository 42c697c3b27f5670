"""The agent loop over the real Anthropic provider path, against a local fake Messages API."""

from __future__ import annotations

import pytest

from tests.chat.fake_llm import SSE, FakeLLM, Reply, anthropic_text, anthropic_tool_use
from tests.conftest import next_frame, open_socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

API_KEY = "sk-ant-test-do-not-leak"


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


@pytest.fixture
def llm():
    with FakeLLM("anthropic") as fake:
        yield fake


@pytest.fixture
def model_workspace(personas, llm):
    workspace = personas.workspace
    workspace.provider = "anthropic"
    workspace.model = "fake-claude"
    workspace.provider_base_url = llm.base_url
    workspace.provider_api_key = API_KEY
    workspace.save()
    return workspace


def _assistant(status: str = "complete", contains: str = ""):
    def match(frame) -> bool:
        if frame.get("type") != "event" or frame.get("kind") != "message":
            return False
        data = frame["data"]
        return data["role"] == "assistant" and data["status"] == status and contains in data["text"]

    return match


async def test_tool_use_round_trip(personas, board_server, llm, model_workspace, ws_connect):
    llm.push(
        anthropic_tool_use("toolu_01", "board__list_items", ["{", "}"], text="Checking."),
        anthropic_text("There are ", "seven items, ", "starting with ATR-101."),
    )
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "What is on the board?"})
    final = await next_frame(owner, _assistant(contains="ATR-101"), limit=200)
    assert final["data"]["text"] == "There are seven items, starting with ATR-101."

    first, second = llm.requests
    assert first.path == "/v1/messages"
    assert first.headers["x-api-key"] == API_KEY
    assert first.headers["anthropic-version"] == "2023-06-01"
    assert first.body["stream"] is True and first.body["max_tokens"] > 0
    assert isinstance(first.body["system"], str)
    names = {t["name"] for t in first.body["tools"]}
    assert "board__list_items" in names and "board__move_item" not in names
    assert all("input_schema" in t for t in first.body["tools"])
    assert first.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What is on the board?"}]}
    ]
    user, assistant, results = second.body["messages"]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == {"type": "text", "text": "Checking."}
    assert assistant["content"][1]["type"] == "tool_use"
    assert assistant["content"][1]["id"] == "toolu_01"
    assert results["role"] == "user"
    block = results["content"][0]
    assert block["type"] == "tool_result" and block["tool_use_id"] == "toolu_01"
    assert "ATR-101" in block["content"][0]["text"] and block["is_error"] is False
    for raw in llm.bodies():
        assert "board/renderedAt" not in raw and "uiMeta" not in raw
    await owner.disconnect()


@pytest.mark.parametrize("failure", ["http_401", "overloaded", "truncated"])
async def test_errors_become_an_error_message(personas, llm, model_workspace, ws_connect, failure):
    if failure == "http_401":
        llm.push(
            Reply(
                401,
                {
                    "type": "error",
                    "error": {"type": "authentication_error", "message": "invalid x-api-key"},
                },
            )
        )
        expected = "refused the API key (HTTP 401): invalid x-api-key"
    elif failure == "overloaded":
        stream = anthropic_text("Partial ")
        stream.frames = stream.frames[:4] + [
            (
                "error",
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            )
        ]
        llm.push(stream)
        expected = "reported an error: Overloaded"
    else:
        llm.push(SSE(anthropic_text("Cut ", "short").frames[:5]))
        expected = "ended before it was complete"
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "Hi"})
    error = await next_frame(owner, _assistant(status="error"), limit=100)
    assert expected in error["data"]["text"]
    assert API_KEY not in error["data"]["text"]
    if failure == "overloaded":
        assert error["data"]["text"].startswith("Partial")  # streamed text is kept
    await owner.disconnect()
