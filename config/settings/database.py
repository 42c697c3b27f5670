"""Database: SQLite under var/ by default, or DATABASE_URL (PostgreSQL in production)."""

import os

import dj_database_url

from .env import VAR_DIR, env_int, env_str

DATABASE_URL = env_str("DATABASE_URL", "")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        # Parameters bound by the server (psycopg's C dumpers instead of quoting every value
        # into the SQL text in Python), and a statement run 5 times on a connection is
        # prepared (Django turns psycopg's preparing off unless asked): PostgreSQL then
        # skips parsing and planning the same dozen statements of every tool call
        # (bench/README.md, issue 28). Behind a transaction-pooling PgBouncer older than
        # 1.21 set ATRIUM_PG_PREPARE=0 (prepared statements live in a server session).
        prepare = env_int("ATRIUM_PG_PREPARE", 5)
        DATABASES["default"].setdefault("OPTIONS", {}).update(
            server_side_binding=True, prepare_threshold=prepare if prepare > 0 else None
        )
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
