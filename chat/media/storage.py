"""Where media files live: staging files (by key) and Django's default storage.

Staging (``MEDIA_STAGING_ROOT``) holds what the request path handed over: ``<key>`` (decoded
bytes) or ``<key>.b64`` (base64 text, usually a stdio transport's spool file renamed into
place), the worker's ``<key>.b64.decoded`` while it works, and the transport's spool
directory ``incoming/`` (``mcp_bridge.spooled_media``). Persisted media is content-addressed
in the default storage (``sha256/ab/cd/<sha256>``).
"""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from mcp_bridge.spooled_media import SPOOL_SUBDIR

from .models import MediaAsset, MediaStatus

log = logging.getLogger(__name__)

_STAGING_KEY_RE = re.compile(r"^[0-9a-f]{32}(\.b64)?$")
_WORK_FILE_RE = re.compile(r"^[0-9a-f]{32}\.b64\.decoded$")
_SPOOL_FILE_RE = re.compile(r"^[0-9a-f]{32}\.part$")
# Staging files younger than this are never swept: their tool call's transaction may still
# be about to record them (a spool file's age counts from its last write).
MIN_ORPHAN_AGE = 600.0


def staging_file(key: str) -> Path | None:
    """The staging file of a key, or None for anything that is not a key we handed out."""
    if not _STAGING_KEY_RE.match(key or ""):
        return None
    return Path(settings.MEDIA_STAGING_ROOT) / key


def store_in_default_storage(
    name: str, *, path: Path | None = None, data: bytes | None = None, size: int
) -> str:
    """Content-addressed write: reuse an existing file of the same name and size."""
    if default_storage.exists(name):
        if default_storage.size(name) == size:
            return name
        default_storage.delete(name)  # a torn earlier write: replace it
    if path is not None:
        with open(path, "rb") as handle:
            saved = default_storage.save(name, File(handle, name=os.path.basename(name)))
    else:
        saved = default_storage.save(name, ContentFile(data or b""))
    if saved != name:
        # Another worker stored the same digest meanwhile; the content is identical.
        default_storage.delete(saved)
    return name


def remove_staging_file(path: Path | None) -> None:
    if path is None:
        return
    try:
        path.unlink(missing_ok=True)
    except OSError:
        log.warning("could not delete staging file %s", path, exc_info=True)


def sweep_orphan_staging(*, older_than: float) -> int:
    """Remove staging files nobody will persist; how many went.

    Swept, once unmodified for ``older_than`` seconds (at least :data:`MIN_ORPHAN_AGE`):
    spool files the stdio transport wrote and nobody claimed (a call cancelled after its
    result arrived, a line dropped), staging files no ``staged`` asset names (the tool
    call's transaction failed, or an asset finished and its file outlived it), and a
    worker's decoded copies left by a killed run. Plain function, for a periodic task."""
    root = Path(settings.MEDIA_STAGING_ROOT)
    cutoff = time.time() - max(older_than, MIN_ORPHAN_AGE)
    candidates = [
        path
        for folder, pattern in ((root / SPOOL_SUBDIR, _SPOOL_FILE_RE), (root, None))
        for path in _old_files(folder, cutoff)
        if (pattern or _STAGING_KEY_RE).match(path.name) or _WORK_FILE_RE.match(path.name)
    ]
    keys = [
        path.name for path in candidates if path.parent == root and _STAGING_KEY_RE.match(path.name)
    ]
    waiting = set(
        MediaAsset.objects.filter(status=MediaStatus.STAGED, staging_path__in=keys).values_list(
            "staging_path", flat=True
        )
    )
    removed = 0
    for path in candidates:
        if path.parent == root and path.name in waiting:
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError:
            log.warning("could not remove orphan staging file %s", path, exc_info=True)
            continue
        removed += 1
    if removed:
        log.info("removed %d orphan staging file(s)", removed)
    return removed


def _old_files(folder: Path, cutoff: float) -> list[Path]:
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return []
    old = []
    for entry in entries:
        try:
            if entry.is_file(follow_symlinks=False) and entry.stat().st_mtime < cutoff:
                old.append(Path(entry.path))
        except FileNotFoundError:
            continue
    return old
