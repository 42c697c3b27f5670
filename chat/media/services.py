"""Media asset services (DESIGN §4, stage 2 of 3): the worker's state changes.

``media_asset_persist`` is what ``chat.tasks.persist_tool_media`` runs for one staged asset:

1. counts the run (``attempts`` + 1, committed first, so a crash loop ends in a rejection),
2. hashes the staging file in one streaming pass (sha256, size, the first bytes); a base64
   staging file is decoded strictly in the same pass (into ``<key>.decoded``), and must
   decode to the size the request path recorded (``chat.media.processing``),
3. verifies the content against the declared MIME type (``chat.media.formats``; Pillow for
   images, ``chat.media.images``),
4. stores it content-addressed in Django's default storage (``chat.media.storage``),
5. derives a thumbnail and a poster, and hints (width, height, duration),
6. records the asset ``ready`` or ``rejected`` (with a reason a person can read), audits it,
   rewrites the tool call's stored result part (and its ``resources`` entry) and emits
   ``media`` + ``toolcall`` events — all in one transaction — and, once that commits,
   deletes the staging file.

Memory stays bounded: files are read in 1 MiB chunks (base64 in 4 MiB), never whole; the
only full decodes are images (at most ``MAX_IMAGE_PIXELS``) and one video frame.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from audit.types import AuditEventType, Decision
from audit.writer import record

from ..models import Message, ToolCall
from ..presenters import serialize_message, serialize_tool_call
from ..realtime.events import emit
from ..selectors import tool_calls_queryset
from . import storage
from .formats import MEDIA_KINDS, MediaRejected, TransientMediaError
from .models import MediaAsset, MediaOrigin, MediaStatus
from .presenters import asset_descriptor
from .processing import (
    DECODED_SUFFIX,
    ENCODED_SUFFIX,
    ProcessedMedia,
    decode_base64_file,
    process_staged_file,
    too_large_reason,
)

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 10  # runs of one asset (retries, redeliveries, requeues) before rejection


def media_event(asset: MediaAsset) -> dict[str, Any]:
    return {**asset_descriptor(asset), "toolCallId": asset.tool_call_id}


def emit_message_of(message_id: int) -> None:
    """A ``message`` event with the message as it is now (inside the caller's transaction)."""
    message = Message.objects.select_related("author").filter(pk=message_id).first()
    if message is not None:
        emit(thread_id=message.thread_id, kind="message", payload=serialize_message(message))


def _apply_to_result(result: Any, asset_id: int, descriptor: dict[str, Any]) -> bool:
    """Rewrite the part that references the asset (and its ``resources`` entry) in place."""
    if not isinstance(result, dict) or not isinstance(result.get("parts"), list):
        return False
    media_parts = [
        p for p in result["parts"] if isinstance(p, dict) and p.get("type") in ("image", "file")
    ]
    resources = [
        r
        for r in result.get("resources") or []
        if isinstance(r, dict) and r.get("kind") in MEDIA_KINDS
    ]
    for index, part in enumerate(media_parts):
        current = part.get("asset")
        if not isinstance(current, dict) or current.get("id") != asset_id:
            continue
        part["asset"] = descriptor
        # Media parts and media resources are emitted pairwise, in the same order.
        if index < len(resources) and len(resources) == len(media_parts):
            resource = resources[index]
            resource["status"] = descriptor["status"]
            for key in ("width", "height", "duration"):
                if descriptor[key] is not None:
                    resource[key] = descriptor[key]
            if resource.get("uri") is None and descriptor["url"]:
                resource["uri"] = descriptor["url"]
        return True
    return False


def media_asset_record_outcome(
    *, asset_id: int, processed: ProcessedMedia | None, reason: str = "", sha256: str = ""
) -> str:
    """Record the outcome, update the stored result, audit and emit — one transaction."""
    with transaction.atomic():
        asset = (
            MediaAsset.objects.select_for_update()
            .select_related("thread")
            .filter(pk=asset_id)
            .first()
        )
        if asset is None or asset.status != MediaStatus.STAGED:
            return "skipped"  # deleted, or a concurrent run got there first
        staging = storage.staging_file(asset.staging_path)
        if processed is not None:
            asset.status = MediaStatus.READY
            asset.sha256 = processed.sha256
            asset.size = processed.size
            asset.storage_path = processed.storage_path
            asset.thumbnail_path = processed.thumbnail_path
            asset.poster_path = processed.poster_path
            asset.width = processed.width
            asset.height = processed.height
            asset.duration = processed.duration
            asset.text_path = processed.text_path
            asset.text_truncated = processed.text_truncated
            asset.pages = processed.pages
            asset.ready_at = timezone.now()
        else:
            asset.status = MediaStatus.REJECTED
            asset.reason = reason[:300]
            asset.sha256 = sha256 or asset.sha256
        asset.save()
        call = (
            ToolCall.objects.select_for_update().filter(pk=asset.tool_call_id).first()
            if asset.tool_call_id
            else None
        )
        record(
            event_type=AuditEventType.MEDIA_READY if processed else AuditEventType.MEDIA_REJECTED,
            decision=Decision.ALLOWED if processed else Decision.DENIED,
            actor_kind="system",
            actor_label="media worker",
            workspace_id=asset.thread.workspace_id,
            thread_id=asset.thread_id,
            binding_id=call.binding_id if call else None,
            server_id=call.server_id if call else None,
            tool_name=call.tool_name if call else "",
            action="persist_media",
            reason="ready" if processed else reason,
            extra={
                "asset_id": asset.pk,
                "tool_call_id": asset.tool_call_id,
                "kind": asset.kind,
                "declared_mime": asset.mime_type,
                "sha256": asset.sha256,
                "size": asset.size,
                "attempts": asset.attempts,
                "reason": reason or None,
            },
        )
        descriptor = asset_descriptor(asset)
        if call is not None and _apply_to_result(call.result, asset.pk, descriptor):
            call.save(update_fields=["result"])
        emit(thread_id=asset.thread_id, kind="media", payload=media_event(asset))
        if asset.message_id is not None:  # a member's attachment: its message, re-rendered
            emit_message_of(asset.message_id)
        if call is not None:
            fresh = tool_calls_queryset().get(pk=call.pk)
            emit(thread_id=asset.thread_id, kind="toolcall", payload=serialize_tool_call(fresh))
        transaction.on_commit(lambda: storage.remove_staging_file(staging))
    return str(asset.status)


def media_asset_count_attempt(*, asset_id: int) -> MediaAsset | None:
    """Count this run (committed before any work), or None when there is nothing to do."""
    with transaction.atomic():
        asset = MediaAsset.objects.select_for_update().filter(pk=asset_id).first()
        if asset is None:
            return None
        if asset.status != MediaStatus.STAGED:
            staging = storage.staging_file(asset.staging_path)
            transaction.on_commit(
                lambda: storage.remove_staging_file(staging)
            )  # a leftover, if any
            return None
        asset.attempts += 1
        asset.save(update_fields=["attempts"])
    return asset


def media_asset_persist(*, asset_id: int, final_attempt: bool = False) -> str:
    """Persist one staged asset. Idempotent: a ready or rejected asset is left alone.

    Returns ``ready``, ``rejected`` or ``skipped``. Raises TransientMediaError (or a
    database/storage OSError) when a retry may succeed.
    """
    asset = media_asset_count_attempt(asset_id=asset_id)
    if asset is None:
        return "skipped"
    if asset.attempts > MAX_ATTEMPTS:
        return media_asset_record_outcome(
            asset_id=asset_id,
            processed=None,
            reason=f"The media could not be processed after {MAX_ATTEMPTS} attempts.",
        )
    path = storage.staging_file(asset.staging_path)
    if path is None:
        return media_asset_record_outcome(
            asset_id=asset_id, processed=None, reason="The media has no valid staging file."
        )
    if not path.exists():
        if final_attempt:
            return media_asset_record_outcome(
                asset_id=asset_id,
                processed=None,
                reason="The staged file is no longer available, so the media could not be stored.",
            )
        raise TransientMediaError(f"staging file {path.name} of asset {asset_id} is missing")
    max_bytes = int(settings.ATRIUM_MEDIA_MAX_BYTES)
    decoded = (
        path.with_name(path.name + DECODED_SUFFIX) if path.name.endswith(ENCODED_SUFFIX) else None
    )
    try:
        staged = None
        if decoded is not None:
            if asset.size > max_bytes:
                raise MediaRejected(too_large_reason(asset.size, max_bytes))
            staged = decode_base64_file(path, decoded, expected_size=asset.size or None)
        processed = process_staged_file(
            decoded or path,
            kind=asset.kind if asset.kind in MEDIA_KINDS else "binary",
            declared_mime=asset.mime_type,
            max_bytes=max_bytes,
            store=storage.store_in_default_storage,
            staged=staged,
            expected_size=asset.size or None,
            text_budget=(
                int(settings.ATRIUM_ATTACH_TEXT_BUDGET)
                if asset.origin in (MediaOrigin.ATTACHMENT, MediaOrigin.APP_UPLOAD)
                else 0
            ),
        )
    except MediaRejected as exc:
        log.info("media %s rejected: %s", asset_id, exc.reason)
        return media_asset_record_outcome(asset_id=asset_id, processed=None, reason=exc.reason)
    finally:
        storage.remove_staging_file(decoded)
    log.info(
        "media %s stored as %s (%s bytes) in %s",
        asset_id,
        processed.sha256,
        processed.size,
        type(default_storage).__name__,
    )
    return media_asset_record_outcome(asset_id=asset_id, processed=processed)
