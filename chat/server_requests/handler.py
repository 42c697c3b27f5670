"""The per-call handler of a server's requests, and a call that answers them.

``chat.calls.run`` runs a tool with ``call_tool_answering``: the gateway gets the call's
handler (``server_request_handler_for``), which turns an ``elicitation/create`` or
``sampling/createMessage`` into a card for the person the call runs for and waits for the
answer; a call refused with ``URLElicitationRequired`` (-32042) shows its web pages and is
retried once after they are finished. Whatever is still pending when the call ends expires.
"""

from __future__ import annotations

import secrets
from typing import Any

from channels.db import database_sync_to_async

from audit.types import AuditEventType, Decision
from audit.writer import record
from bindings import ratelimit
from chat.media.tool_files import arguments_for_server
from chat.models import ToolCall
from chat.services.turns import thread_note_model_missing
from mcp_bridge import gateway
from mcp_bridge.errors import UrlElicitationRequired
from mcp_bridge.models import McpServer, Tool
from mcp_bridge.server_requests import USER_REJECTED, InboundRequest, InboundRequestRefused

from . import waiting
from .models import ServerRequestKind, ServerRequestStatus
from .sampling import SamplingFailed, sampling_run, sampling_unavailable
from .services import (
    Opened,
    ServerRequestRefused,
    request_state,
    server_request_expire,
    server_request_fail,
    server_request_open,
)

SAMPLING_BUCKET = "server_sampling"
ratelimit.limits_declare({SAMPLING_BUCKET: (5, 0.1)})  # per server per thread
URL_RETRY_WAIT = 600.0  # seconds a -32042 call waits for its pages to be finished
MAX_URL_ELICITATIONS = 3

_open = database_sync_to_async(lambda **kw: server_request_open(**kw))
_expire = database_sync_to_async(lambda **kw: server_request_expire(**kw))
_fail = database_sync_to_async(lambda **kw: server_request_fail(**kw))
_state = database_sync_to_async(lambda **kw: request_state(**kw))


def _record_rate_limited(*, call: ToolCall) -> None:
    _record_sampling_refused(call=call, reason="rate_limited")


def _record_sampling_refused(*, call: ToolCall, reason: str) -> None:
    record(
        event_type=AuditEventType.SERVER_REQUEST_REFUSED,
        decision=Decision.DENIED,
        workspace_id=call.thread.workspace_id,
        thread_id=call.thread_id,
        server_id=call.server_id,
        tool_name=call.tool_name,
        action=ServerRequestKind.SAMPLING,
        reason=reason,
        extra={"toolCall": call.pk},
    )


def _refuse_without_model(*, call: ToolCall) -> None:
    """No model to sample with: audited, and the thread is told once where to set one."""
    _record_sampling_refused(call=call, reason="no_model")
    thread_note_model_missing(thread_id=call.thread_id, actor_user_id=call.requested_by_id)


class CallServerRequests:
    """The ``InboundRequestHandler`` of one call (``mcp_bridge.server_requests``)."""

    def __init__(self, call: ToolCall) -> None:
        self.call = call
        self.timeout = float(call.server.call_timeout)
        self.opened: list[int] = []

    async def __call__(self, request: InboundRequest) -> dict[str, Any]:
        if request.kind == "sampling":
            return await self._sampling(request)
        params = request.params
        url_mode = params.get("mode") == "url" or (
            "mode" not in params and "url" in params and "requestedSchema" not in params
        )
        kind = ServerRequestKind.ELICITATION_URL if url_mode else ServerRequestKind.ELICITATION_FORM
        opened, key = await self._open(kind, params)
        message = await self._wait(opened, key, self.timeout)
        if message is None:
            return {"action": "cancel"}
        return dict(message["result"])

    async def _open(
        self, kind: str, params: dict[str, Any], *, retries_call: bool = False, wait: float = 0
    ) -> tuple[Opened, str]:
        key = secrets.token_urlsafe(16)
        waiting.reserve(key)
        try:
            opened = await _open(
                call_id=self.call.pk,
                kind=kind,
                params=params,
                key=key,
                expires_in=wait or self.timeout,
                retries_call=retries_call,
            )
        except ServerRequestRefused as exc:
            waiting.release(key)
            raise InboundRequestRefused(exc.message) from None
        self.opened.append(opened.row.pk)
        return opened, key

    async def _wait(
        self, opened: Opened, key: str, timeout: float, *, until_completed: bool = False
    ) -> dict[str, Any] | None:
        row_id = opened.row.pk

        def until(message: dict[str, Any]) -> bool:
            if not until_completed:
                return True
            return bool(message.get("completed")) or message["status"] != "accepted"

        try:
            message = await waiting.wait_answer(
                key=key,
                timeout=timeout,
                read_state=lambda: _state(request_id=row_id),
                until=until,
            )
        finally:
            waiting.release(key)
        if message is None:
            await _expire(request_id=row_id, reason="expired")
        return message

    async def _sampling(self, request: InboundRequest) -> dict[str, Any]:
        call = self.call
        verdict = await ratelimit.take_async(SAMPLING_BUCKET, f"{call.thread_id}:{call.server_id}")
        if not verdict.allowed:
            if verdict.audit:
                await database_sync_to_async(_record_rate_limited)(call=call)
            raise InboundRequestRefused("Too many sampling requests in this thread; try later.")
        unavailable = await sampling_unavailable(thread=call.thread)
        if unavailable is not None:
            # Nobody is asked to consent to something that cannot run.
            await database_sync_to_async(_refuse_without_model)(call=call)
            raise InboundRequestRefused(unavailable.message)
        opened, key = await self._open(ServerRequestKind.SAMPLING, request.params)
        if opened.allowance_id is None:
            message = await self._wait(opened, key, self.timeout)
            if message is None or message["status"] != ServerRequestStatus.ACCEPTED:
                raise InboundRequestRefused(
                    "The user rejected the sampling request.", code=USER_REJECTED
                )
        else:
            waiting.release(key)
        try:
            return dict(
                await sampling_run(
                    thread=call.thread,
                    server=call.server,
                    params=opened.row.params,
                    actor_user_id=call.requested_by_id,
                    request_ref=opened.row.pk,
                )
            )
        except SamplingFailed as exc:
            await _fail(request_id=opened.row.pk, reason=str(exc))
            raise InboundRequestRefused(str(exc)) from None

    async def finish_url_elicitations(self, error: UrlElicitationRequired) -> bool:
        """Show the pages a -32042 error names; True once every one is finished."""
        wanted = [e for e in error.details.get("elicitations") or [] if isinstance(e, dict)]
        if not wanted:
            return False
        pending = []
        for params in wanted[:MAX_URL_ELICITATIONS]:
            pending.append(
                await self._open(
                    ServerRequestKind.ELICITATION_URL,
                    {**params, "mode": "url"},
                    retries_call=True,
                    wait=max(URL_RETRY_WAIT, self.timeout),
                )
            )
        for opened, key in pending:
            message = await self._wait(
                opened, key, max(URL_RETRY_WAIT, self.timeout), until_completed=True
            )
            if message is None or not message.get("completed"):
                return False
        return True

    async def close(self) -> None:
        """The call ended: what is still pending expires."""
        for row_id in self.opened:
            await _expire(request_id=row_id, reason="call_ended")


def server_request_handler_for(call: ToolCall) -> CallServerRequests:
    """The handler ``gateway.call_tool(on_server_request=...)`` gets for ``call`` (its
    ``server`` and ``thread`` loaded)."""
    return CallServerRequests(call)


async def call_tool_answering(
    call: ToolCall, server: McpServer, tool: Tool, *, progress: Any = None
) -> tuple[dict[str, Any], float]:
    """``gateway.call_tool`` for ``call``, answering its server's requests; a call refused
    with ``URLElicitationRequired`` runs once more after its pages are finished."""
    handler = server_request_handler_for(call)
    # A person's files go as a link minted now, or embedded (chat.media.tool_files).
    arguments = await arguments_for_server(call, tool.input_schema)
    try:
        try:
            return await gateway.call_tool(
                server,
                tool,
                arguments,
                progress=progress,
                on_behalf_of=call.requested_by_id,  # whose sign-in an OAuth server sees
                on_server_request=handler,
            )
        except UrlElicitationRequired as exc:
            if not await handler.finish_url_elicitations(exc):
                raise
        return await gateway.call_tool(
            server,
            tool,
            arguments,
            progress=progress,
            on_behalf_of=call.requested_by_id,
            on_server_request=handler,
        )
    finally:
        await handler.close()
