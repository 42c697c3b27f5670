"""Production profile in several pytest-xdist workers: a Redis of each worker's own.

The suite's channel layer and rate buckets (``REDIS_URL``), and the databases tests/live.py
and ``isolated_redis_env`` hand out by number, are fixed database numbers of one Redis. Two
workers on the machine's Redis would share groups ("thread.1" is a different thread in each
worker's test database), buckets and Celery queues. So each worker starts a redis-server of
its own and keeps the database numbers. PostgreSQL needs nothing of the kind: pytest-django
gives each worker its own test database (``test_atrium_gw0``...) and live servers name
theirs by process id (tests/live.py).
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings


def needs_own_redis(environ: os._Environ[str] | dict[str, str]) -> bool:
    """A worker of a parallel run (``PYTEST_XDIST_WORKER``) under the production profile."""
    return bool(
        environ.get("ATRIUM_PROFILE") == "production"
        and environ.get("PYTEST_XDIST_WORKER")
        and environ.get("REDIS_URL")
    )


def moved_to(url: str, address: str) -> str:
    """``url`` (redis://host:port/db) on another server, database number kept."""
    return urlunsplit(urlsplit(url)._replace(netloc=address))


def use_own_redis() -> None:
    """Start this worker's redis-server and point the settings and the environment (read
    by the live servers the tests start) at it. Called when the conftest is imported:
    after Django read its settings, before anything opened a Redis connection."""
    if not needs_own_redis(os.environ):
        return
    from tests.resilience.support import PrivateRedis

    workdir = Path(tempfile.mkdtemp(prefix=f"atrium-redis-{os.environ['PYTEST_XDIST_WORKER']}-"))
    redis = PrivateRedis(workdir).start()

    def stop() -> None:
        # At exit a channel layer's receive task may still run in a leftover loop thread; with
        # its Redis gone it would log the closed connection as an error, into a closed stream.
        logging.getLogger("channels_redis.pubsub").disabled = True
        redis.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    atexit.register(stop)
    address = f"127.0.0.1:{redis.port}"
    for name in ("REDIS_URL", "CELERY_BROKER_URL"):
        if os.environ.get(name, "").startswith("redis://"):
            os.environ[name] = moved_to(os.environ[name], address)
    settings.REDIS_URL = os.environ["REDIS_URL"]
    settings.CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", settings.CELERY_BROKER_URL)
    settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"] = [settings.REDIS_URL]
