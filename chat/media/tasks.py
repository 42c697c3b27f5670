"""Celery tasks of tool media. Thin: primary keys in, services do the work (DESIGN §10).

Their Celery names are the ones they had in ``chat.tasks`` (``name=f"{NAME_PREFIX}…"``):
messages already queued and the beat schedule (config/settings/tasks.py) name tasks by
them. The worker imports this module through ``CELERY_IMPORTS`` (autodiscovery finds only
``chat.tasks``).

Delivery guarantees for staged media ("nothing lost", DESIGN §4):

- the request path enqueues ``persist_tool_media`` on commit; with no worker running the
  message waits in the broker (the filesystem broker keeps it on disk);
- ``acks_late`` + ``reject_on_worker_lost``: a prefork child that dies mid-task gets its
  message redelivered;
- a worker that dies as a whole (SIGKILL, OOM) may take its unacknowledged message with it
  (the filesystem transport has already removed the file; Redis restores it only after the
  visibility timeout), so every worker re-enqueues all still-``staged`` assets when it starts
  (:func:`requeue_staged_media_on_start`), and ``manage.py requeue_media`` does the same
  on demand — the task is idempotent, duplicates are no-ops;
- each run counts in ``MediaAsset.attempts`` before doing any work, so an asset that keeps
  killing workers is rejected after ``services.MAX_ATTEMPTS`` runs.

Time limits are enforced by the prefork pool only (``make run`` uses ``--pool=solo``).
Events a worker stores reach every socket like any process's (docs/fleet.md).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_ready
from django.db import InterfaceError, OperationalError

from . import attachments, selectors, services, storage
from .formats import TransientMediaError

log = logging.getLogger(__name__)

NAME_PREFIX = "chat.tasks."  # where they lived first; queued messages name them so
SOFT_TIME_LIMIT = 120  # seconds; a 200 MB file takes a few seconds on a local disk
TIME_LIMIT = 150
MAX_RETRIES = 5
TRANSIENT_ERRORS = (
    TransientMediaError,
    OperationalError,
    InterfaceError,
    OSError,  # storage writes; Pillow's errors are turned into rejections before this
    SoftTimeLimitExceeded,
)


@shared_task(
    name=f"{NAME_PREFIX}persist_tool_media",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=TRANSIENT_ERRORS,
    max_retries=MAX_RETRIES,
    retry_backoff=True,  # 1, 2, 4, 8, 16 s (with jitter)
    retry_backoff_max=300,
    retry_jitter=True,
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
    ignore_result=True,
)
def persist_tool_media(self: Any, asset_id: int) -> str:
    """Verify, store and thumbnail one staged media asset; idempotent."""
    final = self.request.retries >= MAX_RETRIES
    return services.media_asset_persist(asset_id=int(asset_id), final_attempt=final)


def requeue_staged(*, older_than: float, limit: int | None = None) -> list[int]:
    """Enqueue ``persist_tool_media`` for every staged asset older than ``older_than`` s."""
    ids = selectors.staged_asset_ids(older_than=older_than, limit=limit)
    for asset_id in ids:
        persist_tool_media.delay(asset_id)
    return ids


# ----------------------------------------------------------------- periodic (celery beat)
# Scheduled in settings (CELERY_BEAT_SCHEDULE); idempotent: a late or doubled run is a no-op.

STALE_STAGED_AFTER = 300.0  # seconds; a healthy worker persists media long before


@shared_task(name=f"{NAME_PREFIX}requeue_stale_staged_media", ignore_result=True)
def requeue_stale_staged_media() -> int:
    """Staged media no worker finished (its message lost with a dead worker) is retried."""
    return len(requeue_staged(older_than=STALE_STAGED_AFTER))


ORPHAN_STAGING_AFTER = 3600.0  # seconds; far past any transaction or persisting run


@shared_task(name=f"{NAME_PREFIX}sweep_orphan_staging", ignore_result=True)
def sweep_orphan_staging() -> int:
    """Staging and spool files nobody will persist (a failed transaction, a dropped line,
    a killed worker's copy) are removed; files only, so nothing is audited."""
    return storage.sweep_orphan_staging(older_than=ORPHAN_STAGING_AFTER)


@shared_task(name=f"{NAME_PREFIX}expire_attachments", ignore_result=True)
def expire_attachments() -> int:
    """Files members attached, past their workspace's retention (and uploads never sent
    with a message after a day) are deleted, each deletion audited; then staging
    left-overs of cut-off uploads go with the orphan sweep."""
    return attachments.attachments_expire()


# ----------------------------------------------------------------------------- signals


@worker_ready.connect
def requeue_staged_media_on_start(**_: Any) -> None:
    """Recover messages a crashed worker took with it (duplicates are harmless no-ops)."""
    try:
        ids = requeue_staged(older_than=0)
    except Exception:  # never keep a worker from starting
        log.exception("could not re-enqueue staged media on worker start")
        return
    if ids:
        log.info("re-enqueued %d staged media asset(s) on worker start", len(ids))
