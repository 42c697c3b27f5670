"""Pure provider pieces: stream decoding, request shapes, tool names, error mapping."""

from __future__ import annotations

import json

import httpx
import pytest

from chat.providers import anthropic, openai
from chat.providers.base import (
    AssistantTurn,
    Finish,
    ProviderConfig,
    ProviderError,
    ProviderRequest,
    ProviderTool,
    TextDelta,
    ToolCallComplete,
    ToolCallDelta,
    ToolCallStart,
    ToolResult,
    ToolUse,
    UserTurn,
    assign_tool_names,
    http_error,
    sse_events,
    transport_error,
    wire_tool_name,
)


def _tool_chunk(index, *, id=None, name=None, arguments=None):
    function = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    call = {"index": index, "function": function}
    if id is not None:
        call["id"] = id
    return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]}


def test_openai_chunks_with_interleaved_tool_calls_split_mid_token():
    reader = openai.ChunkReader()
    events = []
    for chunk in [
        {"choices": [{"delta": {"role": "assistant", "content": "Hel"}}]},
        {"choices": [{"delta": {"content": "lo"}}]},
        _tool_chunk(0, id="call_1", name="board__delete_item", arguments=""),
        _tool_chunk(0, arguments='{"i'),
        _tool_chunk(1, id="call_2", name="board__list_items"),
        _tool_chunk(0, arguments='d": "ATR-1'),
        _tool_chunk(1, arguments="{}"),
        _tool_chunk(0, arguments='01"}'),
        {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}},
    ]:
        events += reader.feed(chunk)
    events += reader.finish()
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo"]
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert [(s.index, s.id, s.name) for s in starts] == [
        (0, "call_1", "board__delete_item"),
        (1, "call_2", "board__list_items"),
    ]
    fragments = "".join(e.fragment for e in events if isinstance(e, ToolCallDelta) and e.index == 0)
    assert fragments == '{"id": "ATR-101"}'
    done = [e for e in events if isinstance(e, ToolCallComplete)]
    assert [json.loads(d.arguments) for d in done] == [{"id": "ATR-101"}, {}]
    assert events[-1] == Finish(
        reason="tool_calls", usage={"prompt_tokens": 3, "completion_tokens": 4}
    )


def test_openai_tool_call_without_id_or_with_stop_reason_is_normalized():
    reader = openai.ChunkReader()
    events = reader.feed(_tool_chunk(0, name="x__y", arguments="{}"))
    reader.feed({"choices": [{"delta": {}, "finish_reason": "stop"}]})
    events += reader.finish()
    start = next(e for e in events if isinstance(e, ToolCallStart))
    assert start.id.startswith("call_")
    assert events[-1].reason == "tool_calls"


def test_openai_error_chunk_and_missing_choices_raise():
    with pytest.raises(ProviderError) as caught:
        openai.ChunkReader().feed({"error": {"message": "context length exceeded"}})
    assert "context length exceeded" in caught.value.message
    with pytest.raises(ProviderError):
        openai.ChunkReader().feed({"object": "weird"})


def test_openai_request_body_shapes_the_conversation():
    request = ProviderRequest(
        model="m",
        system="be brief",
        messages=[
            UserTurn("hi"),
            AssistantTurn("", (ToolUse("c1", "board__list_items", {}),)),
            ToolResult("c1", "board__list_items", "Team board: 7 items"),
            AssistantTurn("Seven."),
        ],
        tools=[
            ProviderTool("board__list_items", "[Board] list", {"type": "object", "properties": {}})
        ],
    )
    body = openai.request_body(request)
    assert body["stream"] is True and body["model"] == "m"
    assert body["messages"][0] == {"role": "system", "content": "be brief"}
    assert body["messages"][2]["content"] is None
    assert body["messages"][2]["tool_calls"][0]["function"] == {
        "name": "board__list_items",
        "arguments": "{}",
    }
    assert body["messages"][3] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "Team board: 7 items",
    }
    assert body["messages"][4] == {"role": "assistant", "content": "Seven."}
    assert body["tools"][0]["type"] == "function"
    assert "tools" not in openai.request_body(ProviderRequest(model="m", system="", messages=[]))


def test_anthropic_request_body_alternates_roles():
    request = ProviderRequest(
        model="c",
        system="sys",
        messages=[
            AssistantTurn("Earlier answer"),
            UserTurn("a"),
            UserTurn("b"),
            AssistantTurn("Looking", (ToolUse("call:1", "t", {"x": 1}),)),
            ToolResult("call:1", "t", "", is_error=True),
            UserTurn("thanks"),
        ],
    )
    body = anthropic.request_body(request)
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assert [b["text"] for b in body["messages"][2]["content"]] == ["a", "b"]
    tool_use = body["messages"][3]["content"][1]
    assert tool_use == {"type": "tool_use", "id": "call_1", "name": "t", "input": {"x": 1}}
    result, thanks = body["messages"][4]["content"]
    assert result["tool_use_id"] == "call_1" and result["is_error"] is True
    assert result["content"] == [{"type": "text", "text": "(no content)"}]
    assert thanks == {"type": "text", "text": "thanks"}
    assert body["system"] == "sys" and "tools" not in body


def test_anthropic_events_stream_text_and_tool_input():
    reader = anthropic.EventReader()
    events = []
    for kind, data in [
        ("message_start", {"message": {"usage": {"input_tokens": 5}}}),
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
        ("content_block_stop", {"index": 0}),
        (
            "content_block_start",
            {
                "index": 1,
                "content_block": {
                    "type": "tool_use",
                    "id": "toolu_9",
                    "name": "board__add_item",
                    "input": {},
                },
            },
        ),
        (
            "content_block_delta",
            {"index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"tit'}},
        ),
        (
            "content_block_delta",
            {"index": 1, "delta": {"type": "input_json_delta", "partial_json": 'le": "x"}'}},
        ),
        ("content_block_stop", {"index": 1}),
        ("message_delta", {"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 7}}),
        ("message_stop", {}),
    ]:
        events += reader.feed(kind, data)
    assert reader.done
    assert events[0] == TextDelta("Hi")
    assert events[1] == ToolCallStart(index=1, id="toolu_9", name="board__add_item")
    complete = next(e for e in events if isinstance(e, ToolCallComplete))
    assert json.loads(complete.arguments) == {"title": "x"}
    assert reader.finish() == Finish("tool_calls", {"input_tokens": 5, "output_tokens": 7})
    with pytest.raises(ProviderError) as caught:
        reader.feed(
            "error",
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        )
    assert caught.value.code == "provider_unavailable"


@pytest.mark.parametrize(
    ("base", "url"),
    [
        ("", "https://api.anthropic.com/v1/messages"),
        ("http://127.0.0.1:9/", "http://127.0.0.1:9/v1/messages"),
        ("https://proxy.example/v1", "https://proxy.example/v1/messages"),
    ],
)
def test_anthropic_url(base, url):
    assert anthropic.AnthropicProvider(ProviderConfig("anthropic", base_url=base)).url == url


def test_tool_names_are_sanitized_unique_and_short():
    assert wire_tool_name("board", "list_items") == "board__list_items"
    assert wire_tool_name("my-server", "files/read.v2") == "my-server__files_read_v2"
    long = "x" * 80
    names = assign_tool_names([("s", "a.b"), ("s", "a_b"), ("s", long), ("s", long + "y")])
    assert len(set(names.values())) == 4
    assert all(len(n) <= 64 for n in names.values())
    assert names[("s", "a.b")] == "s__a_b" and names[("s", "a_b")] == "s__a_b_2"
    # Stable: the same set gives the same names whatever the order.
    assert assign_tool_names(list(reversed(list(names)))) == names


async def test_sse_framing():
    body = b': comment\n\nevent: one\ndata: {"a":\ndata: 1}\n\ndata: plain\r\n\r\ndata: [DONE]\n\n'
    response = httpx.Response(200, content=body)
    events = [e async for e in sse_events(response)]
    assert events == [("one", '{"a":\n1}'), ("message", "plain"), ("message", "[DONE]")]


def test_http_errors_are_clear_and_never_echo_the_key():
    error = http_error(
        401, b'{"error": {"message": "Incorrect API key provided"}}', provider="OpenAI-compatible"
    )
    assert error.code == "auth_failed" and "HTTP 401" in error.message
    assert "Incorrect API key provided" in error.message
    assert http_error(404, b"", provider="X").code == "not_found"
    assert http_error(429, b"slow down", provider="X").code == "rate_limited"
    assert http_error(503, b"<html>oops</html>", provider="X").code == "provider_unavailable"
    refused = transport_error(httpx.ConnectError("boom"), provider="X", base_url="http://h:1")
    assert refused.code == "unreachable" and "http://h:1" in refused.message
    assert transport_error(httpx.ReadTimeout("t"), provider="X", base_url="u").code == "timeout"
    config = ProviderConfig("openai", api_key="sk-secret")
    assert "sk-secret" not in repr(config)


def test_result_for_model_never_includes_ui_meta():
    from chat.agent import context_text, result_for_model
    from chat.models import ToolCall

    call = ToolCall(
        status="success",
        tool_name="t",
        result={
            "parts": [
                {"type": "text", "text": "visible"},
                {"type": "text", "text": "user only", "audience": ["user"]},
                {"type": "ui", "uri": "ui://x/app", "meta": {"secret": "UI-META"}},
            ],
            "structured": {"n": 1},
            "resources": [],
            "meta": {"isError": False},
            "uiMeta": {"secret": "RESULT-META"},
        },
    )
    text, is_error = result_for_model(call)
    assert "visible" in text and '"n":1' in text and "ui://x/app" in text
    assert "RESULT-META" not in text and "UI-META" not in text and "user only" not in text
    assert not is_error
    rejected = ToolCall(status="rejected", error={"message": "marco rejected this call."})
    assert result_for_model(rejected) == (
        "The tool call was not run: marco rejected this call.",
        True,
    )
    assert (
        context_text(
            {
                "content": [{"type": "text", "text": "a", "_meta": {"x": "NO"}}],
                "structuredContent": {"b": 2},
            }
        )
        == 'a\n{"b":2}'
    )
