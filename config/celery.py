"""The Celery app: filesystem broker (embedded) or CELERY_BROKER_URL (production)."""

import os
from pathlib import Path

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("atrium")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def ensure_broker_folders() -> None:
    """The filesystem transport does not create its folders itself."""
    from django.conf import settings

    for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
        folder = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get(key)
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
