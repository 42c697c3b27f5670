"""Celery: filesystem broker under var/celery/ by default, CELERY_BROKER_URL otherwise."""

from .env import VAR_DIR, env_int, env_str

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
    # Redis keeps a delivered, unacknowledged message (acks late) for this long before
    # another worker may take it: a worker killed mid-task (SIGKILL, OOM) has its task
    # finished by another one after that. Longer than the longest task (TIME_LIMIT in
    # chat/media/tasks.py, 150 s), or a slow task would run twice (tasks are idempotent).
    _visibility = env_int("ATRIUM_BROKER_VISIBILITY_TIMEOUT", 600)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": _visibility,
        # Every worker looks for abandoned messages this often (kombu's Redis transport).
        "unacked_restore_interval": max(1, min(10, _visibility // 2)),
        "unacked_restore_throttle": 1,
    }
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
# Autodiscovery imports each app's `tasks` module (chat.tasks: the beat sweeps); task
# modules of sub-packages are named here. The media tasks keep their first names
# ("chat.tasks.…", queued messages and the schedule below use them).
CELERY_IMPORTS = ["chat.media.tasks", "chat.calls.task_jobs"]

# Celery beat (a process of its own: `make run`, the fleet) runs the periodic sweeps; each
# task is idempotent, so a second beat or a late run does no harm.
ATRIUM_SWEEP_INTERVAL = env_int("ATRIUM_SWEEP_INTERVAL", 15)  # seconds
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celery-beat-schedule")  # VAR_DIR exists
CELERY_BEAT_SCHEDULE = {
    "expire-approvals": {
        "task": "chat.tasks.expire_approvals",
        "schedule": float(ATRIUM_SWEEP_INTERVAL),
    },
    "expire-server-requests": {
        "task": "chat.tasks.expire_server_requests",
        "schedule": float(ATRIUM_SWEEP_INTERVAL),
    },
    "reap-turn-leases": {
        "task": "chat.tasks.reap_turn_leases",
        "schedule": float(ATRIUM_SWEEP_INTERVAL),
    },
    "fail-orphaned-tool-calls": {
        "task": "chat.tasks.fail_orphaned_tool_calls",
        "schedule": float(ATRIUM_SWEEP_INTERVAL),
    },
    "requeue-tool-call-tasks": {
        "task": "chat.calls.task_jobs.requeue_tool_call_tasks",
        "schedule": float(ATRIUM_SWEEP_INTERVAL),
    },
    "requeue-stale-staged-media": {
        "task": "chat.tasks.requeue_stale_staged_media",
        "schedule": 300.0,
    },
    "sweep-orphan-staging": {
        "task": "chat.tasks.sweep_orphan_staging",
        "schedule": 900.0,
    },
    "expire-attachments": {  # files past their workspace's retention (docs/files.md)
        "task": "chat.tasks.expire_attachments",
        "schedule": 3600.0,
    },
}
