"""The provider interface: one neutral conversation in, a stream of neutral events out.

The agent loop (``chat.agent``) builds a :class:`ProviderRequest` from the thread and reads
:data:`ProviderEvent` values from ``provider.stream(request)``. Each provider module turns
the request into its wire format and its server-sent events back into these events. Nothing
here imports Django: providers are plain, unit-testable code.

Failures of the provider (refused key, unreachable host, a response Atrium cannot read,
a timeout) are raised as :class:`ProviderError` with a message meant for the people in
the thread; the loop posts it as an assistant message with an error status.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from mcp_bridge.uimeta import json_safe, unstorable

# ------------------------------------------------------------------------ conversation


@dataclass(frozen=True)
class ImageInput:
    """An image a person attached, for providers that accept image parts (base64)."""

    mime_type: str  # image/png | image/jpeg | image/gif | image/webp
    data: str  # base64


@dataclass(frozen=True)
class UserTurn:
    """A message from a person (``text`` already carries the author's name if needed)."""

    text: str
    images: tuple[ImageInput, ...] = ()  # attached images (chat.media.model_input)


@dataclass(frozen=True)
class ToolUse:
    """A tool call the model made: its id, the wire name, and the parsed arguments."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class AssistantTurn:
    text: str
    tool_uses: tuple[ToolUse, ...] = ()


@dataclass(frozen=True)
class ToolResult:
    """The answer to one :class:`ToolUse`: text the model may see (never result ``_meta``)."""

    tool_use_id: str
    name: str
    text: str
    is_error: bool = False


ConversationItem = UserTurn | AssistantTurn | ToolResult


@dataclass(frozen=True)
class ProviderTool:
    name: str  # the wire name, ``<server slug>__<tool name>`` sanitized
    description: str
    parameters: dict[str, Any]


@dataclass
class ProviderRequest:
    model: str
    system: str
    messages: list[ConversationItem]
    tools: list[ProviderTool] = field(default_factory=list)
    max_tokens: int = 4096


# ------------------------------------------------------------------------------ events


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCallStart:
    index: int
    id: str
    name: str


@dataclass(frozen=True)
class ToolCallDelta:
    """A fragment of a tool call's JSON arguments (may split anywhere, even mid-token)."""

    index: int
    id: str
    fragment: str


@dataclass(frozen=True)
class ToolCallComplete:
    index: int
    id: str
    name: str
    arguments: str  # the whole JSON text as streamed


@dataclass(frozen=True)
class Finish:
    reason: str  # stop | tool_calls | length | content_filter | … (normalized where known)
    usage: dict[str, int] = field(default_factory=dict)
    # The provider's own reason before normalizing (e.g. Anthropic's ``stop_sequence``):
    # sampling reports ``stopSequence`` apart from a natural end.
    raw_reason: str = field(default="", compare=False)


ProviderEvent = TextDelta | ToolCallStart | ToolCallDelta | ToolCallComplete | Finish


class ProviderError(Exception):
    """A provider failure with a message fit for the thread (never a secret)."""

    def __init__(self, code: str, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "status": self.status}


class Provider(Protocol):
    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]: ...


@dataclass(frozen=True)
class ProviderConfig:
    kind: str  # a provider name (chat.providers.registry)
    model: str = ""
    base_url: str = ""
    api_key: str = ""
    connect_timeout: float = 10.0
    # Longest silence between two streamed chunks (a model may think a while).
    read_timeout: float = 120.0

    def __repr__(self) -> str:  # never print the key
        return (
            f"ProviderConfig(kind={self.kind!r}, model={self.model!r}, "
            f"base_url={self.base_url!r}, api_key={'***' if self.api_key else ''!r})"
        )

    def timeout(self) -> httpx.Timeout:
        return httpx.Timeout(
            connect=self.connect_timeout, read=self.read_timeout, write=30.0, pool=10.0
        )


# ------------------------------------------------------------------------------ helpers

MAX_ERROR_DETAIL = 300
_SPACE_RE = re.compile(r"\s+")


def error_detail(body: bytes | str) -> str:
    """A short, single-line detail from an error body (the provider's own message)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    detail = ""
    try:
        data = json.loads(text)
    except ValueError:
        detail = text
    else:
        if isinstance(data, dict):
            error = data.get("error", data)
            if isinstance(error, dict):
                detail = str(error.get("message") or error.get("type") or "")
            elif isinstance(error, str):
                detail = error
            if not detail and isinstance(data.get("message"), str):
                detail = data["message"]
    detail = _SPACE_RE.sub(" ", detail).strip()
    return detail[:MAX_ERROR_DETAIL]


def http_error(status: int, body: bytes, *, provider: str) -> ProviderError:
    """Map an HTTP error status of a provider to a clear :class:`ProviderError`."""
    detail = error_detail(body)
    suffix = f": {detail}" if detail else "."
    if status in (401, 403):
        return ProviderError(
            "auth_failed",
            f"The {provider} provider refused the API key (HTTP {status}){suffix} "
            "An admin can set the key in the workspace settings.",
            status=status,
        )
    if status == 404:
        return ProviderError(
            "not_found",
            f"The {provider} provider does not know this model or endpoint (HTTP 404){suffix} "
            "Check the model name and base URL of the workspace.",
            status=status,
        )
    if status == 429:
        return ProviderError(
            "rate_limited",
            f"The {provider} provider is rate-limiting requests (HTTP 429){suffix} "
            "Try again in a moment.",
            status=status,
        )
    if status >= 500:
        return ProviderError(
            "provider_unavailable",
            f"The {provider} provider had a server error (HTTP {status}){suffix}",
            status=status,
        )
    return ProviderError(
        "bad_request",
        f"The {provider} provider rejected the request (HTTP {status}){suffix}",
        status=status,
    )


def transport_error(exc: Exception, *, provider: str, base_url: str) -> ProviderError:
    """Map an httpx transport failure (never includes headers, so never the key)."""
    if isinstance(exc, httpx.TimeoutException):
        return ProviderError(
            "timeout", f"The {provider} provider at {base_url} did not answer in time."
        )
    if isinstance(exc, httpx.ConnectError):
        return ProviderError(
            "unreachable",
            f"Could not reach the {provider} provider at {base_url} "
            "(connection refused or unknown host).",
        )
    if isinstance(exc, httpx.RemoteProtocolError):
        return ProviderError(
            "bad_response", f"The {provider} provider closed the connection mid-answer."
        )
    return ProviderError(
        "unreachable", f"The request to the {provider} provider failed: {type(exc).__name__}."
    )


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """Server-sent events of a streamed response as ``(event, data)`` pairs.

    Follows the SSE framing rules: ``data:`` lines of one event are joined by newlines,
    an empty line dispatches, comments (``:``) are ignored.
    """
    event = ""
    data: list[str] = []
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield event or "message", "\n".join(data)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
    if data:
        yield event or "message", "\n".join(data)


def parse_json_event(data: str, *, provider: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError:
        raise ProviderError(
            "bad_response",
            f"The {provider} provider sent a streamed chunk that is not JSON "
            f"({data[:60]!r}…). Is the base URL an {provider}-compatible API?",
        ) from None
    if not isinstance(value, dict):
        raise ProviderError("bad_response", f"The {provider} provider sent an unexpected chunk.")
    if "\\u" in data and unstorable(value):
        # A model may write U+0000 or half a surrogate pair as a JSON escape; no database
        # stores either, so they become U+FFFD like any server's text (mcp_bridge.uimeta).
        value, _ = json_safe(value)
    return value


def tool_result_text(result: ToolResult) -> str:
    return result.text if result.text else "(no content)"


# --------------------------------------------------------------------------- tool names

_TOOL_NAME_RE = re.compile(r"[^a-zA-Z0-9_-]")
MAX_TOOL_NAME = 64


def wire_tool_name(server_slug: str, tool_name: str) -> str:
    """``<server slug>__<tool name>`` reduced to ``[a-zA-Z0-9_-]{1,64}`` (no collision check)."""
    name = _TOOL_NAME_RE.sub("_", f"{server_slug}__{tool_name}")[:MAX_TOOL_NAME]
    return name or "tool"


def assign_tool_names(keys: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Unique wire names for ``(server slug, tool name)`` pairs, stable for a given set.

    Pairs are named in sorted order; a sanitized name already taken gets ``_2``, ``_3``…
    (cut to fit 64 characters), so two tools never share a name and the model's choice
    always maps back to exactly one tool.
    """
    names: dict[tuple[str, str], str] = {}
    taken: set[str] = set()
    for key in sorted(set(keys)):
        base = wire_tool_name(*key)
        name, counter = base, 1
        while name in taken:
            counter += 1
            suffix = f"_{counter}"
            name = base[: MAX_TOOL_NAME - len(suffix)] + suffix
        taken.add(name)
        names[key] = name
    return names
