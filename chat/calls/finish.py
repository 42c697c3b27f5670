"""Step 3 of a call: its end, stored, audited and shown to every member in one transaction.

``tool_call_finish`` stores a result (normalized, its media staged for the worker);
``tool_call_fail`` an error; ``tool_call_reject`` a call whose approval was refused;
``tool_call_fail_orphaned`` the calls whose process died (``chat.calls.runners``).
Cancellation is ``chat.calls.cancel``.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from audit.types import AuditEventType, Decision
from audit.writer import audit_row, record
from chat.calls.emit import call_emit, call_payload
from chat.calls.requests import FINAL_STATUSES, KnownApproval
from chat.calls.runners import orphaned_running_calls
from chat.media.models import MediaAsset
from chat.media.staging import limit_server_staging, normalize_result, staged_parts
from chat.media.tasks import persist_tool_media
from chat.media.tool_files import result_file_links_open
from chat.models import ToolCall, ToolCallStatus
from chat.realtime.events import announce, numbering, thread_event
from chat.selectors import tool_calls_queryset
from lean_rows import Guard, update_row, write_together
from mcp_bridge.models import Tool, UiResource
from mcp_bridge.normalize import NormalizedResult, build_sanitized_tool_result
from mcp_bridge.services.ui_resources import ui_resource_store_document

log = logging.getLogger(__name__)


FINISH_FIELDS = ["result", "status", "error", "finished_at", "latency_ms", "ui_resource"]


def _view_resource_for(
    call: ToolCall, normalized: NormalizedResult, tool: Tool | None
) -> UiResource | None:
    """The document this call's view renders: an embedded UI part (legacy forms)."""
    for part in normalized.parts:
        if part.get("type") != "ui":
            continue
        if part.get("url"):
            return ui_resource_store_document(
                server=call.server,
                uri=part["uri"],
                mime_type=part["mimeType"],
                text=part["url"],
                meta=part.get("meta"),
            )
        document = normalized.documents.get(str(part.get("contentHash") or ""))
        if document:
            return ui_resource_store_document(
                server=call.server,
                uri=document["uri"],
                mime_type=document["mimeType"],
                text=document["text"],
                meta=part.get("meta"),
            )
    return None


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
    approval: KnownApproval | None = None,
    normalized: NormalizedResult | None = None,
) -> ToolCall:
    """Store the result, audit it and emit the final event, in one transaction. `call`:
    the row the decision recorded (relations loaded, its ``approval`` known), saving the
    re-read."""
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
    result_file_links_open(call=call, sanitized=sanitized)  # links to Atrium files: no token
    _set_outcome(call, sanitized, normalized, latency_ms)
    if (
        fresh
        and not staged_parts(sanitized["parts"])
        and (
            app_resource is not None or call.ui_resource_id is not None or not _has_view(normalized)
        )
    ):
        # Nothing but the row, its audit and its event to write: one write, all or nothing
        # (on PostgreSQL one statement outside a transaction: one round trip, issue 28).
        call.ui_resource = app_resource or call.ui_resource
        audit = audit_row(**_result_audit(call, normalized, latency_ms, assets=[]))
        event = thread_event(
            thread_id=call.thread_id, kind="toolcall", payload=call_payload(call, approval=approval)
        )
        # Only a running call finishes: a cancellation recorded first (by a member, from
        # any process) stands, and the late result is dropped.
        running = Guard(call, tuple(FINISH_FIELDS), only_if={"status": "running"})
        if write_together(guard=running, inserts=[audit, event], numbered=numbering(event)):
            announce(event)
        return call
    with transaction.atomic():
        limit_server_staging(server_id=call.server_id, result=sanitized)
        assets = _create_assets(call, sanitized["parts"])
        call.ui_resource = (
            app_resource
            or (call.ui_resource if call.ui_resource_id is not None else None)
            or _view_resource_for(call, normalized, tool)
        )
        if not update_row(call, FINISH_FIELDS, only_if={"status": "running"}):
            transaction.set_rollback(True)  # nor its media
            return call
        record(**_result_audit(call, normalized, latency_ms, assets=assets))
        if fresh:
            call_emit(call, approval=approval)
        else:
            call_emit(call, reread=True)
        for asset in assets:
            transaction.on_commit(functools.partial(_enqueue_persist, asset.pk))
    return call


def _set_outcome(
    call: ToolCall, sanitized: dict[str, Any], normalized: NormalizedResult, latency_ms: float
) -> None:
    call.result = sanitized
    call.status = ToolCallStatus.ERROR if normalized.is_error else ToolCallStatus.SUCCESS
    if normalized.is_error:
        call.error = {
            "code": "tool_returned_error",
            "message": "The tool reported an error (see its result).",
        }
    call.finished_at = timezone.now()
    call.latency_ms = latency_ms


def _has_view(normalized: NormalizedResult) -> bool:
    """The result embeds a UI part (legacy forms): its document is stored with the result."""
    return any(part.get("type") == "ui" for part in normalized.parts)


def _result_audit(
    call: ToolCall, normalized: NormalizedResult, latency_ms: float, *, assets: list[MediaAsset]
) -> dict[str, Any]:
    """The audit fields (``audit.writer.record``) of a call's result."""
    result = call.result if isinstance(call.result, dict) else {}
    return {
        "event_type": AuditEventType.TOOL_CALL_COMPLETED
        if not normalized.is_error
        else AuditEventType.TOOL_CALL_FAILED,
        "decision": Decision.ALLOWED if not normalized.is_error else Decision.FAILED,
        **_call_audit_scope(call),
        "action": "tool_result",
        "reason": "is_error" if normalized.is_error else "ok",
        "arguments": call.arguments,
        "latency_ms": latency_ms,
        "extra": {
            "tool_call_id": call.pk,
            "parts": len(result.get("parts") or []),
            "media": [a.pk for a in assets],
        },
    }


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
        call_emit(call, reread=True)
    return call


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
        call_emit(call)
    return call


ORPHANED_ERROR = {
    "code": "runner_lost",
    "message": "The server process running this call stopped; the call did not finish.",
}


def tool_call_fail_orphaned() -> int:
    """The beat sweep: fail every running call whose process died (chat.calls.runners),
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
