"""OpenAI-compatible Chat Completions with ``stream: true`` (OpenAI, vLLM, Ollama, llama.cpp…).

Spoken over plain HTTP (httpx): ``POST {base_url}/chat/completions`` with tools as
``{"type": "function", "function": {name, description, parameters}}``; the answer is a
server-sent event stream of ``chat.completion.chunk`` objects ended by ``data: [DONE]``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from .base import (
    AssistantTurn,
    Finish,
    ProviderConfig,
    ProviderError,
    ProviderEvent,
    ProviderRequest,
    TextDelta,
    ToolCallComplete,
    ToolCallDelta,
    ToolCallStart,
    ToolResult,
    UserTurn,
    http_error,
    parse_json_event,
    sse_events,
    tool_result_text,
    transport_error,
)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
LABEL = "OpenAI-compatible"
FINISH_REASONS = {"tool_calls": "tool_calls", "function_call": "tool_calls"}


def request_body(request: ProviderRequest) -> dict[str, Any]:
    """The Chat Completions request for a neutral :class:`ProviderRequest`."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for item in request.messages:
        if isinstance(item, UserTurn) and item.images:  # text, then image_url parts
            content: list[dict[str, Any]] = [{"type": "text", "text": item.text}]
            content.extend(
                {"type": "image_url", "image_url": {"url": f"data:{i.mime_type};base64,{i.data}"}}
                for i in item.images
            )
            messages.append({"role": "user", "content": content})
        elif isinstance(item, UserTurn):
            messages.append({"role": "user", "content": item.text})
        elif isinstance(item, AssistantTurn):
            message: dict[str, Any] = {"role": "assistant", "content": item.text or None}
            if item.tool_uses:
                message["tool_calls"] = [
                    {
                        "id": use.id,
                        "type": "function",
                        "function": {
                            "name": use.name,
                            "arguments": json.dumps(use.arguments, ensure_ascii=False),
                        },
                    }
                    for use in item.tool_uses
                ]
            elif not item.text:
                message["content"] = ""
            messages.append(message)
        elif isinstance(item, ToolResult):
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": item.tool_use_id,
                    "content": tool_result_text(item),
                }
            )
    body: dict[str, Any] = {
        "model": request.model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        # No max_tokens: newer OpenAI models refuse it (max_completion_tokens), and every
        # compatible server has a sane default.
    }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in request.tools
        ]
    return body


@dataclass
class _Call:
    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""
    started: bool = False


class ChunkReader:
    """Turns decoded ``chat.completion.chunk`` objects into provider events (pure)."""

    def __init__(self) -> None:
        self.calls: dict[int, _Call] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, int] = {}
        self.done = False

    def feed(self, chunk: dict[str, Any]) -> list[ProviderEvent]:
        if "error" in chunk and chunk.get("error"):
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else str(error)
            raise ProviderError(
                "provider_error", f"The {LABEL} provider reported an error: {str(message)[:300]}"
            )
        events: list[ProviderEvent] = []
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = {k: v for k, v in usage.items() if isinstance(v, int)}
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            if usage is None:
                raise ProviderError(
                    "bad_response", f"The {LABEL} provider sent a chunk without choices."
                )
            return events
        for choice in choices[:1]:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or choice.get("message") or {}
            if not isinstance(delta, dict):
                delta = {}
            content = delta.get("content")
            if isinstance(content, str) and content:
                events.append(TextDelta(content))
            for raw in delta.get("tool_calls") or []:
                if isinstance(raw, dict):
                    events.extend(self._tool_delta(raw))
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.finish_reason = reason
        return events

    def _tool_delta(self, raw: dict[str, Any]) -> list[ProviderEvent]:
        index = raw.get("index")
        if not isinstance(index, int):  # servers that omit the index: match by id
            rid = raw.get("id")
            known = next((c.index for c in self.calls.values() if rid and c.id == rid), None)
            if known is not None:
                index = known
            else:
                index = len(self.calls) if rid else max(self.calls, default=0)
        call = self.calls.get(index)
        if call is None:
            call = self.calls[index] = _Call(index=index)
        if isinstance(raw.get("id"), str) and raw["id"] and not call.id:
            call.id = raw["id"]
        function = raw.get("function") if isinstance(raw.get("function"), dict) else {}
        if isinstance(function.get("name"), str) and function["name"] and not call.name:
            call.name = function["name"]
        events: list[ProviderEvent] = []
        fragment = function.get("arguments")
        if isinstance(fragment, dict):  # a few servers send the object, not its JSON text
            fragment = json.dumps(fragment)
        if not call.started and call.name:
            call.id = call.id or f"call_{uuid.uuid4().hex[:24]}"
            call.started = True
            events.append(ToolCallStart(index=call.index, id=call.id, name=call.name))
            if call.arguments:  # fragments that came before the name
                events.append(ToolCallDelta(index=call.index, id=call.id, fragment=call.arguments))
        if isinstance(fragment, str) and fragment:
            call.arguments += fragment
            if call.started:
                events.append(ToolCallDelta(index=call.index, id=call.id, fragment=fragment))
        return events

    def finish(self) -> list[ProviderEvent]:
        events: list[ProviderEvent] = []
        for index in sorted(self.calls):
            call = self.calls[index]
            if not call.name:
                raise ProviderError(
                    "bad_response", f"The {LABEL} provider streamed a tool call without a name."
                )
            if not call.started:
                call.id = call.id or f"call_{uuid.uuid4().hex[:24]}"
                events.append(ToolCallStart(index=index, id=call.id, name=call.name))
            events.append(
                ToolCallComplete(
                    index=index, id=call.id, name=call.name, arguments=call.arguments or "{}"
                )
            )
        reason = FINISH_REASONS.get(self.finish_reason or "", self.finish_reason or "stop")
        if self.calls:
            reason = "tool_calls"  # some servers say "stop" after tool calls
        events.append(Finish(reason=reason, usage=self.usage, raw_reason=self.finish_reason or ""))
        return events


class OpenAIProvider:
    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        self.base_url = (config.base_url or DEFAULT_BASE_URL).rstrip("/")

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        return headers

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        if not request.model:
            raise ProviderError(
                "no_model",
                "No model is configured: set the workspace's model (or ATRIUM_MODEL).",
            )
        async for event in self.stream_body(request_body(request)):
            yield event

    async def stream_body(self, body: dict[str, Any]) -> AsyncIterator[ProviderEvent]:
        """Stream a Chat Completions request body built elsewhere (``stream: true``), e.g.
        by :mod:`chat.providers.sampling_format`: the same transport, errors and reader."""
        url = f"{self.base_url}/chat/completions"
        reader = ChunkReader()
        try:
            async with (
                httpx.AsyncClient(timeout=self.config.timeout()) as client,
                client.stream("POST", url, json=body, headers=self._headers()) as response,
            ):
                if response.status_code != 200:
                    raw = await response.aread()
                    raise http_error(response.status_code, raw[:4096], provider=LABEL)
                content_type = response.headers.get("content-type", "")
                if "json" in content_type:  # a server that ignored stream: true
                    raw = await response.aread()
                    chunk = parse_json_event(raw.decode("utf-8", "replace"), provider=LABEL)
                    for event in reader.feed(chunk):
                        yield event
                    reader.done = True
                else:
                    async for _, data in sse_events(response):
                        if data.strip() == "[DONE]":
                            reader.done = True
                            break
                        for event in reader.feed(parse_json_event(data, provider=LABEL)):
                            yield event
        except httpx.HTTPError as exc:
            raise transport_error(exc, provider=LABEL, base_url=self.base_url) from None
        if not reader.done and reader.finish_reason is None:
            raise ProviderError(
                "bad_response", f"The {LABEL} provider's answer ended before it was complete."
            )
        for event in reader.finish():
            yield event
