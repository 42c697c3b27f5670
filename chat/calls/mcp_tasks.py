"""Tool calls that run as MCP tasks (MCP 2025-11-25 "tasks"; docs/mcp-client.md).

A tool whose catalogue entry says ``execution.taskSupport: "required"`` is not called by the
web process: ``chat.calls.run.tool_call_run`` hands it over (``tool_call_task_submit``), and a
Celery worker drives it (``chat.calls.task_jobs``): ``tools/call`` with ``params.task``, then
``tasks/get`` at the server's ``pollInterval`` (bounded), then ``tasks/result``, ending the
call through the same finish path as any call (``chat.calls.finish``: one canonical result,
its events and audit). Nothing of it lives in the web process, so the call's status
survives reloads and web-process restarts.

``optional`` tools run as ordinary calls: Atrium cannot know beforehand that a call will be
long, and a task costs at least one poll interval on a quick call.

The poller says it is alive on every check (``task_polled_at``); the beat sweep re-queues a
task whose poller went quiet (``tool_call_tasks_stalled``). A cancelled call (the card's
Cancel, from any process) is seen at the next check and ``tasks/cancel`` goes to the server.
``input_required``: the call shows it waits for input, and ``tasks/result`` is opened so the
server can deliver its question, which becomes the elicitation card of ``chat.server_requests``
(``server_request_handler``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta
from typing import Any

from channels.db import database_sync_to_async
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from audit.types import AuditEventType, Decision
from audit.writer import record
from chat.calls.cancel import tool_call_cancel
from chat.calls.emit import call_emit
from chat.calls.finish import tool_call_fail, tool_call_finish
from chat.media.tool_files import arguments_for_server
from chat.models import ToolCall, ToolCallStatus
from chat.server_requests.handler import CallServerRequests, server_request_handler_for
from mcp_bridge import gateway
from mcp_bridge.errors import BridgeError, TaskNotFound, TaskUnsupported
from mcp_bridge.models import Tool

log = logging.getLogger(__name__)

SUBMITTED = "submitted"  # handed to the worker; the server has not answered yet
TERMINAL = frozenset({"completed", "failed", "cancelled"})

POLL_MIN_SECONDS = 0.5  # however eager the server's pollInterval
POLL_MAX_SECONDS = 10.0  # however lazy
POLL_DEFAULT_SECONDS = 2.0  # the server suggested none
CHECK_EVERY_SECONDS = 1.0  # cancel checks and the poller's sign of life
POLLER_TTL = timedelta(seconds=30)  # a poller silent this long is presumed dead
ASKED_TTL_MS = 6 * 60 * 60 * 1000  # the retention asked of the server (it decides)
RESULT_TIMEOUT_SECONDS = 6 * 60 * 60.0  # tasks/result is held open until the task ends


def runs_as_task(mode: str) -> bool:
    """Whether a tool with this ``execution.taskSupport`` runs as a task (see the module)."""
    return mode == "required"


async def tool_runs_as_task(server: Any, tool: Tool) -> bool:
    """The web process's question before a call: is it the worker's?"""
    _declared, mode = await gateway.tool_task_support(server, tool)
    return runs_as_task(mode)


def poll_seconds(poll_interval_ms: int | None) -> float:
    if poll_interval_ms is None:
        return POLL_DEFAULT_SECONDS
    return min(POLL_MAX_SECONDS, max(POLL_MIN_SECONDS, poll_interval_ms / 1000))


def _audit_scope(call: ToolCall) -> dict[str, Any]:
    return {
        "actor_kind": call.origin,
        "actor_user_id": call.requested_by_id,
        "workspace_id": call.thread.workspace_id,
        "thread_id": call.thread_id,
        "binding_id": call.binding_id,
        "server_id": call.server_id,
        "tool_name": call.tool_name,
    }


def _locked(call_id: int) -> ToolCall:
    return ToolCall.objects.select_related("thread").select_for_update(of=("self",)).get(pk=call_id)


# ---- state changes (each audited where it says so, emitted on commit) ------------------


def tool_call_task_submit(*, call_id: int) -> bool:
    """Hand a running call to the worker as a task; every member sees it as submitted.
    The job is queued on commit by the caller (``chat.calls.task_jobs.task_submit``)."""
    with transaction.atomic():
        changed = ToolCall.objects.filter(
            pk=call_id, status=ToolCallStatus.RUNNING, task_status=""
        ).update(task_status=SUBMITTED, task_status_message="", task_polled_at=None, runner="")
        if changed:
            call_emit(ToolCall(pk=call_id), reread=True)
    return bool(changed)


def tool_call_task_claim(*, call_id: int, poller: str) -> bool:
    """Take (or keep) the polling of a task call: only one live poller at a time."""
    now = timezone.now()
    return bool(
        ToolCall.objects.filter(pk=call_id, status=ToolCallStatus.RUNNING)
        .exclude(task_status="")
        .filter(
            Q(runner=poller)
            | Q(task_polled_at__isnull=True)
            | Q(task_polled_at__lt=now - POLLER_TTL)
        )
        .update(runner=poller, task_polled_at=now)
    )


def tool_call_task_alive(*, call_id: int, poller: str) -> str | None:
    """The poller's sign of life; returns the call's status (None: the call is gone or
    another poller took it)."""
    if not ToolCall.objects.filter(pk=call_id, runner=poller).update(task_polled_at=timezone.now()):
        return None
    return ToolCall.objects.filter(pk=call_id).values_list("status", flat=True).first()


def tool_call_task_record(*, call_id: int, task: dict[str, Any], created: bool = False) -> bool:
    """Store what the server said of the task. Audited when it was created and when its
    status changes (never per poll); emitted when status or message changed. Returns
    whether anything changed."""
    status = str(task.get("status") or "")[:20]
    message = str(task.get("statusMessage") or "")[:500]
    with transaction.atomic():
        call = _locked(call_id)
        was = call.task_status
        fields: dict[str, Any] = {}
        if created:
            fields["task_id"] = str(task.get("taskId") or "")[:255]
        if status and status != was:
            fields["task_status"] = status
        if message != call.task_status_message:
            fields["task_status_message"] = message
        poll = task.get("pollInterval")
        if isinstance(poll, int) and poll >= 0 and poll != call.task_poll_interval_ms:
            fields["task_poll_interval_ms"] = poll
        ttl = task.get("ttl")
        if isinstance(ttl, int) and ttl >= 0 and ttl != call.task_ttl_ms:
            fields["task_ttl_ms"] = ttl
        if not fields:
            return False
        for name, value in fields.items():
            setattr(call, name, value)
        call.save(update_fields=list(fields))
        if created or "task_status" in fields:
            record(
                event_type=AuditEventType.TASK_CREATED
                if created
                else AuditEventType.TASK_STATUS_CHANGED,
                decision=Decision.ALLOWED,
                **_audit_scope(call),
                action="tool_task",
                reason=status or "unknown",
                extra={
                    "tool_call_id": call.pk,
                    "task_id": call.task_id,
                    "was": was,
                    "status": status,
                    "ttl_ms": call.task_ttl_ms,
                    "poll_interval_ms": call.task_poll_interval_ms,
                },
            )
        call_emit(call, reread=True)
    return True


def tool_call_task_cancel_sent(
    *, call_id: int, task: dict[str, Any] | None, error: str | None = None
) -> None:
    """``tasks/cancel`` went to the server for a cancelled call (audited with its answer)."""
    with transaction.atomic():
        call = _locked(call_id)
        record(
            event_type=AuditEventType.TASK_CANCEL_SENT,
            decision=Decision.ALLOWED if error is None else Decision.FAILED,
            **_audit_scope(call),
            action="tool_task",
            reason="cancel_sent" if error is None else "cancel_failed",
            extra={
                "tool_call_id": call.pk,
                "task_id": call.task_id,
                "server_status": (task or {}).get("status"),
                "error": (error or "")[:300] or None,
            },
        )
        fields = {"runner": ""}
        if task and task.get("status"):
            fields["task_status"] = str(task["status"])[:20]
            fields["task_status_message"] = str(task.get("statusMessage") or "")[:500]
        for name, value in fields.items():
            setattr(call, name, value)
        call.save(update_fields=list(fields))
        call_emit(call, reread=True)


def tool_call_task_expire(*, call_id: int, error: BridgeError) -> ToolCall:
    """The server no longer has the task (its ttl passed, or it restarted): the call fails
    with that reason, audited as an expired task and as a failed call."""
    with transaction.atomic():
        call = _locked(call_id)
        if call.status != ToolCallStatus.RUNNING:
            return call
        record(
            event_type=AuditEventType.TASK_EXPIRED,
            decision=Decision.FAILED,
            **_audit_scope(call),
            action="tool_task",
            reason=error.code,
            extra={"tool_call_id": call.pk, "task_id": call.task_id, "was": call.task_status},
        )
        ToolCall.objects.filter(pk=call_id).update(task_status="expired")
        return tool_call_fail(call_id=call_id, error={**error.to_dict(), "code": "task_expired"})


def tool_call_task_refuse(*, call_id: int, error: BridgeError) -> ToolCall:
    """A task-only tool on a server that declares no tasks: refused, audited, failed."""
    with transaction.atomic():
        call = _locked(call_id)
        record(
            event_type=AuditEventType.TASK_REFUSED,
            decision=Decision.DENIED,
            **_audit_scope(call),
            action="tool_task",
            reason=error.code,
            extra={"tool_call_id": call.pk},
        )
        return tool_call_fail(call_id=call_id, error=error.to_dict())


def tool_calls_tasks_stalled(*, now: Any = None) -> QuerySet[ToolCall]:
    """Running task calls whose poller has been silent for POLLER_TTL (or never started)."""
    now = now or timezone.now()
    stale = now - POLLER_TTL
    return (
        ToolCall.objects.filter(status=ToolCallStatus.RUNNING)
        .exclude(task_status="")
        .filter(
            Q(task_polled_at__lt=stale)
            | Q(task_polled_at__isnull=True, started_at__lt=stale)
            | Q(task_polled_at__isnull=True, started_at__isnull=True, created_at__lt=stale)
        )
    )


# ---- the driver (runs in the worker's event loop: chat.calls.task_jobs) -----------------


def server_request_handler(call: ToolCall) -> CallServerRequests:
    """Who answers the server's requests that arrive while ``tasks/result`` is open (the
    elicitation of an ``input_required`` task): the call's own handler, the same cards as
    an ordinary call's (``chat.server_requests``), for the person the call runs for."""
    return server_request_handler_for(call)


_load = database_sync_to_async(
    lambda call_id: ToolCall.objects.select_related("server", "thread").get(pk=call_id)
)
_claim = database_sync_to_async(lambda **kw: tool_call_task_claim(**kw))
_alive = database_sync_to_async(lambda **kw: tool_call_task_alive(**kw))
_record = database_sync_to_async(lambda **kw: tool_call_task_record(**kw))
_cancel_sent = database_sync_to_async(lambda **kw: tool_call_task_cancel_sent(**kw))
_expire = database_sync_to_async(lambda **kw: tool_call_task_expire(**kw))
_refuse = database_sync_to_async(lambda **kw: tool_call_task_refuse(**kw))
_fail = database_sync_to_async(lambda **kw: tool_call_fail(**kw))
_finish = database_sync_to_async(lambda **kw: tool_call_finish(**kw))
_cancel = database_sync_to_async(lambda **kw: tool_call_cancel(**kw))


class _Stopped(Exception):
    """The call is no longer ours to drive (cancelled, ended, or taken by another poller)."""

    def __init__(self, status: str | None) -> None:
        super().__init__(status)
        self.status = status


async def tool_call_task_drive(call_id: int, *, poller: str) -> None:
    """Drive one task call to its end (see the module docstring). Idempotent: a second
    driver of the same call (a redelivered job, the sweep) finds it claimed and returns."""
    if not await _claim(call_id=call_id, poller=poller):
        return
    call = await _load(call_id)
    started = call.started_at or call.created_at
    try:
        await _drive(call, poller=poller)
    except _Stopped as stop:
        if stop.status == ToolCallStatus.CANCELLED and call.task_id:
            await _send_cancel(call)
    except TaskNotFound as exc:
        await _expire(call_id=call_id, error=exc)
    except TaskUnsupported as exc:
        await _refuse(call_id=call_id, error=exc)
    except BridgeError as exc:
        await _fail(call_id=call_id, error=exc.to_dict(), latency_ms=_since(started))
    except Exception:
        log.exception("task call %s failed unexpectedly", call_id)
        await _fail(
            call_id=call_id,
            error={"code": "internal_error", "message": "The tool call failed unexpectedly."},
            latency_ms=_since(started),
        )


def _since(started: Any) -> float:
    return max(0.0, (timezone.now() - started).total_seconds() * 1000)


async def _check(call: ToolCall, poller: str) -> None:
    status = await _alive(call_id=call.pk, poller=poller)
    if status != ToolCallStatus.RUNNING:
        raise _Stopped(status)


async def _drive(call: ToolCall, *, poller: str) -> None:
    server = call.server
    who = call.requested_by_id
    started = call.started_at or call.created_at
    if not call.task_id:
        tool = await gateway.tool_for(server, call.tool_name)
        arguments = await arguments_for_server(call, tool.input_schema)  # a person's files
        task = await gateway.call_tool_as_task(
            server, tool, arguments, ttl_ms=ASKED_TTL_MS, on_behalf_of=who
        )
        if "result" in task and not task.get("taskId"):  # the server answered at once
            await _finish(
                call_id=call.pk, raw=task["result"], latency_ms=_since(started), app_resource=None
            )
            return
        call.task_id = str(task.get("taskId") or "")
        await _record(call_id=call.pk, task=task, created=True)
        call.task_poll_interval_ms = task.get("pollInterval")
    task_id = call.task_id
    answering = server_request_handler(call)
    result_job: asyncio.Task[dict[str, Any]] | None = None
    next_poll = 0.0
    status = ""
    try:
        while True:
            await _check(call, poller)
            if result_job is not None and result_job.done():
                raw = result_job.result()  # a failure raises here (BridgeError)
                if status != "completed":
                    await _record(
                        call_id=call.pk, task={"status": "completed", "statusMessage": ""}
                    )
                await _finish(
                    call_id=call.pk, raw=raw, latency_ms=_since(started), app_resource=None
                )
                return
            if time.monotonic() >= next_poll:
                task = await gateway.task_get(server, task_id, on_behalf_of=who)
                status = str(task.get("status") or "")
                await _record(call_id=call.pk, task=task)
                next_poll = time.monotonic() + poll_seconds(task.get("pollInterval"))
                if status == "cancelled":
                    await _cancel(call_id=call.pk, reason="task_cancelled")
                    return
                if status == "failed" and result_job is None:
                    await _fail_task(call, task, started)
                    return
                if result_job is None and status in {"completed", "input_required"}:
                    # input_required: the server delivers its question on this request.
                    result_job = asyncio.ensure_future(
                        gateway.task_result(
                            server,
                            task_id,
                            on_behalf_of=who,
                            timeout=RESULT_TIMEOUT_SECONDS,
                            on_server_request=answering,
                        )
                    )
            wait = min(CHECK_EVERY_SECONDS, max(0.0, next_poll - time.monotonic()))
            if result_job is not None:
                await asyncio.wait({result_job}, timeout=wait or 0.05)
            else:
                await asyncio.sleep(wait)
    finally:
        if result_job is not None and not result_job.done():
            result_job.cancel()
        await answering.close()  # a question still open expires with the call


async def _fail_task(call: ToolCall, task: dict[str, Any], started: Any) -> None:
    """A failed task: its result (usually ``isError``) is the call's, else its message."""
    try:
        raw = await gateway.task_result(
            call.server, call.task_id, on_behalf_of=call.requested_by_id
        )
    except BridgeError:
        message = str(task.get("statusMessage") or "The tool's task failed.")[:500]
        await _fail(
            call_id=call.pk,
            error={"code": "task_failed", "message": message},
            latency_ms=_since(started),
        )
        return
    await _finish(call_id=call.pk, raw=raw, latency_ms=_since(started), app_resource=None)


async def _send_cancel(call: ToolCall) -> None:
    try:
        task = await gateway.task_cancel(
            call.server, call.task_id, on_behalf_of=call.requested_by_id
        )
    except BridgeError as exc:
        await _cancel_sent(call_id=call.pk, task=None, error=exc.user_message)
        return
    await _cancel_sent(call_id=call.pk, task=task)
