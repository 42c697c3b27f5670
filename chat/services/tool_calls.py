"""Tool calls, whoever starts them (a person, the model, an app view).

`tool_call_start` decides (bindings policy, audited), records the call, and runs it in a
background task when allowed — never inside a socket handler. `finish` stores the
canonical result, stages media, and broadcasts, all in one transaction.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from audit.rows import insert_row, update_row
from audit.types import AuditEventType, Decision
from audit.writer import record
from bindings import services as authority
from bindings.models import ApprovalRequest
from bindings.policy import ActionKind, grant_owner
from bindings.selectors import call_authority, signs_in_members
from chat import runtime
from chat.call_runners import claimed_while_running, orphaned_running_calls
from chat.groups import CALL_RUNNERS, call_stop_message
from chat.media import limit_server_staging, normalize_result, staged_parts
from chat.models import MediaAsset, Message, Thread, ToolCall, ToolCallStatus
from chat.presenters import serialize_tool_call
from chat.selectors import tool_calls_queryset
from chat.services.turn_lease import check_fence
from chat.tasks import persist_tool_media
from chat.thread_events import emit, layer_is_process_local
from mcp_bridge import gateway
from mcp_bridge import services as bridge_services
from mcp_bridge.errors import AuthorizationRequired, BridgeError
from mcp_bridge.models import McpServer, Tool, UiResource
from mcp_bridge.normalize import NormalizedResult, build_sanitized_tool_result

log = logging.getLogger(__name__)

ACTION_FOR_ORIGIN = {
    "user": ActionKind.USER_TOOL_CALL,
    "model": ActionKind.MODEL_TOOL_CALL,
    "app_view": ActionKind.APP_TOOL_CALL,
}
FINAL_STATUSES = {
    ToolCallStatus.SUCCESS,
    ToolCallStatus.ERROR,
    ToolCallStatus.REJECTED,
    ToolCallStatus.CANCELLED,
}
PROGRESS_INTERVAL = 0.1  # seconds between stored progress events of one call


class ToolCallRefused(Exception):
    def __init__(self, code: str, message: str, call: ToolCall | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.call = call


@dataclass
class CallRequest:
    thread: Thread
    server: McpServer
    tool_name: str
    arguments: dict[str, Any]
    origin: str  # user | model | app_view
    user: Any  # the person on whose behalf the call runs
    role: str | None
    message: Message | None = None
    parent_view: ToolCall | None = None
    provider_call_id: str = ""
    action_kind: ActionKind | None = None
    # The row opened while a model streamed this call's arguments (its view is mounted):
    # deciding the call fills it in instead of creating another.
    streamed_call_id: int | None = None


def task_key(call_id: int) -> str:
    return f"toolcall:{call_id}"


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


def _emit_call(call: ToolCall) -> None:
    fresh = tool_calls_queryset().get(pk=call.pk)
    emit(thread_id=call.thread_id, kind="toolcall", payload=serialize_tool_call(fresh))


# ----------------------------------------------------------------------- sync services


_READ = object()  # tool_call_decide(tool=...) default: read the catalogue row itself


def _known_approval(call: ToolCall, approval: ApprovalRequest | None) -> None:
    """Tell the ORM the call's approval (or that it has none), so serializing the call
    from memory does not query for it."""
    call.__dict__["_approval"] = approval


def _emit_fresh(call: ToolCall) -> None:
    """Emit a call every relation of which is loaded (the payload is built from memory:
    it is what `tool_calls_queryset()` would read back, without the five-join re-read)."""
    emit(thread_id=call.thread_id, kind="toolcall", payload=serialize_tool_call(call))


def tool_call_decide(*, request: CallRequest, tool: Any = _READ) -> tuple[ToolCall, str]:
    """Decide the call and record it, in one transaction. Returns (call, outcome)."""
    decided = _decide(request=request, tool=tool)
    assert decided is not None
    return decided[0], decided[1]


def _decide(
    *,
    request: CallRequest,
    tool: Any = _READ,
    refresh_missing: bool = False,
    quiet_start: bool = False,
) -> tuple[ToolCall, str, Tool | None] | None:
    """tool_call_decide(), also returning the catalogue row. With `refresh_missing`, a
    tool absent from the catalogue returns None before anything is written (the caller
    refreshes the catalogue once and decides again). With `quiet_start`, an allowed call
    is recorded (and its decision audited) without its "running" event: `execute`
    announces it only if the call is still running after ANNOUNCE_AFTER. A view past the
    caps on pending approvals raises ToolCallRefused (audited, nothing recorded)."""
    decided = _decide_atomic(
        request=request, tool=tool, refresh_missing=refresh_missing, quiet_start=quiet_start
    )
    if isinstance(decided, authority.BindingError):
        raise ToolCallRefused(decided.code, decided.message)
    return decided


def _decide_atomic(
    *,
    request: CallRequest,
    tool: Any = _READ,
    refresh_missing: bool = False,
    quiet_start: bool = False,
) -> tuple[ToolCall, str, Tool | None] | authority.BindingError | None:
    kind = request.action_kind or ACTION_FOR_ORIGIN[request.origin]
    per_member = signs_in_members(request.server)
    with transaction.atomic():
        check_fence()  # a model turn that lost its lease starts no call (chat.turn_lease)
        streamed = _streamed_row(request)
        if request.streamed_call_id is not None and streamed is None:
            # Cancelled while its arguments streamed: it stays cancelled, nothing runs.
            ended = tool_calls_queryset().get(pk=request.streamed_call_id)
            return ended, "cancelled", None
        # Binding, policy row and catalogue row: read fresh, in lean statements.
        found = call_authority(
            thread=request.thread,
            server_id=request.server.pk,
            tool_name=request.tool_name,
            actor_kind=request.origin,
            # A call spending a member's own sign-in: only an allowance they granted counts.
            grant_owner_id=grant_owner(
                per_member_grants=per_member,
                requested_by_kind=request.origin,
                requester_id=getattr(request.user, "pk", None),
            ),
        )
        if tool is _READ:
            tool = found.tool
            if tool is None and refresh_missing:
                return None
        auth = authority.action_authorize(
            action_kind=kind,
            actor_kind=request.origin,
            user=request.user,
            role=request.role,
            thread=request.thread,
            server_id=request.server.pk,
            tool=tool,
            tool_name=request.tool_name,
            arguments=request.arguments,
            view=request.parent_view,
            binding=found.binding,
            preread=found if found.binding is not None else None,
            # A view's server row is read fresh with each of its requests.
            server_enabled=request.server.enabled if request.origin == "app_view" else None,
            per_member_grants=per_member,
        )
        decision = auth.decision
        if decision.needs_approval and request.parent_view is not None:
            asked = _ask_once(request, auth)
            if isinstance(asked, ToolCall):
                return asked, str(decision.outcome), tool
            if asked is not None:
                return asked  # returned, not raised: the refusal's audit row commits
        if decision.allowed:
            status = ToolCallStatus.RUNNING
        elif decision.needs_approval:
            status = ToolCallStatus.AWAITING_APPROVAL
        else:
            status = ToolCallStatus.REJECTED
        call = ToolCall(
            thread=request.thread,
            message=request.message,
            server=request.server,
            binding=auth.binding,
            tool_name=request.tool_name,
            arguments=request.arguments,
            status=status,
            origin=request.origin,
            requested_by=request.user,
            parent_view=request.parent_view,
            provider_call_id=request.provider_call_id[:200],
            started_at=timezone.now() if decision.allowed else None,
            error=None
            if status != ToolCallStatus.REJECTED
            else {"code": str(decision.reason_code), "message": decision.message},
            ui_resource=_start_resource(request, tool, streamed),
        )
        if streamed is not None:
            # The same row (and view) the members already see, now decided.
            call.pk = streamed.pk
            call.created_at = streamed.created_at
            call.save(update_fields=DECIDE_FIELDS)
        else:
            insert_row(call)  # lean: on the path of every app view's tools/call
        approval = None
        if decision.needs_approval:
            assert auth.binding is not None  # the policy asks only under a binding
            approval = authority.approval_create(
                thread=request.thread,
                binding=auth.binding,
                tool_call=call,
                server_id=request.server.pk,
                tool_name=request.tool_name,
                arguments=request.arguments,
                risk=str(decision.risk),
                risk_source=str(decision.risk_source or ""),
                requested_by_kind=request.origin,
                requested_by=request.user,
                view_id=getattr(request.parent_view, "pk", None),
            )
        _known_approval(call, approval)
        if not (quiet_start and decision.allowed):
            _emit_fresh(call)
    return call, str(decision.outcome), tool


def _ask_once(
    request: CallRequest, auth: authority.Authorization
) -> ToolCall | authority.BindingError | None:
    """One card per question (docs/consent.md): a view asking again what it already asks
    joins that request — its call, which this request then waits on — and a view past
    the caps on pending approvals is refused (audited). None: ask anew. In the caller's
    transaction, holding the view's row, so one view's requests are taken one at a time."""
    view = request.parent_view
    assert view is not None and auth.binding is not None
    ToolCall.objects.select_for_update().filter(pk=view.pk).values_list("pk").first()
    joined = authority.approval_join_pending(
        thread=request.thread,
        view_id=view.pk,
        requested_by=request.user,
        tool_name=request.tool_name,
        arguments=request.arguments,
    )
    if joined is not None and joined.tool_call_id is not None:
        call = tool_calls_queryset().get(pk=joined.tool_call_id)
        _known_approval(call, joined)
        _emit_fresh(call)  # the card now says how many times it was asked
        return call
    return authority.approval_limit_refusal(
        thread=request.thread,
        binding=auth.binding,
        view_id=view.pk,
        requested_by=request.user,
        server_id=request.server.pk,
        tool_name=request.tool_name,
        arguments=request.arguments,
    )


DECIDE_FIELDS = [
    "binding",
    "arguments",
    "status",
    "requested_by",
    "started_at",
    "error",
    "ui_resource",
    "provider_call_id",
]


def _streamed_row(request: CallRequest) -> ToolCall | None:
    """The row opened for this call while its arguments streamed, if it is still open."""
    if request.streamed_call_id is None:
        return None
    return (
        ToolCall.objects.select_for_update()
        .filter(pk=request.streamed_call_id, status=ToolCallStatus.STREAMING)
        .only("pk", "created_at", "ui_resource")
        .first()
    )


def _start_resource(
    request: CallRequest, tool: Tool | None, streamed: ToolCall | None
) -> UiResource | None:
    """The view a call shows from its start: the catalogue's `_meta.ui.resourceUri`, in
    its latest stored version. A view's own calls answer that view and get none."""
    if streamed is not None and streamed.ui_resource_id is not None:
        return streamed.ui_resource
    if request.origin == "app_view" or tool is None or not tool.resource_uri:
        return None
    return (
        UiResource.objects.filter(server_id=request.server.pk, uri=tool.resource_uri)
        .order_by("-fetched_at", "-pk")
        .first()
    )


def _view_resource_for(
    call: ToolCall, normalized: NormalizedResult, tool: Tool | None
) -> UiResource | None:
    """The document this call's view renders: an embedded UI part (legacy forms)."""
    for part in normalized.parts:
        if part.get("type") != "ui":
            continue
        if part.get("url"):
            return bridge_services.ui_resource_store_document(
                server=call.server,
                uri=part["uri"],
                mime_type=part["mimeType"],
                text=part["url"],
                meta=part.get("meta"),
            )
        document = normalized.documents.get(str(part.get("contentHash") or ""))
        if document:
            return bridge_services.ui_resource_store_document(
                server=call.server,
                uri=document["uri"],
                mime_type=document["mimeType"],
                text=document["text"],
                meta=part.get("meta"),
            )
    return None


FINISH_FIELDS = ["result", "status", "error", "finished_at", "latency_ms", "ui_resource"]


def _call_audit_scope(call: ToolCall) -> dict[str, Any]:
    """Who ran a call, where, and which tool: the fields every audit row of its end shares."""
    return {
        "actor_kind": call.origin,
        "actor_user_id": call.requested_by_id,
        "workspace_id": call.thread.workspace_id,
        "thread_id": call.thread_id,
        "binding_id": call.binding_id,
        "server_id": call.server_id,
        "tool_name": call.tool_name,
    }


def tool_call_finish(
    *,
    call_id: int,
    raw: dict[str, Any] | None,
    latency_ms: float,
    app_resource: UiResource | None,
    tool: Tool | None = None,
    call: ToolCall | None = None,
    normalized: NormalizedResult | None = None,
) -> ToolCall:
    """Store the result, audit it and emit the final event, in one transaction. `call`:
    the row `tool_call_start` created (relations loaded), saving the re-read."""
    if call is None or call.pk != call_id:
        call = ToolCall.objects.select_related("server", "thread").get(pk=call_id)
        fresh = False
    else:
        fresh = True
    if tool is None or tool.server_id != call.server_id or tool.name != call.tool_name:
        tool = Tool.objects.filter(server=call.server, name=call.tool_name).first()
    if normalized is None:
        normalized = normalize_result(raw)
    sanitized = build_sanitized_tool_result(
        normalized, tool_name=call.tool_name, tool_call_id=str(call.pk), server=call.server.slug
    )
    with transaction.atomic():
        limit_server_staging(server_id=call.server_id, result=sanitized)
        assets = _create_assets(call, sanitized["parts"])
        call.result = sanitized
        call.status = ToolCallStatus.ERROR if normalized.is_error else ToolCallStatus.SUCCESS
        if normalized.is_error:
            call.error = {
                "code": "tool_returned_error",
                "message": "The tool reported an error (see its result).",
            }
        call.finished_at = timezone.now()
        call.latency_ms = latency_ms
        call.ui_resource = (
            app_resource
            or (call.ui_resource if call.ui_resource_id is not None else None)
            or _view_resource_for(call, normalized, tool)
        )
        # Only a running call finishes: a cancellation recorded first (by a member, from
        # any process) stands, and the late result is dropped.
        if not update_row(call, FINISH_FIELDS, only_if={"status": "running"}):
            transaction.set_rollback(True)  # nor its media
            return call
        record(
            event_type=AuditEventType.TOOL_CALL_COMPLETED
            if not normalized.is_error
            else AuditEventType.TOOL_CALL_FAILED,
            decision=Decision.ALLOWED if not normalized.is_error else Decision.FAILED,
            **_call_audit_scope(call),
            action="tool_result",
            reason="is_error" if normalized.is_error else "ok",
            arguments=call.arguments,
            latency_ms=latency_ms,
            extra={
                "tool_call_id": call.pk,
                "parts": len(sanitized["parts"]),
                "media": [a.pk for a in assets],
            },
        )
        if fresh:
            _emit_fresh(call)
        else:
            _emit_call(call)
        for asset in assets:
            transaction.on_commit(functools.partial(_enqueue_persist, asset.pk))
    return call


def _create_assets(call: ToolCall, parts: list[dict[str, Any]]) -> list[MediaAsset]:
    assets = []
    for part in staged_parts(parts):
        staged = part["asset"]
        asset = MediaAsset.objects.create(
            thread_id=call.thread_id,
            tool_call=call,
            kind=staged.get("kind") or part.get("mediaKind") or "binary",
            mime_type=part.get("mimeType", "application/octet-stream"),
            filename=(part.get("filename") or "")[:255],
            size=int(staged.get("size") or 0),
            staging_path=staged["stagingKey"],
        )
        part["asset"] = {"id": asset.pk, "status": "staged", "size": asset.size}
        assets.append(asset)
    return assets


def _enqueue_persist(asset_id: int) -> None:
    try:
        persist_tool_media.delay(asset_id)
    except Exception:  # a down broker must not lose the result: staged media waits
        log.exception("could not enqueue media %s; it stays staged", asset_id)


def tool_call_fail(
    *,
    call_id: int,
    error: dict[str, Any],
    status: str = ToolCallStatus.ERROR,
    latency_ms: float | None = None,
) -> ToolCall:
    with transaction.atomic():
        call = ToolCall.objects.select_related("thread").select_for_update().get(pk=call_id)
        if call.status in FINAL_STATUSES:
            return call
        call.status = status
        call.error = error
        call.finished_at = timezone.now()
        call.latency_ms = latency_ms
        call.save()
        record(
            event_type=AuditEventType.TOOL_CALL_FAILED,
            decision=Decision.FAILED,
            **_call_audit_scope(call),
            action="tool_result",
            reason=str(error.get("code", "error"))[:200],
            arguments=call.arguments,
            latency_ms=latency_ms,
            extra={"tool_call_id": call.pk, "message": error.get("message", "")[:500]},
        )
        _emit_call(call)
    return call


# ------------------------------------------------------------- lifecycle: input, cancel

OPEN_STATUSES = (
    ToolCallStatus.STREAMING,
    ToolCallStatus.AWAITING_APPROVAL,
    ToolCallStatus.RUNNING,
)


def tool_call_open_input(
    *,
    thread_id: int,
    server: McpServer,
    tool_name: str,
    message_id: int | None,
    provider_call_id: str,
    user_id: int | None,
    ui_resource: UiResource | None,
    binding_id: int | None,
) -> ToolCall:
    """The row of a call whose arguments a model has started to stream: not decided (and
    not runnable) yet, but its view mounts now and receives the partial arguments."""
    with transaction.atomic():
        check_fence()
        call = ToolCall.objects.create(
            thread_id=thread_id,
            message_id=message_id,
            server=server,
            tool_name=tool_name,
            arguments={},
            status=ToolCallStatus.STREAMING,
            origin="model",
            requested_by_id=user_id,
            provider_call_id=provider_call_id[:200],
            ui_resource=ui_resource,
            # The binding that offered the tool: the view's CSP and permissions from the
            # start (the decision re-reads it, and a disabled binding still runs nothing).
            binding_id=binding_id,
        )
        call = tool_calls_queryset().get(pk=call.pk)
        record(
            event_type=AuditEventType.TOOL_CALL_INPUT_STARTED,
            decision=Decision.PENDING,
            actor_kind="model",
            actor_user_id=user_id,
            workspace_id=call.thread.workspace_id,
            thread_id=thread_id,
            binding_id=binding_id,
            server_id=server.pk,
            tool_name=tool_name,
            action="tool_input",
            reason="streaming",
            extra={"tool_call_id": call.pk, "provider_call_id": provider_call_id[:200]},
        )
        _emit_fresh(call)
    return call


def tool_call_record_input(
    *, call_id: int, thread_id: int, arguments: dict[str, Any], payload: dict[str, Any]
) -> None:
    """Store the best-effort arguments so far (a reload shows them) and emit them."""
    with transaction.atomic():
        check_fence()
        changed = ToolCall.objects.filter(pk=call_id, status=ToolCallStatus.STREAMING).update(
            arguments=arguments
        )
        if changed:
            emit(thread_id=thread_id, kind="toolcall.input-partial", payload=payload)


CANCEL_MESSAGES = {
    "cancelled_by_member": "{who} cancelled this call.",
    "turn_cancelled": "{who} stopped the assistant's answer; this call was cancelled.",
    "input_abandoned": "The assistant's answer ended before this call was complete.",
}


def tool_call_cancel(
    *,
    call_id: int,
    actor_user_id: int | None = None,
    reason: str = "cancelled",
    latency_ms: float | None = None,
) -> ToolCall:
    """End an open call as cancelled (audited, emitted): its view gets tool-cancelled.
    A call that has already ended is returned unchanged."""
    with transaction.atomic():
        call = (
            ToolCall.objects.select_related("thread")
            .select_for_update(of=("self",))
            .get(pk=call_id)
        )
        if call.status not in OPEN_STATUSES:
            return call
        who = "Someone"
        if actor_user_id is not None:
            person = get_user_model().objects.filter(pk=actor_user_id).first()
            if person is not None:
                who = person.get_full_name() or person.get_username()
        was = call.status
        call.status = ToolCallStatus.CANCELLED
        call.error = {
            "code": "cancelled",
            "message": CANCEL_MESSAGES.get(reason, "The tool call was cancelled.").format(who=who),
        }
        call.finished_at = timezone.now()
        if latency_ms is not None:
            call.latency_ms = latency_ms
        call.save(update_fields=["status", "error", "finished_at", "latency_ms"])
        record(
            event_type=AuditEventType.TOOL_CALL_CANCELLED,
            decision=Decision.ALLOWED,
            actor_kind="user" if actor_user_id is not None else "system",
            actor_user_id=actor_user_id,
            workspace_id=call.thread.workspace_id,
            thread_id=call.thread_id,
            binding_id=call.binding_id,
            server_id=call.server_id,
            tool_name=call.tool_name,
            action="tool_cancel",
            reason=reason,
            arguments=call.arguments,
            latency_ms=latency_ms,
            extra={"tool_call_id": call.pk, "was": was},
        )
        _emit_call(call)
    return call


# Who asked to cancel a call running in this process, and why (read as its task unwinds).
_cancel_requests: dict[int, tuple[int | None, str]] = {}


async def tool_call_stop(*, call: ToolCall, user_id: int | None, reason: str) -> None:
    """Cancel an open call. A call running in this process is stopped (the SDK sends
    `notifications/cancelled` to its server) and recorded as it unwinds; any other open
    call (streaming, or running in another process) is recorded at once — its late
    result, if any, is then dropped by `tool_call_finish`."""
    if call.status == ToolCallStatus.RUNNING:
        _cancel_requests[call.pk] = (user_id, reason)
        if runtime.cancel(task_key(call.pk)):
            return
        _cancel_requests.pop(call.pk, None)
    await database_sync_to_async(tool_call_cancel)(
        call_id=call.pk, actor_user_id=user_id, reason=reason
    )
    if call.status == ToolCallStatus.RUNNING and not layer_is_process_local():
        # Running in another process (chat.call_stops): its task is stopped there, which
        # tells the server; the late result, if any, is dropped.
        layer = get_channel_layer()
        await layer.group_send(CALL_RUNNERS, call_stop_message(call.pk))


def tool_call_record_progress(
    *,
    call_id: int,
    thread_id: int,
    progress: float,
    total: float | None,
    message: str | None,
    announce: ToolCall | None = None,
) -> None:
    """Store and emit a progress report; `announce`: the call's "running" event is still
    due (see `_Announcer`), and goes first."""
    data = {"id": call_id, "progress": progress, "total": total, "message": (message or "")[:300]}
    with transaction.atomic():
        if announce is not None:
            _emit_fresh(announce)
        ToolCall.objects.filter(pk=call_id).update(progress=data)
        emit(thread_id=thread_id, kind="toolcall.progress", payload=data)


ANNOUNCE_AFTER = 0.25  # seconds a view's call runs before its "running" event is emitted


def _needs_sign_in(call: ToolCall, error: BridgeError) -> None:
    with transaction.atomic():
        call.error = error.to_dict()
        call.save(update_fields=["error"])
        _emit_call(call)


def _announce(call: ToolCall) -> None:
    with transaction.atomic():
        _emit_fresh(call)


class _Announcer:
    """The late "running" event of a view's call (see `execute`).

    Only the event loop touches it. Once `_later` has woken up, its trip to the (single,
    first-in first-out) database thread is queued before any trip `execute` queues next, so
    the running event can never follow the call's final event.
    """

    def __init__(self, call: ToolCall) -> None:
        self.call = call
        self.settled = False  # emitted, on its way, or no longer wanted
        self.task = asyncio.ensure_future(self._later())

    async def _later(self) -> None:
        await asyncio.sleep(ANNOUNCE_AFTER)
        self.settled = True
        try:
            await database_sync_to_async(_announce)(self.call)
        except Exception:  # the final event still comes; members just see no "running"
            log.exception("could not announce tool call %s", self.call.pk)

    def take(self) -> ToolCall | None:
        """The call, if its running event is still due: the caller emits it now."""
        if self.settled:
            return None
        self.cancel()
        return self.call

    def cancel(self) -> None:
        """The call has ended: its final event says everything."""
        if not self.settled:
            self.settled = True
            self.task.cancel()


# ----------------------------------------------------------------------- orchestration


def _quiet(request: CallRequest) -> bool:
    """A view's call is announced by its final event only, unless it takes a while."""
    return request.origin == "app_view"


def _prepare_and_decide(
    *, request: CallRequest | Callable[[], CallRequest], refresh_missing: bool
) -> tuple[CallRequest, tuple[ToolCall, str, Tool | None] | None]:
    if not isinstance(request, CallRequest):
        request = request()
    decided = _decide(request=request, refresh_missing=refresh_missing, quiet_start=_quiet(request))
    return request, decided


# Built once: a SyncToAsync wrapper inspects its function when created (~0.1 ms per call
# on this project's machines, twice per tool call otherwise).
_decide_async = database_sync_to_async(lambda **kwargs: _prepare_and_decide(**kwargs))
_finish_success_async = database_sync_to_async(lambda **kwargs: tool_call_finish(**kwargs))


async def tool_call_start(request: CallRequest | Callable[[], CallRequest]) -> ToolCall:
    """Decide, record, and (when allowed) run the call in the background.

    `request` may be a function that builds the request on the database thread, in the
    decision's own trip (an app view's call checks its member's session and its token
    there); what it raises reaches the caller, and nothing is decided."""
    # One trip to the database thread: catalogue row, binding, policy, decision, audit,
    # call row and event. A tool the catalogue does not know refreshes it once first.
    if (
        isinstance(request, CallRequest)
        and not _quiet(request)
        and request.streamed_call_id is None
    ):
        await _ensure_view_resource(request)
    resolved, decided = await _decide_async(request=request, refresh_missing=True)
    if decided is None:
        unsigned: AuthorizationRequired | None = None
        try:
            await gateway.refresh_catalogue(resolved.server)
        except AuthorizationRequired as exc:
            unsigned = exc  # nobody connected this server yet: there is no catalogue
        except BridgeError:
            pass  # then decided (audited) as tool_not_found
        resolved, decided = await _decide_async(request=resolved, refresh_missing=False)
        assert decided is not None
        if unsigned is not None and decided[1] != "allow":
            # Refused for want of a catalogue: say what would help (the Connect card).
            await database_sync_to_async(_needs_sign_in)(decided[0], unsigned)
    call, outcome, tool = decided
    if outcome == "allow":
        # The call row and catalogue row were just read: hand them over (two fewer
        # database round trips per call than re-reading them in the task).
        runtime.spawn(
            task_key(call.pk), execute(call.pk, call=call, tool=tool, announce=_quiet(resolved))
        )
    return call


async def _ensure_view_resource(request: CallRequest) -> None:
    """Have the tool's UI resource stored before the call is recorded, so its view mounts
    from the start (a resource read once, then served from the stored version)."""
    try:
        tool = await gateway.tool_for(request.server, request.tool_name)
        if tool.resource_uri:
            await gateway.ui_resource(request.server, tool.resource_uri, refresh=False)
    except BridgeError as exc:  # decided (and audited) without a view; the result may bring one
        log.info("no view resource for %s: %s", request.tool_name, exc)


async def execute(
    call_id: int,
    *,
    call: ToolCall | None = None,
    tool: Tool | None = None,
    announce: bool = False,
) -> None:
    """Run an allowed call and record its outcome. `announce`: its "running" event was
    not emitted yet (a view's call, see `tool_call_start`): it is, once the call has run
    for ANNOUNCE_AFTER seconds or reports progress; a quick call only has its final event.
    """
    fresh = call is not None  # just created by tool_call_start: its relations are loaded
    if call is None:
        call = await database_sync_to_async(
            lambda: ToolCall.objects.select_related("server", "thread").get(pk=call_id)
        )()
    server = call.server
    last_progress = 0.0
    announcer = _Announcer(call) if announce else None

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
            ui_task = (
                asyncio.ensure_future(gateway.ui_resource(server, tool.resource_uri))
                if tool.resource_uri
                else None
            )
            async with claimed_while_running(call_id):
                raw, latency_ms = await gateway.call_tool(
                    server,
                    tool,
                    call.arguments,
                    progress=on_progress,
                    on_behalf_of=call.requested_by_id,  # whose sign-in an OAuth server sees
                )
        finally:
            # Before any final event is queued: a late running event must not follow it.
            if announcer is not None:
                announcer.cancel()
        # Media decoding/staging (chat.media) in a plain thread: neither the event loop nor
        # the one database thread is held by it. Then the raw result (base64 text) goes.
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
            call=call if fresh else None,
            normalized=normalized,
        )
    except asyncio.CancelledError:
        # The SDK has told the server (notifications/cancelled) while the call unwound.
        by, reason = _cancel_requests.pop(call_id, (None, "cancelled"))
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


def tool_call_reject(*, call_id: int, code: str, message: str) -> ToolCall | None:
    """End a call that waits on its approval as rejected — the approval was rejected,
    expired or cancelled, or re-deciding it refused the call — and show every member (a
    view waiting on the call gets the refusal). The approval's own audit row says why.
    A call that no longer waits is left as it is (None)."""
    with transaction.atomic():
        changed = ToolCall.objects.filter(
            pk=call_id, status=ToolCallStatus.AWAITING_APPROVAL
        ).update(
            status=ToolCallStatus.REJECTED,
            error={"code": code, "message": message},
            finished_at=timezone.now(),
        )
        if not changed:
            return None
        call = tool_calls_queryset().get(pk=call_id)
        emit(thread_id=call.thread_id, kind="toolcall", payload=serialize_tool_call(call))
    return call


ORPHANED_ERROR = {
    "code": "runner_lost",
    "message": "The server process running this call stopped; the call did not finish.",
}


def tool_call_fail_orphaned() -> int:
    """The beat sweep: fail every running call whose process died (chat.call_runners),
    audited as a failed call (reason ``runner_lost``); every member sees it end."""
    failed = 0
    for call_id in list(orphaned_running_calls().values_list("pk", flat=True)):
        with transaction.atomic():
            # Still orphaned under the row lock: its process may have renewed meanwhile.
            if not orphaned_running_calls().select_for_update().filter(pk=call_id).exists():
                continue
            tool_call_fail(call_id=call_id, error=dict(ORPHANED_ERROR))
            failed += 1
    return failed
