"""Celery: filesystem broker under var/celery/ by default, CELERY_BROKER_URL otherwise."""

from .env import VAR_DIR, env_str

CELERY_DATA_DIR = VAR_DIR / "celery"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL == "filesystem://":
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_DATA_DIR / "queue"),
        "data_folder_out": str(CELERY_DATA_DIR / "queue"),
        "processed_folder": str(CELERY_DATA_DIR / "processed"),
        "control_folder": str(CELERY_DATA_DIR / "control"),
        "store_processed": False,
        "polling_interval": 0.2,
    }
    # The filesystem transport does not create its folders itself.
    for _folder in ("queue", "processed", "control"):
        (CELERY_DATA_DIR / _folder).mkdir(parents=True, exist_ok=True)
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {}
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = 300
CELERY_TASK_SOFT_TIME_LIMIT = 240
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
