"""Reads of media assets (for the worker's recovery paths and ``manage.py requeue_media``)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from .models import MediaAsset, MediaStatus


def staged_asset_ids(*, older_than: float, limit: int | None = None) -> list[int]:
    """Staged assets created more than ``older_than`` seconds ago, oldest first."""
    cutoff = timezone.now() - timedelta(seconds=max(0.0, older_than))
    rows = MediaAsset.objects.filter(status=MediaStatus.STAGED, created_at__lte=cutoff)
    ids = rows.order_by("id").values_list("id", flat=True)
    return list(ids[:limit] if limit else ids)
