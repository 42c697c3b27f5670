"""Staging of tool-result media on the request path (DESIGN §4, stage 1 of 3).

``normalize_result`` runs the normalizer for a tool call. It hands each payload that is
not inlined to ``stage_payload``, which writes it to staging and keeps no copy; the tool
call's transaction then creates `MediaAsset` rows (status `staged`) and, on commit,
enqueues `persist_tool_media` for each.

What the request path does with a payload (DESIGN §9: the placeholder in under 200 ms,
the web server's memory growth within 16 MiB for a 50 MB video):

- spooled by the stdio transport (a long base64 literal written to
  ``MEDIA_STAGING_ROOT/incoming/`` as it arrived; the result holds a marker that only
  ``mcp_bridge.spooled_media.claim`` resolves, once): the file is *renamed* into staging as
  ``<key>.b64`` — never read, decoded or rewritten here. A spooled payload small enough to
  decode (below) is read back and takes that path instead;
- up to ``DEFER_DECODE_OVER`` (1 MiB) decoded: decoded once here (invalid base64 is an
  error part at once); inlined as a ``data:`` URI if small enough — after the same type
  checks the worker makes (``images.inline_rejection``) — else staged as bytes;
- larger, from another transport (HTTP): staged as its base64 text, not decoded
  (``<key>.b64``, written in slices). The placeholder still shows kind, type and size (from
  the text's length and padding). The worker decodes strictly, checks the size, and
  rejects invalid base64 with a reason (``processing.decode_base64_file``).

Totals: one result stages at most ``ATRIUM_MEDIA_MAX_STAGED_PER_RESULT`` decoded bytes (the
normalizer's ``max_staged_total``), and one server at most
``ATRIUM_MEDIA_MAX_STAGED_PER_SERVER_DAY`` in any 24 hours: ``limit_server_staging`` counts
the server's `MediaAsset` rows in the transaction that records new ones, with the server's
row locked, so the total holds across processes. A payload past either total is an error
part (its staging file deleted); the rest of the result is kept.

Durability: the file is written (to the page cache) before the transaction that records
it commits, so a crash of this process after the commit loses nothing. The ``fsync`` is
not on the hot path: a background thread syncs each file right after it is written (on a
busy disk an fsync of 67 MB takes 100+ ms). Only a power loss inside that window can leave
a staged file short; the worker then finds a size mismatch (or invalid base64) and rejects
the media with a reason instead of storing something broken. (The embedded profile's
SQLite runs ``synchronous=NORMAL``: its own last commits have the same exposure.)
"""

from __future__ import annotations

import functools
import logging
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from mcp_bridge.models import McpServer
from mcp_bridge.normalize import (
    MediaKind,
    NormalizedResult,
    StagedPayload,
    error_part,
    normalize_tool_result,
)
from mcp_bridge.normalize.limits import human_size
from mcp_bridge.spooled_media import claim

from . import storage
from .formats import MEDIA_KINDS
from .images import inline_rejection
from .models import MediaAsset

log = logging.getLogger(__name__)

DEFER_DECODE_OVER = 1024 * 1024  # decoded bytes; larger payloads are staged as base64
ENCODED_SUFFIX = ".b64"
# Base64 text is written in slices of this many characters. Small on purpose: each slice is
# copied twice (slice, encode), and small copies reuse warm heap memory where MiB-sized
# ones fault in fresh pages (bench/README.md, "Performance changes").
_WRITE_CHARS = 64 * 1024
_syncer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="atrium-staging-fsync")


def staging_root() -> Path:
    root = Path(settings.MEDIA_STAGING_ROOT)
    root.mkdir(parents=True, exist_ok=True)
    return root


def normalize_result(raw: Any) -> NormalizedResult:
    """``normalize_tool_result`` with staging, inline checks and the configured limits.

    Blocking (file writes, Pillow): call it from a plain thread (``asyncio.to_thread``),
    not on the event loop and not on the database thread.
    """
    return normalize_tool_result(
        raw,
        stage=stage_payload,
        check_inline=check_inline,
        inline_limit=settings.ATRIUM_MEDIA_INLINE_LIMIT,
        max_binary=settings.ATRIUM_MEDIA_MAX_BYTES,
        defer_decode_over=DEFER_DECODE_OVER,
        max_structured=settings.ATRIUM_RESULT_MAX_STRUCTURED_BYTES,
        max_meta=settings.ATRIUM_RESULT_MAX_META_BYTES,
        max_staged_total=settings.ATRIUM_MEDIA_MAX_STAGED_PER_RESULT,
        claim_spooled=claim,
    )


def check_inline(kind: MediaKind, mime: str, data: bytes) -> str | None:
    """The worker's type checks, for a payload small enough to be inlined."""

    return inline_rejection(kind=kind, declared=mime, data=data)


def stage_payload(payload: StagedPayload) -> dict[str, Any]:
    """Write the payload to a staging file and describe it (the fsync follows in the
    background: see the module docstring)."""
    key = uuid.uuid4().hex
    if payload.encoded is not None or payload.spooled is not None:
        key += ENCODED_SUFFIX
    path = staging_root() / key
    if payload.spooled is not None:
        try:  # the transport's file becomes the staging file: renamed, never rewritten
            os.rename(payload.spooled.path, path)
        except BaseException:
            payload.spooled.discard()
            raise
        _syncer.submit(_sync, path)
        return _descriptor(key, payload)
    try:
        with open(path, "wb", buffering=0) as handle:
            if payload.encoded is not None:
                _write_text(handle, payload.encoded)
            else:
                handle.write(payload.data or b"")
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    _syncer.submit(_sync, path)
    return _descriptor(key, payload)


def _descriptor(key: str, payload: StagedPayload) -> dict[str, Any]:
    return {
        "stagingKey": key,
        "status": "staged",
        "size": payload.size,
        "kind": payload.kind,
        "declaredMime": payload.mime_type,
        "filename": payload.filename,
    }


def _write_text(handle: Any, text: str) -> None:
    """ASCII text to a binary file in slices: never a whole-size encoded copy."""
    for start in range(0, len(text), _WRITE_CHARS):
        handle.write(text[start : start + _WRITE_CHARS].encode("ascii"))


def _sync(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return  # already persisted and removed by the worker
    except OSError:
        log.warning("could not open staged media %s to sync it", path.name, exc_info=True)
        return
    try:
        os.fsync(fd)
    except OSError:
        log.warning("could not sync staged media %s", path.name, exc_info=True)
    finally:
        os.close(fd)
    try:  # and its directory entry
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def staged_parts(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Parts whose payload waits in staging (they carry an `asset.stagingKey`)."""
    return [p for p in parts if isinstance(p.get("asset"), dict) and p["asset"].get("stagingKey")]


STAGING_WINDOW = timedelta(days=1)


def server_staged_bytes(*, server_id: int, since: Any) -> int:
    """Decoded media bytes the server's tool results staged since ``since``."""
    total = MediaAsset.objects.filter(
        tool_call__server_id=server_id, created_at__gte=since
    ).aggregate(total=Sum("size"))["total"]
    return int(total or 0)


def limit_server_staging(*, server_id: int, result: dict[str, Any]) -> int:
    """Inside the transaction that records a result's staged media (before its `MediaAsset`
    rows exist): a staged part past the server's total for the last 24 hours
    (``ATRIUM_MEDIA_MAX_STAGED_PER_SERVER_DAY``) becomes a ``staged_media_daily_limit``
    error part in place, its ``resources`` entry goes and its staging file is deleted once
    the transaction commits. Locks the server row, so concurrent results of one server (in
    any process) count one after the other. Returns how many parts were refused."""
    parts = result.get("parts")
    if not isinstance(parts, list):
        return 0
    staged = staged_parts(parts)
    if not staged:
        return 0
    list(McpServer.objects.select_for_update().filter(pk=server_id).values_list("pk"))
    limit = int(settings.ATRIUM_MEDIA_MAX_STAGED_PER_SERVER_DAY)
    used = server_staged_bytes(server_id=server_id, since=timezone.now() - STAGING_WINDOW)
    media_parts = [p for p in parts if isinstance(p, dict) and p.get("type") in ("image", "file")]
    resources = [
        r
        for r in result.get("resources") or []
        if isinstance(r, dict) and r.get("kind") in MEDIA_KINDS
    ]
    # Media parts and media resources are emitted pairwise, in the same order.
    paired = len(resources) == len(media_parts)
    refused_resources: list[int] = []
    refused = 0
    for part in staged:
        size = int(part["asset"].get("size") or 0)
        if used + size <= limit:
            used += size
            continue
        refused += 1
        staging = storage.staging_file(str(part["asset"]["stagingKey"]))
        transaction.on_commit(functools.partial(storage.remove_staging_file, staging))
        if paired:
            index = next(i for i, p in enumerate(media_parts) if p is part)
            refused_resources.append(id(resources[index]))
        label = part.get("filename") or part.get("mimeType") or "A media file"
        part.clear()
        part.update(
            error_part(
                "staged_media_daily_limit",
                f"{label} ({human_size(size)}) was not stored: this server's tool results "
                f"have reached the {human_size(limit)} limit of media per day.",
            )
        )
    if refused_resources:
        result["resources"] = [
            r for r in result.get("resources") or [] if id(r) not in refused_resources
        ]
    return refused
