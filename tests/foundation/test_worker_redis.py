"""Parallel production runs give each pytest-xdist worker a Redis of its own
(tests/worker_redis.py): two workers on one Redis shared channel-layer groups, rate buckets
and Celery queues by database number."""

from __future__ import annotations

import os

import pytest
import redis
from django.conf import settings

from tests.worker_redis import moved_to, needs_own_redis


def test_a_url_moves_to_another_server_with_its_database_number():
    assert moved_to("redis://127.0.0.1:6379/7", "127.0.0.1:40001") == "redis://127.0.0.1:40001/7"
    assert moved_to("redis://127.0.0.1:6379", "127.0.0.1:40001") == "redis://127.0.0.1:40001"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        (
            {
                "ATRIUM_PROFILE": "production",
                "PYTEST_XDIST_WORKER": "gw1",
                "REDIS_URL": "redis://x/0",
            },
            True,
        ),
        ({"ATRIUM_PROFILE": "production", "REDIS_URL": "redis://x/0"}, False),  # one process
        ({"PYTEST_XDIST_WORKER": "gw0"}, False),  # embedded: no Redis at all
        ({"ATRIUM_PROFILE": "production", "PYTEST_XDIST_WORKER": "gw0"}, False),
    ],
)
def test_only_a_parallel_production_worker_needs_its_own_redis(environ, expected):
    assert needs_own_redis(environ) is expected


@pytest.mark.skipif(
    not needs_own_redis(os.environ), reason="a parallel run under the production profile only"
)
def test_this_worker_talks_to_a_redis_of_its_own():
    layer = settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"]
    assert layer == [settings.REDIS_URL] == [os.environ["REDIS_URL"]]
    assert ":6379/" not in settings.REDIS_URL  # not the machine's
    info = redis.Redis.from_url(settings.REDIS_URL).info("server")
    assert info["tcp_port"] != 6379
    assert os.environ["CELERY_BROKER_URL"].startswith(settings.REDIS_URL.rsplit("/", 1)[0] + "/")
