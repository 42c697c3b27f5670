"""The sampling engine: a server's approved ``sampling/createMessage`` runs on the workspace's
model. The consent card, the request row and the handler live beside this module; they call
this once a person approved.

Signatures (keyword-only; ``thread`` a ``chat.Thread``, ``server`` the asking
``mcp_bridge.McpServer`` or ``None`` for an app view's request, ``params`` the request's
params as wire JSON, camelCase)::

    async def sampling_run(*, thread, server, params, actor_user_id=None,
                           request_ref=None, audit=True) -> dict
        # the CreateMessageResult wire JSON: {"role": "assistant", "content": <one block,
        # or a list of blocks when the model called tools>, "model": str,
        # "stopReason": "endTurn" | "maxTokens" | "stopSequence" | "toolUse" | "refusal"}

    async def sampling_run_counted(*, ...same...) -> SamplingOutcome
        # SamplingOutcome(result=<that dict>, input_tokens, output_tokens, provider, model,
        #                 max_tokens, latency_ms)

    async def sampling_unavailable(*, thread) -> SamplingFailed | None
        # why this workspace cannot sample at all (no model), to refuse before a consent card

The first two raise :class:`SamplingFailed` (``.code``, ``.message``: fit for the server's
JSON-RPC error and for the thread) when no model is configured (naming where an admin sets
one), the request is malformed, unsupported (audio) or over a cap, or the provider fails.

Each run is audited here (``audit=True``, the default), in its own transaction:
``SAMPLING_RAN`` (920) with the provider, model and token counts, or ``SAMPLING_FAILED``
(921) with the reason's code — the actor is the model, ``actor_user_id`` the person who
approved, ``request_ref`` the caller's row id (in ``extra``). The caller audits the consent
decision itself; it need not audit the tokens again.

What reaches the model, and what never does: :mod:`chat.providers.sampling_format`
(``_meta`` never; ``includeContext`` read as ``"none"``; ``modelPreferences`` advisory;
``maxTokens`` cut to ``HOST_MAX_TOKENS``). docs/mcp-client.md, "Sampling".
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.db import transaction

from audit.types import AuditEventType, Decision
from audit.writer import record
from chat.models import Thread
from chat.providers import config_for, provider_for
from chat.providers.base import ProviderConfig, ProviderError, ProviderEvent
from chat.providers.registry import DIRECT
from chat.providers.sampling_format import (
    SamplingFormatError,
    SamplingRequest,
    anthropic_body,
    openai_body,
    parse_params,
    result_from_events,
)

# A whole sampling run at most (each streamed chunk also has the provider's read timeout).
SAMPLING_TIMEOUT = 300.0
_BODIES = {"openai": openai_body, "anthropic": anthropic_body}


class SamplingFailed(Exception):
    """A sampling request that did not run; ``message`` is meant for the server and people."""

    def __init__(self, message: str, *, code: str = "sampling_failed") -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class SamplingOutcome:
    result: dict[str, Any]  # the CreateMessageResult wire JSON
    input_tokens: int
    output_tokens: int
    provider: str = ""
    model: str = ""
    max_tokens: int = 0  # the cap the model was given (after the host's maximum)
    latency_ms: float = 0.0


async def sampling_run(
    *,
    thread: Any,
    server: Any,
    params: dict[str, Any],
    actor_user_id: int | None = None,
    request_ref: str | int | None = None,
    audit: bool = True,
) -> dict[str, Any]:
    """Run the request on the workspace's model; the ``CreateMessageResult`` wire JSON."""
    outcome = await sampling_run_counted(
        thread=thread,
        server=server,
        params=params,
        actor_user_id=actor_user_id,
        request_ref=request_ref,
        audit=audit,
    )
    return outcome.result


async def sampling_run_counted(
    *,
    thread: Any,
    server: Any,
    params: dict[str, Any],
    actor_user_id: int | None = None,
    request_ref: str | int | None = None,
    audit: bool = True,
) -> SamplingOutcome:
    """Like :func:`sampling_run`, with the token counts the provider reported."""
    started = time.monotonic()
    thread_id = int(thread.pk)
    context = _Audit(
        thread_id=thread_id,
        server=server,
        actor_user_id=actor_user_id,
        request_ref=request_ref,
        enabled=audit,
    )
    config, workspace_id = await database_sync_to_async(_config_for_thread)(thread_id)
    context.workspace_id = workspace_id
    try:
        if config.kind == DIRECT or not config.model:
            raise SamplingFailed(no_model_message(workspace_id), code="no_model")
        build = _BODIES.get(config.kind)
        if build is None:
            raise SamplingFailed(
                f"The workspace's model provider ({config.kind[:40]}) cannot answer sampling "
                "requests.",
                code="unsupported_provider",
            )
        try:
            request = parse_params(params)
        except SamplingFormatError as exc:
            raise SamplingFailed(exc.message, code=exc.code) from None
        body = build(request, model=config.model)
        events = await _stream(config, body)
        try:
            answer = result_from_events(events, model=config.model, request=request)
        except SamplingFormatError as exc:
            raise SamplingFailed(exc.message, code=exc.code) from None
    except SamplingFailed as exc:
        await database_sync_to_async(context.failed)(exc, config=config, started=started)
        raise
    outcome = SamplingOutcome(
        result=answer.result,
        input_tokens=answer.input_tokens,
        output_tokens=answer.output_tokens,
        provider=config.kind,
        model=config.model,
        max_tokens=request.max_tokens,
        latency_ms=round((time.monotonic() - started) * 1000, 1),
    )
    await database_sync_to_async(context.ran)(outcome, request=request)
    return outcome


async def sampling_unavailable(*, thread: Any) -> SamplingFailed | None:
    """Why the thread's workspace cannot sample at all (no model, or a provider without
    sampling) — for a caller to refuse before asking anyone's consent; ``None`` when it can.
    Not audited (the caller's refusal is)."""
    config, workspace_id = await database_sync_to_async(_config_for_thread)(int(thread.pk))
    if config.kind == DIRECT or not config.model:
        return SamplingFailed(no_model_message(workspace_id), code="no_model")
    if config.kind not in _BODIES:
        return SamplingFailed(
            f"The workspace's model provider ({config.kind[:40]}) cannot answer sampling requests.",
            code="unsupported_provider",
        )
    return None


def no_model_message(workspace_id: int | None) -> str:
    """Why nothing answers, and where an admin sets a model (also the thread's note)."""
    where = f"/admin/chat/workspace/{workspace_id}/change/" if workspace_id else "/admin/"
    return (
        "This workspace has no model configured, so it cannot answer a server's sampling "
        "request. An admin sets the workspace's model provider and model in Atrium's admin "
        f"(Workspaces, {where}), or ATRIUM_PROVIDER and ATRIUM_MODEL for every workspace."
    )


def _config_for_thread(thread_id: int) -> tuple[ProviderConfig, int | None]:
    thread = Thread.objects.select_related("workspace").filter(pk=thread_id).first()
    if thread is None:
        raise SamplingFailed("The thread of this request no longer exists.", code="no_thread")
    return config_for(thread.workspace), thread.workspace_id


async def _stream(config: ProviderConfig, body: dict[str, Any]) -> list[ProviderEvent]:
    try:
        provider = provider_for(config)
    except ProviderError as exc:
        raise SamplingFailed(exc.message, code=exc.code) from None
    stream_body = getattr(provider, "stream_body", None)
    if stream_body is None:
        raise SamplingFailed(
            f"The workspace's model provider ({config.kind[:40]}) cannot answer sampling requests.",
            code="unsupported_provider",
        )
    events: list[ProviderEvent] = []
    try:
        async with asyncio.timeout(SAMPLING_TIMEOUT):
            async for event in stream_body(body):
                events.append(event)
    except ProviderError as exc:
        raise SamplingFailed(f"The model provider failed: {exc.message}", code=exc.code) from None
    except TimeoutError:
        raise SamplingFailed(
            f"The model did not finish within {int(SAMPLING_TIMEOUT)} seconds.", code="timeout"
        ) from None
    return events


@dataclass
class _Audit:
    thread_id: int
    server: Any
    actor_user_id: int | None
    request_ref: str | int | None
    enabled: bool
    workspace_id: int | None = None

    def _write(
        self,
        *,
        event_type: AuditEventType,
        decision: Decision,
        reason: str,
        extra: dict[str, Any],
    ) -> None:
        if not self.enabled:
            return
        with transaction.atomic():
            record(
                event_type=event_type,
                decision=decision,
                actor_kind="model",
                actor_user_id=self.actor_user_id,
                actor_label=getattr(self.server, "name", "") or "app view",
                workspace_id=self.workspace_id,
                thread_id=self.thread_id,
                server_id=getattr(self.server, "pk", None),
                action="sampling_create_message",
                reason=reason,
                extra={**extra, "request": self.request_ref},
            )

    def ran(self, outcome: SamplingOutcome, *, request: SamplingRequest) -> None:
        self._write(
            event_type=AuditEventType.SAMPLING_RAN,
            decision=Decision.ALLOWED,
            reason=str(outcome.result.get("stopReason") or "ok"),
            extra={
                "provider": outcome.provider,
                "model": outcome.model,
                "input_tokens": outcome.input_tokens,
                "output_tokens": outcome.output_tokens,
                "max_tokens": request.max_tokens,
                "requested_max_tokens": request.requested_max_tokens,
                "messages": len(request.messages),
                "images": request.images,
                "tools": [t.name for t in request.tools],
                "include_context_ignored": request.include_context_ignored,
                "latency_ms": outcome.latency_ms,
            },
        )

    def failed(self, exc: SamplingFailed, *, config: ProviderConfig, started: float) -> None:
        self._write(
            event_type=AuditEventType.SAMPLING_FAILED,
            decision=Decision.FAILED,
            reason=exc.code,
            extra={
                "provider": config.kind,
                "model": config.model,
                "message": exc.message[:300],
                "latency_ms": round((time.monotonic() - started) * 1000, 1),
            },
        )


__all__ = [
    "SAMPLING_TIMEOUT",
    "SamplingFailed",
    "SamplingOutcome",
    "no_model_message",
    "sampling_run",
    "sampling_unavailable",
    "sampling_run_counted",
]
