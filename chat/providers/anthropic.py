"""Anthropic Messages API with ``stream: true`` (``tool_use`` blocks, ``input_json_delta``).

``POST {base_url}/v1/messages`` with ``x-api-key`` and ``anthropic-version``; the answer is
a server-sent event stream (``message_start``, ``content_block_start`` / ``_delta`` /
``_stop``, ``message_delta``, ``message_stop``, ``ping``, ``error``).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
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

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
LABEL = "Anthropic"
STOP_REASONS = {
    "tool_use": "tool_calls",
    "end_turn": "stop",
    "max_tokens": "length",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "refusal": "content_filter",
}
_ID_RE = re.compile(r"[^a-zA-Z0-9_-]")


def _tool_use_id(value: str) -> str:
    return _ID_RE.sub("_", value)[:100] or "toolu_unknown"


def request_body(request: ProviderRequest) -> dict[str, Any]:
    """The Messages API request: roles alternate, tool results are user ``tool_result`` blocks."""
    messages: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})

    for item in request.messages:
        if isinstance(item, UserTurn):
            add("user", [{"type": "text", "text": item.text}])
            add(  # attached images as base64 image blocks (chat.media.model_input)
                "user",
                [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": i.mime_type, "data": i.data},
                    }
                    for i in item.images
                ],
            )
        elif isinstance(item, AssistantTurn):
            blocks: list[dict[str, Any]] = []
            if item.text:
                blocks.append({"type": "text", "text": item.text})
            blocks.extend(
                {
                    "type": "tool_use",
                    "id": _tool_use_id(use.id),
                    "name": use.name,
                    "input": use.arguments,
                }
                for use in item.tool_uses
            )
            add("assistant", blocks)
        elif isinstance(item, ToolResult):
            add(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": _tool_use_id(item.tool_use_id),
                        "content": [{"type": "text", "text": tool_result_text(item)}],
                        "is_error": item.is_error,
                    }
                ],
            )
    if not messages or messages[0]["role"] != "user":
        messages.insert(
            0, {"role": "user", "content": [{"type": "text", "text": "(conversation start)"}]}
        )
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": messages,
        "stream": True,
    }
    if request.system:
        body["system"] = request.system
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
    return body


class EventReader:
    """Turns decoded Messages API stream events into provider events (pure)."""

    def __init__(self) -> None:
        self.tools: dict[int, dict[str, str]] = {}
        self.stop_reason: str | None = None
        self.usage: dict[str, int] = {}
        self.done = False

    def feed(self, kind: str, data: dict[str, Any]) -> list[ProviderEvent]:
        kind = data.get("type") if isinstance(data.get("type"), str) else kind
        events: list[ProviderEvent] = []
        if kind == "error":
            error = data.get("error") if isinstance(data.get("error"), dict) else {}
            message = str(error.get("message") or error.get("type") or "unknown error")[:300]
            code = (
                "provider_unavailable"
                if error.get("type") == "overloaded_error"
                else ("provider_error")
            )
            raise ProviderError(code, f"The {LABEL} provider reported an error: {message}")
        if kind == "message_start":
            usage = (data.get("message") or {}).get("usage") or {}
            self._usage(usage)
        elif kind == "content_block_start":
            index = data.get("index", 0)
            block = data.get("content_block") or {}
            if block.get("type") == "tool_use":
                call = {
                    "id": str(block.get("id") or f"toolu_{index}"),
                    "name": str(block.get("name") or ""),
                    "arguments": "",
                }
                self.tools[index] = call
                events.append(ToolCallStart(index=index, id=call["id"], name=call["name"]))
            elif block.get("type") == "text" and block.get("text"):
                events.append(TextDelta(str(block["text"])))
        elif kind == "content_block_delta":
            index = data.get("index", 0)
            delta = data.get("delta") or {}
            if delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
                if delta["text"]:
                    events.append(TextDelta(delta["text"]))
            elif delta.get("type") == "input_json_delta":
                call = self.tools.get(index)
                fragment = delta.get("partial_json")
                if call is not None and isinstance(fragment, str) and fragment:
                    call["arguments"] += fragment
                    events.append(ToolCallDelta(index=index, id=call["id"], fragment=fragment))
        elif kind == "content_block_stop":
            index = data.get("index", 0)
            call = self.tools.get(index)
            if call is not None:
                events.append(
                    ToolCallComplete(
                        index=index,
                        id=call["id"],
                        name=call["name"],
                        arguments=call["arguments"] or "{}",
                    )
                )
        elif kind == "message_delta":
            reason = (data.get("delta") or {}).get("stop_reason")
            if isinstance(reason, str):
                self.stop_reason = reason
            self._usage(data.get("usage") or {})
        elif kind == "message_stop":
            self.done = True
        return events

    def _usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self.usage.update({k: v for k, v in usage.items() if isinstance(v, int)})

    def finish(self) -> Finish:
        reason = STOP_REASONS.get(self.stop_reason or "", self.stop_reason or "stop")
        if self.tools:
            reason = "tool_calls"
        return Finish(reason=reason, usage=self.usage, raw_reason=self.stop_reason or "")


class AnthropicProvider:
    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        base = (config.base_url or DEFAULT_BASE_URL).rstrip("/")
        self.base_url = base
        self.url = f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        if not request.model:
            raise ProviderError(
                "no_model", "No model is configured: set the workspace's model (or ATRIUM_MODEL)."
            )
        async for event in self.stream_body(request_body(request)):
            yield event

    async def stream_body(self, body: dict[str, Any]) -> AsyncIterator[ProviderEvent]:
        """Stream a Messages API request body built elsewhere (``stream: true``), e.g. by
        :mod:`chat.providers.sampling_format`: the same transport, errors and reader."""
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            "anthropic-version": API_VERSION,
            "x-api-key": self.config.api_key,
        }
        reader = EventReader()
        try:
            async with (
                httpx.AsyncClient(timeout=self.config.timeout()) as client,
                client.stream("POST", self.url, json=body, headers=headers) as response,
            ):
                if response.status_code != 200:
                    raw = await response.aread()
                    raise http_error(response.status_code, raw[:4096], provider=LABEL)
                async for kind, data in sse_events(response):
                    for event in reader.feed(kind, parse_json_event(data, provider=LABEL)):
                        yield event
                    if reader.done:
                        break
        except httpx.HTTPError as exc:
            raise transport_error(exc, provider=LABEL, base_url=self.base_url) from None
        if not reader.done:
            raise ProviderError(
                "bad_response", f"The {LABEL} provider's answer ended before it was complete."
            )
        yield reader.finish()
