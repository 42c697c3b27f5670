"""Step 2 of a call: run it, in a background task, never inside a socket handler.

``call_start`` is the whole pipeline as one coroutine: one trip to the database thread
admits a view's request (``chat.calls.decide.view_call_admit``) and decides the call
(``call_decide``); an allowed call then runs in its own task (``tool_call_run``), which
ends it through ``chat.calls.finish`` (or ``chat.calls.cancel`` when it is stopped).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from channels.db import database_sync_to_async
from django.db import transaction

from chat.calls import runtime
from chat.calls.cancel import cancel_request_take, tool_call_cancel
from chat.calls.decide import Decided, call_decide, view_call_admit
from chat.calls.emit import call_emit
from chat.calls.finish import tool_call_fail, tool_call_finish
from chat.calls.mcp_tasks import tool_runs_as_task
from chat.calls.requests import CallRequest, ViewCallRequest, task_key
from chat.calls.runners import claimed_while_running
from chat.calls.task_jobs import task_submit
from chat.media.staging import normalize_result
from chat.models import ToolCall
from chat.realtime.events import emit
from chat.server_requests.handler import call_tool_answering
from mcp_bridge import gateway
from mcp_bridge.errors import AuthorizationRequired, BridgeError
from mcp_bridge.models import Tool

log = logging.getLogger(__name__)

PROGRESS_INTERVAL = 0.1  # seconds between stored progress events of one call
ANNOUNCE_AFTER = 0.25  # seconds a view's call runs before its "running" event is emitted
INLINE_NORMALIZE_CHARS = 256 * 1024


def _heavy(raw: Any) -> bool:
    """Whether normalizing a raw result may block (binary payloads to decode and stage)
    or take long (much text): then it runs in a plain thread."""
    content = raw.get("content") if isinstance(raw, dict) else None
    if not isinstance(content, list):
        return False
    chars = 0
    for block in content:
        if not isinstance(block, dict):
            continue
        resource = block.get("resource")
        inner: dict[str, Any] = resource if isinstance(resource, dict) else block
        if "data" in block or "blob" in inner:
            return True
        text = inner.get("text")
        if isinstance(text, str):
            chars += len(text)
            if chars > INLINE_NORMALIZE_CHARS:
                return True
    return False


def _quiet(request: CallRequest) -> bool:
    """A view's call is announced by its final event only, unless it takes a while."""
    return request.origin == "app_view"


def _admit_and_decide(
    *, ask: CallRequest | ViewCallRequest, refresh_missing: bool
) -> tuple[CallRequest, Decided | None]:
    """The decision's one trip to the database thread: a view's request admitted first
    (session, membership, token, input: what it raises reaches the caller, and nothing is
    decided; its statement reads the call's authority too), then the decision, audit, call
    row and event. A request decided again (after a catalogue refresh) reads its authority
    anew."""
    request, authority = view_call_admit(ask) if isinstance(ask, ViewCallRequest) else (ask, None)
    decided = call_decide(
        request=request,
        refresh_missing=refresh_missing,
        quiet_start=_quiet(request),
        authority=authority,
    )
    return request, decided


# Built once: a SyncToAsync wrapper inspects its function when created (~0.1 ms per call
# on this project's machines, twice per tool call otherwise).
_decide_async = database_sync_to_async(lambda **kwargs: _admit_and_decide(**kwargs))
_finish_success_async = database_sync_to_async(lambda **kwargs: tool_call_finish(**kwargs))


async def call_start(ask: CallRequest | ViewCallRequest) -> ToolCall:
    """Admit (a view's request), decide, record, and (when allowed) run the call in the
    background. A tool the catalogue does not know refreshes it once first."""
    if isinstance(ask, CallRequest) and not _quiet(ask) and ask.streamed_call_id is None:
        await _ensure_view_resource(ask)
    request, decided = await _decide_async(ask=ask, refresh_missing=True)
    if decided is None:
        unsigned: AuthorizationRequired | None = None
        try:
            await gateway.refresh_catalogue(request.server)
        except AuthorizationRequired as exc:
            unsigned = exc  # nobody connected this server yet: there is no catalogue
        except BridgeError:
            pass  # then decided (audited) as tool_not_found
        _, decided = await _decide_async(ask=request, refresh_missing=False)
        assert decided is not None
        if unsigned is not None and decided.outcome != "allow":
            # Refused for want of a catalogue: say what would help (the Connect card).
            await database_sync_to_async(_needs_sign_in)(decided.call, unsigned)
    if decided.outcome == "allow":
        # The call row and catalogue row were just read: hand them over (two fewer
        # database round trips per call than re-reading them in the task).
        runtime.spawn(
            task_key(decided.call.pk),
            tool_call_run(decided.call.pk, decided=decided, announce=_quiet(request)),
        )
    return decided.call


async def tool_call_start(request: CallRequest) -> ToolCall:
    """Decide, record, and (when allowed) run a person's, the model's or the admin's call
    (``call_start``; a view's call starts from ``chat.calls.app_view``)."""
    return await call_start(request)


async def _ensure_view_resource(request: CallRequest) -> None:
    """Have the tool's UI resource stored before the call is recorded, so its view mounts
    from the start (a resource read once, then served from the stored version)."""
    try:
        tool = await gateway.tool_for(request.server, request.tool_name)
        if tool.resource_uri:
            await gateway.ui_resource(request.server, tool.resource_uri, refresh=False)
    except BridgeError as exc:  # decided (and audited) without a view; the result may bring one
        log.info("no view resource for %s: %s", request.tool_name, exc)


def _needs_sign_in(call: ToolCall, error: BridgeError) -> None:
    with transaction.atomic():
        call.error = error.to_dict()
        call.save(update_fields=["error"])
        call_emit(call, reread=True)


def tool_call_record_progress(
    *,
    call_id: int,
    thread_id: int,
    progress: float,
    total: float | None,
    message: str | None,
    announce: Decided | None = None,
) -> None:
    """Store and emit a progress report; `announce`: the call's "running" event is still
    due (see `_Announcer`), and goes first."""
    data = {"id": call_id, "progress": progress, "total": total, "message": (message or "")[:300]}
    with transaction.atomic():
        if announce is not None:
            call_emit(announce.call, approval=announce.approval)
        ToolCall.objects.filter(pk=call_id).update(progress=data)
        emit(thread_id=thread_id, kind="toolcall.progress", payload=data)


def _announce(decided: Decided) -> None:
    with transaction.atomic():
        call_emit(decided.call, approval=decided.approval)


class _Announcer:
    """The late "running" event of a view's call (see `tool_call_run`).

    Only the event loop touches it. Once `_later` has woken up, its trip to the (single,
    first-in first-out) database thread is queued before any trip `tool_call_run` queues
    next, so the running event can never follow the call's final event.
    """

    def __init__(self, decided: Decided) -> None:
        self.decided = decided
        self.settled = False  # emitted, on its way, or no longer wanted
        self.task = asyncio.ensure_future(self._later())

    async def _later(self) -> None:
        await asyncio.sleep(ANNOUNCE_AFTER)
        self.settled = True
        try:
            await database_sync_to_async(_announce)(self.decided)
        except Exception:  # the final event still comes; members just see no "running"
            log.exception("could not announce tool call %s", self.decided.call.pk)

    def take(self) -> Decided | None:
        """The decision, if its running event is still due: the caller emits it now."""
        if self.settled:
            return None
        self.cancel()
        return self.decided

    def cancel(self) -> None:
        """The call has ended: its final event says everything."""
        if not self.settled:
            self.settled = True
            self.task.cancel()


async def tool_call_run(
    call_id: int, *, decided: Decided | None = None, announce: bool = False
) -> None:
    """Run an allowed call and record its outcome. `decided`: the decision just recorded
    (its call row with its relations, its catalogue row); an approved call is read here.
    `announce`: its "running" event was not emitted yet (a view's call, see
    `call_start`): it is, once the call has run for ANNOUNCE_AFTER seconds or reports
    progress; a quick call only has its final event.
    """
    tool: Tool | None = None
    if decided is not None:
        call, tool = decided.call, decided.tool
    else:
        call = await database_sync_to_async(
            lambda: ToolCall.objects.select_related("server", "thread").get(pk=call_id)
        )()
    server = call.server
    last_progress = 0.0
    announcer = _Announcer(decided) if announce and decided is not None else None

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        nonlocal last_progress
        now = time.monotonic()
        if now - last_progress < PROGRESS_INTERVAL and (total is None or progress < total):
            return  # a flood of progress notifications is thinned, never queued
        last_progress = now
        call.progress = {
            "id": call_id,
            "progress": progress,
            "total": total,
            "message": (message or "")[:300],
        }
        await database_sync_to_async(tool_call_record_progress)(
            announce=announcer.take() if announcer is not None else None,
            call_id=call_id,
            thread_id=call.thread_id,
            progress=progress,
            total=total,
            message=message,
        )

    started = time.perf_counter()
    try:
        try:
            if tool is None or tool.server_id != server.pk or tool.name != call.tool_name:
                tool = await gateway.tool_for(server, call.tool_name)
            if await tool_runs_as_task(server, tool):  # a worker drives it (mcp_tasks)
                await database_sync_to_async(task_submit)(call_id=call_id)
                return
            ui_task = (
                asyncio.ensure_future(gateway.ui_resource(server, tool.resource_uri, reuse=True))
                if tool.resource_uri
                else None
            )
            async with claimed_while_running(call_id):
                # The server's questions go to the person this call runs for (a card).
                raw, latency_ms = await call_tool_answering(
                    call, server, tool, progress=on_progress
                )
        finally:
            # Before any final event is queued: a late running event must not follow it.
            if announcer is not None:
                announcer.cancel()
        # Media decoding/staging (chat.media.staging) in a plain thread: neither the event
        # loop nor the one database thread is held by it. Then the raw result (base64 text) goes.
        # A small text-only result (most calls) is normalized in tool_call_finish's trip to
        # the database thread instead: a thread hop costs more than normalizing it.
        normalized = await asyncio.to_thread(normalize_result, raw) if _heavy(raw) else None
        kept_raw: dict[str, Any] | None = None if normalized is not None else raw
        del raw  # a large result's text is not held while the rest of the call finishes
        app_resource = None
        if ui_task is not None:
            try:
                app_resource = await ui_task
            except BridgeError as exc:
                log.warning("UI resource %s unavailable: %s", tool.resource_uri, exc)
        await _finish_success_async(
            call_id=call_id,
            raw=kept_raw,
            latency_ms=latency_ms,
            app_resource=app_resource,
            tool=tool,
            call=call if decided is not None else None,
            approval=decided.approval if decided is not None else None,
            normalized=normalized,
        )
    except asyncio.CancelledError:
        # The SDK has told the server (notifications/cancelled) while the call unwound.
        by, reason = cancel_request_take(call_id)
        await database_sync_to_async(tool_call_cancel)(
            call_id=call_id,
            actor_user_id=by,
            reason=reason,
            latency_ms=(time.perf_counter() - started) * 1000,
        )
        raise
    except BridgeError as exc:
        await database_sync_to_async(tool_call_fail)(
            call_id=call_id, error=exc.to_dict(), latency_ms=(time.perf_counter() - started) * 1000
        )
    except Exception:
        log.exception("tool call %s failed unexpectedly", call_id)
        await database_sync_to_async(tool_call_fail)(
            call_id=call_id,
            error={"code": "internal_error", "message": "The tool call failed unexpectedly."},
            latency_ms=(time.perf_counter() - started) * 1000,
        )
