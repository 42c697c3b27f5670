"""Error taxonomy of the MCP bridge (pure, no Django).

Every failure the bridge reports to people or to a tool UI is a ``BridgeError`` with a
stable machine ``code``, a ``user_message`` written for a person, JSON ``details`` and a
JSON-RPC error code for answering a view's request. ``str(error)`` is the user message.
"""

from __future__ import annotations

from typing import Any, ClassVar

# JSON-RPC / MCP error codes used when a bridge error answers a view's request.
JSONRPC_INVALID_PARAMS = -32602
JSONRPC_SERVER_ERROR = -32000
MCP_REQUEST_TIMEOUT = -32001
MCP_RESOURCE_NOT_FOUND = -32002
MAX_PROBLEMS = 20


def _the(noun: str, name: str | None) -> str:
    """``The tool 'search'`` or, without a name, ``The tool``."""
    return f"The {noun} '{name}'" if name else f"The {noun}"


class BridgeError(Exception):
    """Base class. Subclasses set ``code``; constructors build a clear message."""

    code: ClassVar[str] = "bridge_error"
    jsonrpc_code: ClassVar[int] = JSONRPC_SERVER_ERROR
    retryable: ClassVar[bool] = False
    default_message: ClassVar[str] = "The tool server could not handle the request."

    def __init__(self, user_message: str | None = None, *, details: dict[str, Any] | None = None):
        self.user_message = user_message or self.default_message
        self.details: dict[str, Any] = {
            key: value for key, value in (details or {}).items() if value is not None
        }
        super().__init__(self.user_message)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.user_message, "details": dict(self.details)}

    def to_jsonrpc_error(self) -> dict[str, Any]:
        """The ``error`` member of a JSON-RPC response for a view."""
        return {"code": self.jsonrpc_code, "message": self.user_message, "data": self.to_dict()}

    def __reduce__(self) -> tuple[Any, ...]:
        # Subclass constructors take domain arguments, not the message: rebuild from state
        # so pickling (multiprocessing, task queues) round-trips exactly.
        return (_restore_error, (type(self), self.user_message), self.__dict__.copy())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.user_message!r})"


def _restore_error(cls: type[BridgeError], message: str) -> BridgeError:
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    return error


class ServerUnavailable(BridgeError):
    code = "server_unavailable"
    retryable = True
    default_message = "The tool server is not running or cannot be reached."

    def __init__(
        self,
        server: str | None = None,
        *,
        reason: str | None = None,
        user_message: str | None = None,
    ) -> None:
        message = (
            user_message or f"{_the('tool server', server)} is not running or cannot be reached."
        )
        super().__init__(message, details={"server": server, "reason": reason})


class ServerDisabled(BridgeError):
    code = "server_disabled"
    default_message = "The tool server is disabled by an administrator."

    def __init__(self, server: str | None = None, *, user_message: str | None = None) -> None:
        message = user_message or f"{_the('tool server', server)} is disabled by an administrator."
        super().__init__(message, details={"server": server})


class ToolNotFound(BridgeError):
    code = "tool_not_found"
    jsonrpc_code = JSONRPC_INVALID_PARAMS
    default_message = "The requested tool does not exist on this server."

    def __init__(
        self,
        tool: str | None = None,
        *,
        server: str | None = None,
        user_message: str | None = None,
    ) -> None:
        where = f" on server '{server}'" if server else ""
        message = user_message or f"{_the('tool', tool)} does not exist{where}."
        super().__init__(message, details={"tool": tool, "server": server})


class InvalidArguments(BridgeError):
    code = "invalid_arguments"
    jsonrpc_code = JSONRPC_INVALID_PARAMS
    default_message = "The tool arguments are not valid."

    def __init__(
        self,
        problems: list[str] | None = None,
        *,
        tool: str | None = None,
        user_message: str | None = None,
    ) -> None:
        self.problems: list[str] = [str(p) for p in (problems or [])][:MAX_PROBLEMS]
        if user_message is None:
            subject = f"The arguments for the tool '{tool}'" if tool else "The tool arguments"
            if self.problems:
                user_message = f"{subject} are not valid: " + "; ".join(self.problems[:3])
                if len(self.problems) > 3:
                    user_message += f" (and {len(self.problems) - 3} more)"
            else:
                user_message = f"{subject} are not valid."
        super().__init__(user_message, details={"tool": tool, "problems": self.problems})


class ToolTimeout(BridgeError):
    code = "tool_timeout"
    jsonrpc_code = MCP_REQUEST_TIMEOUT
    retryable = True
    default_message = "The tool did not answer in time."

    def __init__(
        self,
        tool: str | None = None,
        *,
        timeout_seconds: float | None = None,
        server: str | None = None,
        user_message: str | None = None,
    ) -> None:
        within = f" within {timeout_seconds:g} seconds" if timeout_seconds else " in time"
        message = user_message or f"{_the('tool', tool)} did not answer{within}."
        super().__init__(
            message,
            details={"tool": tool, "server": server, "timeoutSeconds": timeout_seconds},
        )


class ServerCrashed(BridgeError):
    code = "server_crashed"
    retryable = True
    default_message = "The tool server stopped while handling the request."

    def __init__(
        self,
        server: str | None = None,
        *,
        tool: str | None = None,
        reason: str | None = None,
        user_message: str | None = None,
    ) -> None:
        message = user_message or (
            f"{_the('tool server', server)} stopped while handling the request; "
            "it will be restarted."
        )
        super().__init__(message, details={"server": server, "tool": tool, "reason": reason})


class ToolReturnedError(BridgeError):
    code = "tool_returned_error"
    default_message = "The tool reported an error."

    def __init__(
        self,
        tool: str | None = None,
        *,
        detail: str | None = None,
        user_message: str | None = None,
    ) -> None:
        if user_message is None:
            suffix = f": {detail[:500]}" if detail else "."
            message = f"{_the('tool', tool)} reported an error{suffix}"
        else:
            message = user_message
        super().__init__(message, details={"tool": tool, "detail": detail})


class UrlElicitationRequired(BridgeError):
    """The server answered a call with ``URLElicitationRequired`` (-32042): the person must
    finish something on a web page (``details["elicitations"]``: the URL requests) first."""

    code = "url_elicitation_required"
    jsonrpc_code = -32042
    default_message = "The tool server needs you to finish something on a web page first."

    def __init__(self, tool: str | None = None, *, elicitations: list[Any] | None = None) -> None:
        super().__init__(details={"tool": tool, "elicitations": list(elicitations or [])[:10]})


class TaskUnsupported(BridgeError):
    """A call as a task on a server that does not declare ``tasks.requests.tools.call``."""

    code = "task_unsupported"

    def __init__(self, tool: str, *, server: str) -> None:
        super().__init__(
            f"The tool '{tool}' runs only as a task, and the server '{server}' does not "
            "declare task support.",
            details={"tool": tool, "server": server},
        )


class TaskNotFound(BridgeError):
    """The server no longer knows a task (its ttl passed, or the server restarted)."""

    code = "task_not_found"

    def __init__(self, task_id: str, *, server: str, detail: str | None = None) -> None:
        super().__init__(
            f"The tool server '{server}' no longer has this task (it expired or the server "
            "restarted); its result is lost.",
            details={"taskId": task_id, "server": server, "detail": (detail or "")[:300]},
        )


class ResourceNotFound(BridgeError):
    code = "resource_not_found"
    jsonrpc_code = MCP_RESOURCE_NOT_FOUND
    default_message = "The requested resource does not exist on this server."

    def __init__(
        self,
        uri: str | None = None,
        *,
        server: str | None = None,
        user_message: str | None = None,
    ) -> None:
        message = user_message or f"{_the('resource', uri)} was not found."
        super().__init__(message, details={"uri": uri, "server": server})


class InvalidResource(BridgeError):
    code = "invalid_resource"
    default_message = "The server sent a resource that cannot be shown."

    def __init__(
        self,
        uri: str | None = None,
        *,
        reason: str | None = None,
        user_message: str | None = None,
    ) -> None:
        suffix = f": {reason}" if reason else "."
        message = user_message or f"{_the('resource', uri)} cannot be shown{suffix}"
        super().__init__(message, details={"uri": uri, "reason": reason})


class Cancelled(BridgeError):
    code = "cancelled"
    default_message = "The request was cancelled."

    def __init__(self, *, reason: str | None = None, user_message: str | None = None) -> None:
        message = user_message or (
            f"The request was cancelled: {reason}" if reason else self.default_message
        )
        super().__init__(message, details={"reason": reason})


class AuthorizationRequired(BridgeError):
    """The server needs a sign-in (OAuth) that the person, or the admin, has not given."""

    code = "authorization_required"
    default_message = "The tool server needs you to connect your account first."

    def __init__(
        self,
        server: str | None = None,
        *,
        slug: str | None = None,
        shared: bool = False,
        reason: str | None = None,
    ) -> None:
        name = server or "the server"
        if reason == "insufficient_scope":  # a step-up: the grant stays, more is asked
            who = "an administrator has to" if shared else "the person this call runs for can"
            message = (
                f"{_the('tool server', server)} needs more access for this than was granted: "
                f"{who} connect {name} again to grant it, then run it again."
            )
        elif shared:
            message = (
                f"{_the('tool server', server)} needs a sign-in: an administrator has to "
                f"connect {name} for everyone first."
            )
        else:
            message = (
                f"{_the('tool server', server)} needs a sign-in: the person this call runs "
                f"for has not connected their {name} account. They can use the Connect "
                "button shown in the chat, then run it again."
            )
        super().__init__(
            message,
            details={"server": server, "slug": slug, "shared": shared, "reason": reason},
        )


ERROR_CLASSES: dict[str, type[BridgeError]] = {
    cls.code: cls
    for cls in (
        BridgeError,
        ServerUnavailable,
        ServerDisabled,
        ToolNotFound,
        InvalidArguments,
        ToolTimeout,
        ServerCrashed,
        ToolReturnedError,
        UrlElicitationRequired,
        TaskUnsupported,
        TaskNotFound,
        ResourceNotFound,
        InvalidResource,
        Cancelled,
        AuthorizationRequired,
    )
}
