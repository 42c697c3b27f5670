"""What went wrong on an MCP connection, in the terms of ``mcp_bridge.errors``.

Pure functions, no Django and no I/O: the connection layer (``mcp_bridge.connections``,
``mcp_bridge.connection_pool``) catches SDK and transport exceptions and asks here which
``BridgeError`` a caller sees, and what a server's health says.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx2
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INVALID_PARAMS,
    INVALID_REQUEST,
    REQUEST_TIMEOUT,
    URL_ELICITATION_REQUIRED,
)

from mcp_bridge.errors import (
    BridgeError,
    InvalidArguments,
    InvalidResource,
    ResourceNotFound,
    ServerCrashed,
    ServerUnavailable,
    ToolNotFound,
    ToolReturnedError,
    ToolTimeout,
    UrlElicitationRequired,
)
from mcp_bridge.server_spec import ServerSpec

_RESOURCE_NOT_FOUND = -32002  # the spec's resources/read error code
_SESSION_LOST_MESSAGES = ("session not found", "session terminated")
_UNKNOWN_TOOL = re.compile(r"unknown tool|tool\b.*\bnot found", re.IGNORECASE)


@dataclass(frozen=True)
class Request:
    """What a request is about, for retry decisions and error messages."""

    method: str  # "tools/call", "tools/list", "resources/list", "resources/read", "ping", "connect"
    target: str | None = None  # the tool name or resource URI
    idempotent: bool = True

    def __str__(self) -> str:
        return f"{self.method} '{self.target}'" if self.target else self.method


# ---- why a connection ended ------------------------------------------------------------


def first_cause(exc: BaseException) -> BaseException:
    """The most telling leaf of an exception group (transport errors over cancellations)."""
    leaves = list(_leaf_exceptions(exc))
    for leaf in leaves:
        if not isinstance(leaf, asyncio.CancelledError):
            return leaf
    return leaves[0] if leaves else exc


def never_reached_server(exc: BaseException | None) -> bool:
    """Whether the connection ended because the server could not be reached at all."""
    if exc is None:
        return False
    return any(
        isinstance(leaf, httpx2.ConnectError | httpx2.ConnectTimeout | ConnectionRefusedError)
        for leaf in _leaf_exceptions(exc)
    )


def connect_failure_message(
    spec: ServerSpec, failure: BaseException | None, *, stderr_tail: str
) -> str:
    """Why a connection could not be opened, for the person and the server's health."""
    suffix = f" (stderr: {stderr_tail})" if stderr_tail else ""
    if failure is None:
        return f"Server {spec.label!r} closed the connection during startup{suffix}"
    cause = first_cause(failure)
    # TimeoutError is an OSError: test it first.
    if isinstance(cause, TimeoutError):
        return f"Server {spec.label!r} did not answer within {spec.connect_timeout:g} s{suffix}"
    if (
        spec.transport == "stdio"
        and isinstance(cause, OSError)
        and not isinstance(cause, ConnectionError)
    ):
        reason = cause.strerror or str(cause)
        return f"Could not start {spec.command!r}: {reason}"
    if isinstance(cause, MCPError):
        if cause.code == CONNECTION_CLOSED:
            return f"Server {spec.label!r} exited during startup{suffix}"
        return f"Server {spec.label!r} refused the handshake: {cause.message}{suffix}"
    if isinstance(cause, httpx2.HTTPStatusError):
        return f"Could not connect to {spec.url}: HTTP {cause.response.status_code}"
    if isinstance(cause, httpx2.HTTPError | OSError):
        return f"Could not connect to {spec.url}: {cause or type(cause).__name__}"
    return f"Could not connect to {spec.label!r}: {cause!r}{suffix}"


def lost_connection_message(spec: ServerSpec, failure: BaseException) -> str:
    """An open connection died: the health line."""
    cause = first_cause(failure)
    return f"Connection to {spec.label!r} lost: {cause or type(cause).__name__}"


# ---- the error a request raises --------------------------------------------------------


def lost_connection_error(
    spec: ServerSpec,
    request: Request,
    failure: BaseException | None,
    *,
    closed_by_us: bool,
    stderr_tail: str,
    detail: str | None = None,
) -> BridgeError:
    """The error for a request whose connection ended before it was answered."""
    tool = request.target if request.method == "tools/call" else None
    if closed_by_us:
        return ServerUnavailable(spec.label, reason=f"the connection was closed during {request}")
    if failure is not None and never_reached_server(failure):
        reason = f"Could not reach {spec.url}: {first_cause(failure)}"
        return ServerUnavailable(spec.label, reason=reason, user_message=reason)
    if spec.transport == "stdio":
        tail = f" (stderr: {stderr_tail})" if stderr_tail else ""
        return ServerCrashed(
            spec.label, tool=tool, reason=f"the process exited during {request}{tail}"
        )
    why = first_cause(failure) if failure is not None else detail
    cause = f": {why}" if why else ""
    return ServerCrashed(
        spec.label, tool=tool, reason=f"the connection dropped during {request}{cause}"
    )


def protocol_error(
    spec: ServerSpec, request: Request, exc: MCPError, timeout: float
) -> BridgeError:
    """Map an MCP error answer (or the SDK's request timeout) onto the taxonomy.

    A ``ServerUnavailable`` (a listing or read timed out) also belongs in the server's health.
    """
    message = exc.message
    if request.method == "tools/call":
        tool = request.target
        if exc.code == REQUEST_TIMEOUT:
            return ToolTimeout(tool, timeout_seconds=timeout, server=spec.label)
        if _UNKNOWN_TOOL.search(message):
            return ToolNotFound(tool, server=spec.label)
        if exc.code == INVALID_PARAMS:
            return InvalidArguments([message], tool=tool)
        if exc.code == URL_ELICITATION_REQUIRED and isinstance(exc.data, dict):
            return UrlElicitationRequired(tool, elicitations=exc.data.get("elicitations"))
        return ToolReturnedError(tool, detail=message)
    if exc.code == REQUEST_TIMEOUT:
        reason = f"no answer to {request} within {timeout:g} s"
        return ServerUnavailable(spec.label, reason=reason)
    if request.method == "resources/read" and (
        exc.code == _RESOURCE_NOT_FOUND or _mentions_not_found(message)
    ):
        return ResourceNotFound(request.target, server=spec.label)
    return BridgeError(
        f"The tool server '{spec.label}' could not handle {request}: {message}",
        details={"server": spec.label, "method": request.method, "mcpCode": exc.code},
    )


def malformed_result_error(spec: ServerSpec, request: Request, exc: Exception) -> BridgeError:
    reason = f"malformed answer to {request}: {_short(exc)}"
    if request.method == "resources/read":
        return InvalidResource(request.target, reason=reason)
    if request.method == "tools/call":
        return ToolReturnedError(request.target, detail=reason)
    return BridgeError(
        f"The tool server '{spec.label}' sent a {reason}",
        details={"server": spec.label, "method": request.method},
    )


def is_session_lost(exc: MCPError) -> bool:
    """A restarted HTTP server forgot our session (and did not run the request)."""
    return exc.code == INVALID_REQUEST and exc.message.strip().lower() in _SESSION_LOST_MESSAGES


def reports_unknown_tool(wire: dict[str, Any], name: str) -> bool:
    """Some SDKs answer an unknown tool with an ``isError`` result instead of an error.

    Only the exact phrasings of the Python and TypeScript SDKs count, so a tool's own error
    text that happens to say "not found" is returned as the result it is.
    """
    if not wire.get("isError"):
        return False
    content = wire.get("content") or []
    if len(content) != 1 or content[0].get("type") != "text":
        return False
    text = str(content[0].get("text", "")).strip()
    text = re.sub(r"^MCP error -?\d+:\s*", "", text)
    return text in (f"Unknown tool: {name}", f"Tool {name} not found")


def error_text(error: BridgeError) -> str:
    """A one-line description for ``health.last_error``: the message plus the reason."""
    reason = error.details.get("reason")
    if reason and str(reason) not in error.user_message:
        return f"{error.user_message} ({reason})"
    return error.user_message


def _leaf_exceptions(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaf_exceptions(inner)
    else:
        yield exc


def _mentions_not_found(message: str) -> bool:
    lowered = message.lower()
    return "not found" in lowered or "unknown resource" in lowered or "no resource" in lowered


def _short(exc: Exception, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
