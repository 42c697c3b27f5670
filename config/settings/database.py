"""Database: SQLite under var/ by default, or DATABASE_URL (PostgreSQL in production)."""

import os

import dj_database_url

from .env import VAR_DIR, env_str

DATABASE_URL = env_str("DATABASE_URL", "")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(VAR_DIR / "atrium.sqlite3"),
            # WAL + a busy timeout let the web server and the Celery worker share the file.
            "OPTIONS": {
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
            # Keep the connection: closing the last connection of a WAL database checkpoints
            # it, and every `database_sync_to_async` call would otherwise close and reopen
            # (re-running the PRAGMAs). Measured: UI tools/call p50 74 ms -> see bench/README.md.
            "CONN_MAX_AGE": None,
            "CONN_HEALTH_CHECKS": True,
            # One file per test process, so parallel runs never share (or delete) each other's.
            "TEST": {"NAME": str(VAR_DIR / f"test-atrium-{os.getpid()}.sqlite3")},
        }
    }
