"""MCP sampling (``sampling/createMessage``) ↔ a provider's wire format. Pure: no Django.

A server's request params (wire JSON, camelCase, MCP 2025-11-25 with tools per SEP-1577) are
read by :func:`parse_params` into a :class:`SamplingRequest`: validated, bounded, and built
from the known fields only — so ``_meta`` (of the params, of a message, of a content block,
or as a key anywhere inside a tool's schema, a tool use's input or a structured result)
never reaches a model provider (DESIGN invariant 8). What is left out on purpose:

- ``includeContext``: anything but ``"none"`` is read as ``"none"``. The thread's content is
  its members' data; a server asking for a completion has not earned a view of it.
- ``modelPreferences``: advisory; the workspace's configured model answers.
- ``metadata``: "provider-specific pass-through"; a server does not get to set fields of
  the workspace's provider requests (user ids, billing tags, …).
- audio content: no provider here reads it; a clear error instead.

:func:`openai_body` and :func:`anthropic_body` build the provider's streamed request;
:func:`result_from_events` turns the provider's neutral events (:mod:`.base`) back into the
``CreateMessageResult`` wire JSON.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import Any

from .base import Finish, ProviderEvent, TextDelta, ToolCallComplete

# The host's caps (docs/mcp-client.md, "Sampling").
HOST_MAX_TOKENS = 4096  # a request's maxTokens is cut to this
MAX_MESSAGES = 100
MAX_TEXT_CHARS = 200_000  # all text of a request: system prompt, messages, tool results
MAX_IMAGES = 10
MAX_IMAGE_BYTES = 5 * 1024 * 1024  # decoded, per image (Anthropic's own limit)
MAX_TOOLS = 64
MAX_SCHEMA_CHARS = 64_000  # one tool's input schema, as JSON
MAX_STOP_SEQUENCES = 4  # OpenAI's limit
MAX_STOP_SEQUENCE_CHARS = 200
IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}
TOOL_CHOICES = {"auto", "required", "none"}

_SIGNATURES = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
}
_TOOL_NAME_RE = re.compile(r"[^a-zA-Z0-9_-]")
_ID_RE = re.compile(r"[^a-zA-Z0-9_-]")


class SamplingFormatError(ValueError):
    """A request Atrium will not send: malformed, unsupported, or over a cap."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# ----------------------------------------------------------------------------- request


@dataclass(frozen=True)
class SamplingMessage:
    role: str  # user | assistant
    # Normalized blocks, only known fields: {"type": "text", "text"},
    # {"type": "image", "data", "mimeType"}, {"type": "tool_use", "id", "name", "input"},
    # {"type": "tool_result", "toolUseId", "content": [text|image blocks], "isError"}.
    blocks: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class SamplingTool:
    name: str  # the server's name for it
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class SamplingRequest:
    messages: tuple[SamplingMessage, ...]
    max_tokens: int  # already capped by HOST_MAX_TOKENS
    requested_max_tokens: int
    system: str = ""
    temperature: float | None = None
    stop_sequences: tuple[str, ...] = ()
    tools: tuple[SamplingTool, ...] = ()
    tool_choice: str = "auto"
    include_context_ignored: str = ""  # the value asked for, when it was not "none"
    images: int = 0
    text_chars: int = 0

    @property
    def wire_names(self) -> dict[str, str]:
        """Each tool's name as sent (``[a-zA-Z0-9_-]{1,64}``, unique), by its own name."""
        return _wire_names([t.name for t in self.tools])


def without_meta(value: Any) -> Any:
    """A copy of JSON ``value`` with every ``_meta`` key removed, at any depth."""
    if isinstance(value, dict):
        return {k: without_meta(v) for k, v in value.items() if k != "_meta"}
    if isinstance(value, list):
        return [without_meta(v) for v in value]
    return value


def parse_params(params: Any) -> SamplingRequest:
    """Validate a ``sampling/createMessage`` request's params; raise
    :class:`SamplingFormatError` with a message fit for the server (and the thread)."""
    if not isinstance(params, dict):
        raise _malformed("params must be an object")
    counter = _Counter()
    max_tokens = params.get("maxTokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise _malformed("maxTokens must be a positive integer")
    system = params.get("systemPrompt")
    if system is None:
        system = ""
    if not isinstance(system, str):
        raise _malformed("systemPrompt must be a string")
    counter.text(system)
    temperature = params.get("temperature")
    if temperature is not None:
        if isinstance(temperature, bool) or not isinstance(temperature, int | float):
            raise _malformed("temperature must be a number")
        if not 0 <= temperature <= 2:
            raise _malformed("temperature must be between 0 and 2")
        temperature = float(temperature)
    stops = params.get("stopSequences") or []
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise _malformed("stopSequences must be a list of non-empty strings")
    if len(stops) > MAX_STOP_SEQUENCES:
        raise _too_large(f"at most {MAX_STOP_SEQUENCES} stop sequences")
    if any(len(s) > MAX_STOP_SEQUENCE_CHARS for s in stops):
        raise _too_large(f"a stop sequence is longer than {MAX_STOP_SEQUENCE_CHARS} characters")
    include = params.get("includeContext")
    if include is not None and include not in ("none", "thisServer", "allServers"):
        raise _malformed("includeContext must be none, thisServer or allServers")
    tools = _parse_tools(params.get("tools"))
    choice = _parse_tool_choice(params.get("toolChoice"))
    messages = _parse_messages(params.get("messages"), counter)
    if not tools and any(
        b["type"] in ("tool_use", "tool_result") for m in messages for b in m.blocks
    ):
        raise _malformed("tool_use and tool_result content need the request's tools")
    return SamplingRequest(
        messages=messages,
        max_tokens=min(max_tokens, HOST_MAX_TOKENS),
        requested_max_tokens=max_tokens,
        system=system,
        temperature=temperature,
        stop_sequences=tuple(stops),
        tools=tools,
        tool_choice=choice,
        include_context_ignored=include if include not in (None, "none") else "",
        images=counter.images,
        text_chars=counter.chars,
    )


@dataclass
class _Counter:
    chars: int = 0
    images: int = 0

    def text(self, value: str) -> None:
        self.chars += len(value)
        if self.chars > MAX_TEXT_CHARS:
            raise _too_large(f"more than {MAX_TEXT_CHARS} characters of text")

    def image(self) -> None:
        self.images += 1
        if self.images > MAX_IMAGES:
            raise _too_large(f"more than {MAX_IMAGES} images")


def _parse_tools(raw: Any) -> tuple[SamplingTool, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _malformed("tools must be a list")
    if len(raw) > MAX_TOOLS:
        raise _too_large(f"more than {MAX_TOOLS} tools")
    tools: list[SamplingTool] = []
    seen: set[str] = set()
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise _malformed("each tool needs a name")
        name = item["name"][:200]
        if name in seen:
            raise _malformed(f"two tools are named {name!r}")
        seen.add(name)
        schema = item.get("inputSchema")
        if schema is None:
            schema = {"type": "object", "properties": {}}
        if not isinstance(schema, dict):
            raise _malformed(f"the input schema of tool {name!r} must be an object")
        schema = without_meta(schema)
        if len(json.dumps(schema)) > MAX_SCHEMA_CHARS:
            raise _too_large(f"the input schema of tool {name!r} is over {MAX_SCHEMA_CHARS} chars")
        description = item.get("description")
        if not isinstance(description, str):
            title = item.get("title")
            description = title if isinstance(title, str) else ""
        tools.append(SamplingTool(name=name, description=description[:4000], input_schema=schema))
    return tuple(tools)


def _parse_tool_choice(raw: Any) -> str:
    if raw is None:
        return "auto"
    if not isinstance(raw, dict):
        raise _malformed("toolChoice must be an object")
    mode = raw.get("mode", "auto")
    if mode is None:
        mode = "auto"
    if mode not in TOOL_CHOICES:
        raise _malformed("toolChoice.mode must be auto, required or none")
    return str(mode)


def _parse_messages(raw: Any, counter: _Counter) -> tuple[SamplingMessage, ...]:
    if not isinstance(raw, list) or not raw:
        raise _malformed("messages must be a non-empty list")
    if len(raw) > MAX_MESSAGES:
        raise _too_large(f"more than {MAX_MESSAGES} messages")
    messages: list[SamplingMessage] = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise _malformed(f"message {index} must be an object")
        role = item.get("role")
        if role not in ("user", "assistant"):
            raise _malformed(f"message {index} has role {str(role)[:20]!r} (user or assistant)")
        content = item.get("content")
        items = content if isinstance(content, list) else [content]
        if not items:
            raise _malformed(f"message {index} has no content")
        blocks = tuple(_parse_block(b, role, index, counter) for b in items)
        kinds = {b["type"] for b in blocks}
        if "tool_result" in kinds and kinds != {"tool_result"}:
            raise _malformed(f"message {index} mixes tool results with other content")
        messages.append(SamplingMessage(role=role, blocks=blocks))
    return tuple(messages)


def _parse_block(raw: Any, role: str, index: int, counter: _Counter) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise _malformed(f"message {index} has content that is not an object")
    kind = raw.get("type")
    if kind == "text":
        text = raw.get("text")
        if not isinstance(text, str):
            raise _malformed(f"a text block of message {index} has no text")
        counter.text(text)
        return {"type": "text", "text": text}
    if kind == "image":
        return _parse_image(raw, index, counter)
    if kind == "audio":
        raise SamplingFormatError(
            "unsupported",
            "Audio content is not supported: the workspace's model provider takes text and "
            "images only.",
        )
    if kind == "tool_use":
        if role != "assistant":
            raise _malformed(f"message {index}: tool_use belongs in an assistant message")
        call_id, name, arguments = raw.get("id"), raw.get("name"), raw.get("input")
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
            raise _malformed(f"a tool_use block of message {index} needs an id and a name")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise _malformed(f"the input of tool_use {call_id[:40]!r} must be an object")
        arguments = without_meta(arguments)
        counter.text(json.dumps(arguments))
        return {"type": "tool_use", "id": call_id[:200], "name": name[:200], "input": arguments}
    if kind == "tool_result":
        if role != "user":
            raise _malformed(f"message {index}: tool_result belongs in a user message")
        use_id = raw.get("toolUseId")
        if not isinstance(use_id, str) or not use_id:
            raise _malformed(f"a tool_result block of message {index} needs a toolUseId")
        inner = raw.get("content") or []
        if not isinstance(inner, list):
            raise _malformed(f"the content of tool_result {use_id[:40]!r} must be a list")
        parts = [_result_part(part, index, counter) for part in inner]
        structured = raw.get("structuredContent")
        if isinstance(structured, dict):
            text = json.dumps(without_meta(structured), ensure_ascii=False)
            counter.text(text)
            parts.append({"type": "text", "text": text})
        return {
            "type": "tool_result",
            "toolUseId": use_id[:200],
            "content": parts,
            "isError": raw.get("isError") is True,
        }
    raise _malformed(f"message {index} has content of unknown type {str(kind)[:30]!r}")


def _result_part(raw: Any, index: int, counter: _Counter) -> dict[str, Any]:
    """A tool result's content block as text or image (resources become text)."""
    if not isinstance(raw, dict):
        raise _malformed(f"a tool result of message {index} has content that is not an object")
    kind = raw.get("type")
    if kind in ("text", "image", "audio"):
        return _parse_block(raw, "user", index, counter)
    if kind == "resource_link":
        uri = str(raw.get("uri") or "")[:2000]
        label = str(raw.get("title") or raw.get("name") or "")[:200]
        text = f"[resource link: {label} {uri}]".replace("  ", " ")
    elif kind == "resource":
        found = raw.get("resource")
        resource: dict[str, Any] = found if isinstance(found, dict) else {}
        uri = str(resource.get("uri") or "")[:2000]
        if isinstance(resource.get("text"), str):
            text = f"[resource {uri}]\n{resource['text']}"
        else:
            mime = str(resource.get("mimeType") or "binary")[:100]
            text = f"[resource {uri}: {mime} content, not shown]"
    else:
        raise _malformed(f"a tool result of message {index} has content of type {kind!r}")
    counter.text(text)
    return {"type": "text", "text": text}


def _parse_image(raw: dict[str, Any], index: int, counter: _Counter) -> dict[str, Any]:
    mime = str(raw.get("mimeType") or "").split(";")[0].strip().lower()
    if mime not in IMAGE_TYPES:
        raise SamplingFormatError(
            "unsupported",
            f"Image type {mime[:60]!r} is not supported (use {', '.join(sorted(IMAGE_TYPES))}).",
        )
    data = raw.get("data")
    if not isinstance(data, str) or not data:
        raise _malformed(f"an image of message {index} has no data")
    if len(data) > (MAX_IMAGE_BYTES * 4) // 3 + 4:
        raise _too_large(f"an image is over {MAX_IMAGE_BYTES // (1024 * 1024)} MB")
    try:
        decoded = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise _malformed(f"an image of message {index} is not valid base64") from None
    if not _looks_like(mime, decoded):
        raise _malformed(f"an image of message {index} is not a {mime} image")
    counter.image()
    return {"type": "image", "data": data, "mimeType": mime}


def _looks_like(mime: str, data: bytes) -> bool:
    if mime == "image/webp":
        return data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    return any(data.startswith(sig) for sig in _SIGNATURES.get(mime, ()))


def _malformed(detail: str) -> SamplingFormatError:
    return SamplingFormatError("malformed", f"Malformed sampling request: {detail}.")


def _too_large(detail: str) -> SamplingFormatError:
    return SamplingFormatError("too_large", f"Sampling request too large: {detail}.")


def _wire_names(names: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        base = _TOOL_NAME_RE.sub("_", name)[:64] or "tool"
        wire, counter = base, 1
        while wire in taken:
            counter += 1
            suffix = f"_{counter}"
            wire = base[: 64 - len(suffix)] + suffix
        taken.add(wire)
        out[name] = wire
    return out


def _wire_id(value: str) -> str:
    return _ID_RE.sub("_", value)[:100] or "toolu_unknown"


# ------------------------------------------------------------------------ OpenAI-compatible


def openai_body(request: SamplingRequest, *, model: str) -> dict[str, Any]:
    """A streamed Chat Completions request. Images are ``image_url`` data URLs; tool
    results are ``tool`` messages (their images follow in a user message, since a ``tool``
    message carries text only)."""
    names = request.wire_names
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for message in request.messages:
        if message.role == "assistant":
            text = "".join(b["text"] for b in message.blocks if b["type"] == "text")
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            uses = [b for b in message.blocks if b["type"] == "tool_use"]
            if uses:
                entry["tool_calls"] = [
                    {
                        "id": use["id"],
                        "type": "function",
                        "function": {
                            "name": names.get(use["name"], _TOOL_NAME_RE.sub("_", use["name"])),
                            "arguments": json.dumps(use["input"], ensure_ascii=False),
                        },
                    }
                    for use in uses
                ]
            else:
                entry["content"] = text
            messages.append(entry)
            continue
        if message.blocks[0]["type"] == "tool_result":
            images: list[dict[str, Any]] = []
            for block in message.blocks:
                text = "\n\n".join(p["text"] for p in block["content"] if p["type"] == "text")
                if block["isError"]:
                    text = f"Error: {text}" if text else "Error."
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": block["toolUseId"],
                        "content": text or "(no content)",
                    }
                )
                images += [_openai_part(p) for p in block["content"] if p["type"] == "image"]
            if images:
                intro = {"type": "text", "text": "(images returned by the tools above)"}
                messages.append({"role": "user", "content": [intro, *images]})
            continue
        if all(b["type"] == "text" for b in message.blocks):
            messages.append({"role": "user", "content": "".join(b["text"] for b in message.blocks)})
        else:
            messages.append({"role": "user", "content": [_openai_part(b) for b in message.blocks]})
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        # The current name; vLLM, llama.cpp's server and Ollama read it too.
        "max_completion_tokens": request.max_tokens,
    }
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.stop_sequences:
        body["stop"] = list(request.stop_sequences)
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": names[tool.name],
                    "description": tool.description,
                    "parameters": tool.input_schema,
                },
            }
            for tool in request.tools
        ]
        body["tool_choice"] = request.tool_choice
    return body


def _openai_part(block: dict[str, Any]) -> dict[str, Any]:
    if block["type"] == "image":
        url = f"data:{block['mimeType']};base64,{block['data']}"
        return {"type": "image_url", "image_url": {"url": url}}
    return {"type": "text", "text": block["text"]}


# -------------------------------------------------------------------------------- Anthropic


def anthropic_body(request: SamplingRequest, *, model: str) -> dict[str, Any]:
    """A streamed Messages API request: base64 image sources, ``tool_use`` /
    ``tool_result`` blocks, consecutive messages of one role merged, a user message first."""
    names = request.wire_names
    messages: list[dict[str, Any]] = []
    for message in request.messages:
        blocks = [_anthropic_block(b, names) for b in message.blocks]
        if messages and messages[-1]["role"] == message.role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": message.role, "content": blocks})
    if messages[0]["role"] != "user":
        messages.insert(
            0, {"role": "user", "content": [{"type": "text", "text": "(conversation start)"}]}
        )
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "messages": messages,
        "stream": True,
    }
    if request.system:
        body["system"] = request.system
    if request.temperature is not None:
        body["temperature"] = min(request.temperature, 1.0)  # Anthropic's range is 0–1
    if request.stop_sequences:
        body["stop_sequences"] = list(request.stop_sequences)
    if request.tools:
        body["tools"] = [
            {"name": names[t.name], "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
        body["tool_choice"] = {
            "type": {"auto": "auto", "required": "any", "none": "none"}[request.tool_choice]
        }
    return body


def _anthropic_block(block: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    kind = block["type"]
    if kind == "text":
        return {"type": "text", "text": block["text"]}
    if kind == "image":
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": block["mimeType"], "data": block["data"]},
        }
    if kind == "tool_use":
        return {
            "type": "tool_use",
            "id": _wire_id(block["id"]),
            "name": names.get(block["name"], _TOOL_NAME_RE.sub("_", block["name"])[:64]),
            "input": block["input"],
        }
    return {
        "type": "tool_result",
        "tool_use_id": _wire_id(block["toolUseId"]),
        "content": [_anthropic_block(p, names) for p in block["content"]]
        or [{"type": "text", "text": "(no content)"}],
        "is_error": block["isError"],
    }


# ---------------------------------------------------------------------------------- result


@dataclass
class SampledAnswer:
    """The ``CreateMessageResult`` wire JSON and the tokens the provider counted."""

    result: dict[str, Any]
    input_tokens: int = 0
    output_tokens: int = 0
    usage: dict[str, int] = field(default_factory=dict)


def result_from_events(
    events: list[ProviderEvent], *, model: str, request: SamplingRequest
) -> SampledAnswer:
    """The provider's neutral events → ``{role, content, model, stopReason}``.

    ``content`` is one text block, or a list of blocks (text, then ``tool_use``) when the
    model called tools (``stopReason: "toolUse"``). Tool names map back to the server's."""
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    by_wire = {wire: name for name, wire in request.wire_names.items()}
    uses: list[dict[str, Any]] = []
    for event in events:
        if not isinstance(event, ToolCallComplete):
            continue
        try:
            arguments = json.loads(event.arguments or "{}")
        except ValueError:
            raise SamplingFormatError(
                "bad_response", "The model answered with tool arguments that are not JSON."
            ) from None
        if not isinstance(arguments, dict):
            raise SamplingFormatError(
                "bad_response", "The model answered with tool arguments that are not an object."
            )
        uses.append(
            {
                "type": "tool_use",
                "id": event.id,
                "name": by_wire.get(event.name, event.name),
                "input": arguments,
            }
        )
    finish = next((e for e in reversed(events) if isinstance(e, Finish)), None)
    reason = finish.reason if finish else "stop"
    raw = finish.raw_reason if finish else ""
    if uses:
        stop_reason = "toolUse"
    elif reason == "length":
        stop_reason = "maxTokens"
    elif raw == "stop_sequence":  # Anthropic says so; OpenAI-compatible servers say "stop"
        stop_reason = "stopSequence"
    elif reason == "content_filter":
        stop_reason = "refusal"
    else:
        stop_reason = "endTurn"
    content: Any
    if uses:
        content = ([{"type": "text", "text": text}] if text else []) + uses
    else:
        content = {"type": "text", "text": text}
    usage = dict(finish.usage) if finish else {}
    return SampledAnswer(
        result={"role": "assistant", "content": content, "model": model, "stopReason": stop_reason},
        input_tokens=int(usage.get("prompt_tokens", usage.get("input_tokens", 0)) or 0),
        output_tokens=int(usage.get("completion_tokens", usage.get("output_tokens", 0)) or 0),
        usage=usage,
    )


__all__ = [
    "HOST_MAX_TOKENS",
    "SampledAnswer",
    "SamplingFormatError",
    "SamplingRequest",
    "anthropic_body",
    "openai_body",
    "parse_params",
    "result_from_events",
    "without_meta",
]
