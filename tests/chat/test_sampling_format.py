"""MCP sampling params → provider bodies → CreateMessageResult (chat.providers.sampling_format)."""

from __future__ import annotations

import base64
import json

import pytest

from chat.providers.base import Finish, TextDelta, ToolCallComplete, ToolCallStart
from chat.providers.sampling_format import (
    HOST_MAX_TOKENS,
    MAX_MESSAGES,
    SamplingFormatError,
    anthropic_body,
    openai_body,
    parse_params,
    result_from_events,
)

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()
META = "SENTINEL-SAMPLING-META-55aa"


def _params(**extra):
    return {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}],
        "maxTokens": 50,
        **extra,
    }


def _tooled():
    return _params(
        _meta={"progressToken": META},
        messages=[
            {
                "role": "user",
                "content": {"type": "text", "text": "Weather in Paris?", "_meta": {"x": META}},
                "_meta": {"y": META},
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get.weather",
                        "input": {"city": "Paris", "_meta": META},
                        "_meta": {"z": META},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "toolUseId": "toolu_1",
                        "content": [
                            {"type": "text", "text": "18C, cloudy"},
                            {"type": "image", "data": PNG, "mimeType": "image/png"},
                        ],
                        "structuredContent": {"temp": 18, "_meta": META},
                        "_meta": {"w": META},
                    }
                ],
            },
        ],
        tools=[
            {
                "name": "get.weather",
                "description": "Weather by city",
                "inputSchema": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "_meta": META,
                },
                "_meta": {"t": META},
            }
        ],
        toolChoice={"mode": "required"},
        metadata={"user": META},
        modelPreferences={"hints": [{"name": "claude"}]},
        includeContext="allServers",
        temperature=0.3,
        stopSequences=["END"],
    )


def test_openai_body_carries_text_images_tools_and_no_meta():
    request = parse_params(_tooled())
    body = openai_body(request, model="m")
    raw = json.dumps(body)
    assert META not in raw and "_meta" not in raw
    assert body["max_completion_tokens"] == 50 and body["temperature"] == 0.3
    assert body["stop"] == ["END"] and body["tool_choice"] == "required"
    assert body["tools"][0]["function"]["name"] == "get_weather"  # a name OpenAI accepts
    user, assistant, tool, images = body["messages"]
    assert user == {"role": "user", "content": "Weather in Paris?"}
    assert assistant["tool_calls"][0]["function"] == {
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    }
    assert tool["role"] == "tool" and tool["tool_call_id"] == "toolu_1"
    assert "18C, cloudy" in tool["content"] and '"temp": 18' in tool["content"]
    assert images["content"][1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{PNG}"},
    }
    assert request.include_context_ignored == "allServers"


def test_anthropic_body_carries_blocks_and_no_meta():
    body = anthropic_body(parse_params(_tooled()), model="m")
    raw = json.dumps(body)
    assert META not in raw and "_meta" not in raw
    assert body["tool_choice"] == {"type": "any"} and body["stop_sequences"] == ["END"]
    assert body["tools"][0]["input_schema"] == {
        "type": "object",
        "properties": {"city": {"type": "string"}},
    }
    result = body["messages"][2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_1"
    assert result["content"][1]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": PNG,
    }


def test_max_tokens_is_capped_and_image_in_user_message():
    params = _params(maxTokens=10**6)
    params["messages"][0]["content"] = [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "data": PNG, "mimeType": "image/png"},
    ]
    request = parse_params(params)
    assert request.max_tokens == HOST_MAX_TOKENS and request.requested_max_tokens == 10**6
    assert openai_body(request, model="m")["messages"][0]["content"][1]["type"] == "image_url"
    assert anthropic_body(request, model="m")["messages"][0]["content"][1]["type"] == "image"


@pytest.mark.parametrize(
    ("params", "code", "words"),
    [
        ({"messages": [], "maxTokens": 5}, "malformed", "messages"),
        (_params(maxTokens=0), "malformed", "maxTokens"),
        (
            _params(
                messages=[
                    {
                        "role": "user",
                        "content": {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
                    }
                ]
            ),
            "unsupported",
            "Audio",
        ),
        (
            _params(
                messages=[
                    {
                        "role": "user",
                        "content": {"type": "image", "data": "!!", "mimeType": "image/png"},
                    }
                ]
            ),
            "malformed",
            "base64",
        ),
        (
            _params(
                messages=[
                    {
                        "role": "user",
                        "content": {"type": "image", "data": PNG, "mimeType": "image/jpeg"},
                    }
                ]
            ),
            "malformed",
            "image/jpeg",
        ),
        (
            _params(
                messages=[
                    {
                        "role": "user",
                        "content": {"type": "image", "data": PNG, "mimeType": "image/svg+xml"},
                    }
                ]
            ),
            "unsupported",
            "svg",
        ),
        (
            _params(messages=[{"role": "system", "content": {"type": "text", "text": "x"}}]),
            "malformed",
            "role",
        ),
        (
            _params(
                messages=[{"role": "user", "content": {"type": "text", "text": "x" * 300_000}}]
            ),
            "too_large",
            "characters",
        ),
        (
            _params(
                messages=[{"role": "user", "content": {"type": "text", "text": "x"}}]
                * (MAX_MESSAGES + 1)
            ),
            "too_large",
            "messages",
        ),
        (_params(stopSequences=["a", "b", "c", "d", "e"]), "too_large", "stop"),
        (
            _params(
                messages=[
                    {
                        "role": "assistant",
                        "content": {"type": "tool_use", "id": "a", "name": "t", "input": {}},
                    }
                ]
            ),
            "malformed",
            "tools",
        ),
        (_params(toolChoice={"mode": "sometimes"}), "malformed", "toolChoice"),
    ],
)
def test_refusals_are_clear(params, code, words):
    with pytest.raises(SamplingFormatError) as caught:
        parse_params(params)
    assert caught.value.code == code
    assert words.lower() in caught.value.message.lower()


def test_result_text_and_tool_use():
    request = parse_params(_tooled())
    text = result_from_events(
        [
            TextDelta("Hel"),
            TextDelta("lo"),
            Finish("stop", {"prompt_tokens": 11, "completion_tokens": 7}),
        ],
        model="m",
        request=request,
    )
    assert text.result == {
        "role": "assistant",
        "content": {"type": "text", "text": "Hello"},
        "model": "m",
        "stopReason": "endTurn",
    }
    assert (text.input_tokens, text.output_tokens) == (11, 7)
    tools = result_from_events(
        [
            TextDelta("Let me look."),
            ToolCallStart(0, "call_9", "get_weather"),
            ToolCallComplete(0, "call_9", "get_weather", '{"city": "Oslo"}'),
            Finish("tool_calls", {"input_tokens": 3, "output_tokens": 4}),
        ],
        model="m",
        request=request,
    )
    assert tools.result["stopReason"] == "toolUse"
    assert tools.result["content"] == [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "call_9", "name": "get.weather", "input": {"city": "Oslo"}},
    ]
    assert (tools.input_tokens, tools.output_tokens) == (3, 4)
    length = result_from_events([TextDelta("x"), Finish("length")], model="m", request=request)
    assert length.result["stopReason"] == "maxTokens"
    stop = result_from_events(
        [Finish("stop", raw_reason="stop_sequence")], model="m", request=request
    )
    assert stop.result["stopReason"] == "stopSequence"
    with pytest.raises(SamplingFormatError):
        result_from_events(
            [ToolCallComplete(0, "c", "get_weather", "{oops"), Finish("tool_calls")],
            model="m",
            request=request,
        )
