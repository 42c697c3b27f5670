"""The sampling engine (chat.server_requests.sampling) over the real provider code paths,
against the local fake OpenAI-compatible and Anthropic servers (tests/chat/fake_llm.py)."""

from __future__ import annotations

import base64
import json

import pytest
from channels.db import database_sync_to_async

from audit.models import AuditEvent
from audit.types import AuditEventType
from chat.providers.sampling_format import HOST_MAX_TOKENS
from chat.server_requests.sampling import (
    SamplingFailed,
    sampling_run,
    sampling_run_counted,
    sampling_unavailable,
)
from tests import factories
from tests.chat.fake_llm import (
    FakeLLM,
    Reply,
    anthropic_text,
    anthropic_tool_use,
    openai_text,
    openai_tool_calls,
)

pytestmark = [pytest.mark.django_db(transaction=True)]

META = "SENTINEL-SAMPLING-META-3c9d"
THREAD_SECRET = "the members' private launch date is 12 May"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 24).decode()
WEATHER_TOOL = {
    "name": "weather.get",
    "description": "Weather for a city",
    "inputSchema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "_meta": {"s": META},
    },
    "_meta": {"s": META},
}


@pytest.fixture
def openai_llm():
    with FakeLLM("openai") as fake:
        yield fake


@pytest.fixture
def anthropic_llm():
    with FakeLLM("anthropic") as fake:
        yield fake


def _configure(workspace, llm: FakeLLM, kind: str) -> None:
    workspace.provider = kind
    workspace.model = f"fake-{kind}-model"
    workspace.provider_base_url = llm.base_url
    workspace.provider_api_key = "sk-test"
    workspace.save()


@pytest.fixture
def server(personas):
    return factories.McpServerFactory(name="Everything", slug="everything")


@pytest.fixture
def thread_with_secret(personas):
    from chat import services

    services.message_post(thread=personas.thread, author=personas.owner, text=THREAD_SECRET)
    return personas.thread


def _text_params(**extra):
    return {
        "_meta": {"progressToken": META},
        "messages": [
            {
                "role": "user",
                "content": {"type": "text", "text": "Capital of France?", "_meta": {"s": META}},
                "_meta": {"s": META},
            }
        ],
        "systemPrompt": "Answer in one word.",
        "maxTokens": 10**6,
        "temperature": 0.2,
        "stopSequences": ["STOP"],
        "includeContext": "thisServer",
        "modelPreferences": {"hints": [{"name": "gpt-7"}], "intelligencePriority": 1},
        "metadata": {"user": META},
        **extra,
    }


def _audits(event_type: AuditEventType) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(event_type=int(event_type)).order_by("id"))


def _assert_clean(llm: FakeLLM) -> None:
    for raw in llm.bodies():
        assert META not in raw and "_meta" not in raw
        assert THREAD_SECRET not in raw  # includeContext is read as "none"
        assert "gpt-7" not in raw  # modelPreferences are advisory


async def test_openai_text_sampling_honours_params_strips_meta_and_counts_tokens(
    personas, openai_llm, server, thread_with_secret
):
    await database_sync_to_async(_configure)(personas.workspace, openai_llm, "openai")
    openai_llm.push(openai_text("Par", "is"))
    outcome = await sampling_run_counted(
        thread=personas.thread,
        server=server,
        params=_text_params(),
        actor_user_id=personas.owner.pk,
        request_ref=77,
    )
    assert outcome.result == {
        "role": "assistant",
        "content": {"type": "text", "text": "Paris"},
        "model": "fake-openai-model",
        "stopReason": "endTurn",
    }
    assert (outcome.input_tokens, outcome.output_tokens) == (11, 7)
    (request,) = openai_llm.requests
    assert request.path == "/v1/chat/completions"
    body = request.body
    assert body["model"] == "fake-openai-model" and body["stream"] is True
    assert body["max_completion_tokens"] == HOST_MAX_TOKENS  # the host's cap, not 10**6
    assert body["temperature"] == 0.2 and body["stop"] == ["STOP"]
    assert body["messages"] == [
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": "Capital of France?"},
    ]
    _assert_clean(openai_llm)
    (row,) = await database_sync_to_async(_audits)(AuditEventType.SAMPLING_RAN)
    assert row.server_id == server.pk and row.thread_id == personas.thread.pk
    assert row.actor_user_id == personas.owner.pk and row.decision == "allowed"
    assert row.extra["input_tokens"] == 11 and row.extra["output_tokens"] == 7
    assert row.extra["request"] == 77 and row.extra["include_context_ignored"] == "thisServer"


async def test_anthropic_text_sampling(personas, anthropic_llm, server):
    await database_sync_to_async(_configure)(personas.workspace, anthropic_llm, "anthropic")
    assert await sampling_unavailable(thread=personas.thread) is None
    anthropic_llm.push(anthropic_text("Paris"))
    result = await sampling_run(thread=personas.thread, server=server, params=_text_params())
    assert result["content"] == {"type": "text", "text": "Paris"}
    assert result["model"] == "fake-anthropic-model" and result["stopReason"] == "endTurn"
    body = anthropic_llm.requests[0].body
    assert body["system"] == "Answer in one word." and body["max_tokens"] == HOST_MAX_TOKENS
    assert body["stop_sequences"] == ["STOP"]
    _assert_clean(anthropic_llm)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_an_image_part_reaches_the_model_in_its_format(
    personas, openai_llm, anthropic_llm, server, kind
):
    llm = openai_llm if kind == "openai" else anthropic_llm
    await database_sync_to_async(_configure)(personas.workspace, llm, kind)
    llm.push(openai_text("A black square.") if kind == "openai" else anthropic_text("A square."))
    params = _text_params()
    params["messages"][0]["content"] = [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "data": PNG, "mimeType": "image/png", "_meta": {"s": META}},
    ]
    await sampling_run(thread=personas.thread, server=server, params=params)
    content = llm.requests[0].body["messages"][-1]["content"]
    if kind == "openai":
        assert content[1] == {
            "type": "image_url",
            "image_url": {"url": f"data:image/png;base64,{PNG}"},
        }
    else:
        assert content[1] == {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": PNG},
        }
    _assert_clean(llm)


async def test_openai_tools_round_returns_tool_use_then_takes_the_tool_result(
    personas, openai_llm, server
):
    await database_sync_to_async(_configure)(personas.workspace, openai_llm, "openai")
    openai_llm.push(
        openai_tool_calls(("call_w1", "weather_get", ['{"city":', ' "Oslo"}']), text=("Hm.",))
    )
    params = {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Weather in Oslo?"}}],
        "maxTokens": 200,
        "tools": [WEATHER_TOOL],
        "toolChoice": {"mode": "auto"},
    }
    first = await sampling_run(thread=personas.thread, server=server, params=params)
    assert first["stopReason"] == "toolUse"
    assert first["content"] == [
        {"type": "text", "text": "Hm."},
        # the server's own tool name, mapped back from the wire name
        {"type": "tool_use", "id": "call_w1", "name": "weather.get", "input": {"city": "Oslo"}},
    ]
    sent = openai_llm.requests[0].body
    assert sent["tool_choice"] == "auto"
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather_get",
                "description": "Weather for a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]

    # The server runs the tool and asks again with the result (SEP-1577's loop).
    openai_llm.push(openai_text("It is 4C in Oslo."))
    params["messages"] += [
        {"role": "assistant", "content": first["content"]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "toolUseId": "call_w1",
                    "content": [{"type": "text", "text": "4C, snow"}],
                    "_meta": {"s": META},
                }
            ],
        },
    ]
    second = await sampling_run(thread=personas.thread, server=server, params=params)
    assert second["content"] == {"type": "text", "text": "It is 4C in Oslo."}
    messages = openai_llm.requests[1].body["messages"]
    assert messages[1]["tool_calls"][0]["id"] == "call_w1"
    assert json.loads(messages[1]["tool_calls"][0]["function"]["arguments"]) == {"city": "Oslo"}
    assert messages[2] == {"role": "tool", "tool_call_id": "call_w1", "content": "4C, snow"}
    _assert_clean(openai_llm)


async def test_anthropic_tools_round(personas, anthropic_llm, server):
    await database_sync_to_async(_configure)(personas.workspace, anthropic_llm, "anthropic")
    anthropic_llm.push(anthropic_tool_use("toolu_7", "weather_get", ['{"city": "Lima"}']))
    params = {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Weather in Lima?"}}],
        "maxTokens": 200,
        "tools": [WEATHER_TOOL],
        "toolChoice": {"mode": "required"},
    }
    result = await sampling_run(thread=personas.thread, server=server, params=params)
    assert result["stopReason"] == "toolUse"
    assert result["content"] == [
        {"type": "tool_use", "id": "toolu_7", "name": "weather.get", "input": {"city": "Lima"}}
    ]
    body = anthropic_llm.requests[0].body
    assert body["tool_choice"] == {"type": "any"}
    assert body["tools"][0]["name"] == "weather_get"
    _assert_clean(anthropic_llm)


async def test_no_model_configured_fails_clearly_and_sends_nothing(personas, openai_llm, server):
    workspace = personas.workspace
    workspace.provider = "direct"
    workspace.provider_base_url = openai_llm.base_url
    await database_sync_to_async(workspace.save)()
    early = await sampling_unavailable(thread=personas.thread)  # before any consent card
    assert early is not None and early.code == "no_model"
    with pytest.raises(SamplingFailed) as caught:
        await sampling_run(thread=personas.thread, server=server, params=_text_params())
    assert caught.value.code == "no_model"
    assert "no model configured" in caught.value.message
    assert f"/admin/chat/workspace/{workspace.pk}/change/" in caught.value.message
    assert "ATRIUM_MODEL" in caught.value.message
    assert openai_llm.requests == []
    (row,) = await database_sync_to_async(_audits)(AuditEventType.SAMPLING_FAILED)
    assert row.reason == "no_model" and row.decision == "failed"


async def test_provider_errors_and_unsupported_content_fail_clearly(personas, openai_llm, server):
    await database_sync_to_async(_configure)(personas.workspace, openai_llm, "openai")
    openai_llm.push(Reply(401, {"error": {"message": "bad key"}}))
    with pytest.raises(SamplingFailed) as caught:
        await sampling_run(thread=personas.thread, server=server, params=_text_params())
    assert caught.value.code == "auth_failed"
    assert "The model provider failed" in caught.value.message and "bad key" in caught.value.message

    audio = _text_params()
    audio["messages"][0]["content"] = {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}
    with pytest.raises(SamplingFailed) as caught:
        await sampling_run(thread=personas.thread, server=server, params=audio)
    assert caught.value.code == "unsupported" and "Audio" in caught.value.message
    assert len(openai_llm.requests) == 1  # the audio request never left
    reasons = [
        r.reason for r in await database_sync_to_async(_audits)(AuditEventType.SAMPLING_FAILED)
    ]
    assert reasons == ["auth_failed", "unsupported"]
