"""Shared fixtures: personas (owner, member, viewer, outsider; built with tests/factories.py),
the websocket helpers, one Chromium for the run, and the --repeat option for flake checks."""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from playwright.sync_api import sync_playwright

from tests import factories, live, waiting, worker_redis
from tests.live import CHROMIUM, CHROMIUM_ARGS

worker_redis.use_own_redis()  # production profile, parallel workers: see the module

# Live-server tests fork otherwise, and a forked child hangs after earlier async tests.
multiprocessing.set_start_method("spawn", force=True)


@pytest.fixture(scope="session", autouse=True)
def celery_publishes_in_memory():
    """In-process tests publish Celery messages (``persist_tool_media`` on commit) into an
    in-memory broker. With the settings' broker they would pile up, never consumed, in
    ``var/celery`` (embedded) or the developer's Redis (production). Tests that need a
    worker start one on this broker (tests/chat/test_media_tasks.py); live servers
    (tests/live.py) are separate processes with their own settings."""
    from kombu import pools

    from config.celery import app

    # Read/write URLs too: Celery prefers a CELERY_BROKER_URL environment variable (set
    # under scripts/with-production-services.sh) to broker_url, not to these.
    app.conf.update(
        broker_url="memory://",
        broker_read_url="memory://",
        broker_write_url="memory://",
        broker_transport_options={},
    )
    pools.reset()  # forget connections made with the settings' broker
    app._pool = None
    app.amqp._producer_pool = None
    yield app


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database, and before it is dropped: on PostgreSQL, end the
    sessions other threads left open (``database_sync_to_async`` keeps a connection per
    executor thread), or DROP DATABASE refuses ("is being accessed by other users")."""
    yield
    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@dataclass
class Personas:
    owner: Any
    member: Any
    viewer: Any
    outsider: Any
    workspace: Any
    thread: Any
    other_workspace: Any
    other_thread: Any

    def all(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "member": self.member,
            "viewer": self.viewer,
            "outsider": self.outsider,
        }


def make_user(username: str, *, staff: bool = False, password: str = factories.PASSWORD):
    """A person (``UserFactory``); with ``staff`` an admin."""
    hashed = factories.password_hash(password, tuple(settings.PASSWORD_HASHERS))
    return factories.UserFactory(username=username, staff=staff, password=hashed)


@pytest.fixture
def personas(db) -> Personas:
    owner = make_user("olivia")
    member = make_user("marco")
    viewer = make_user("vera")
    outsider = make_user("oscar")
    workspace = factories.WorkspaceFactory(name="Acme", owner=owner)
    factories.MembershipFactory(workspace=workspace, user=member, role="member")
    factories.MembershipFactory(workspace=workspace, user=viewer, role="viewer")
    thread = factories.ThreadFactory(workspace=workspace, title="Launch plan", actor=owner)
    other_workspace = factories.WorkspaceFactory(name="Globex", owner=outsider)
    other_thread = factories.ThreadFactory(
        workspace=other_workspace, title="Secret plans", actor=outsider
    )
    return Personas(
        owner=owner,
        member=member,
        viewer=viewer,
        outsider=outsider,
        workspace=workspace,
        thread=thread,
        other_workspace=other_workspace,
        other_thread=other_thread,
    )


APP_ORIGIN = "http://localhost:8000"


@pytest.fixture
def ws_connect():
    """Open a websocket to a thread as a user through the real ASGI application."""
    from channels.testing import WebsocketCommunicator

    from config.asgi import application

    opened: list[WebsocketCommunicator] = []

    async def connect(
        user: Any,
        thread_id: int,
        *,
        caps: str = "interactiveToolUi",
        after: int | None = None,
        origin: str = APP_ORIGIN,
        host: str = "localhost:8000",
    ):
        from channels.db import database_sync_to_async
        from django.test import Client

        headers = [(b"origin", origin.encode()), (b"host", host.encode())]
        if user is not None:
            client = Client()
            await database_sync_to_async(client.force_login)(user)
            cookie = f"sessionid={client.cookies['sessionid'].value}"
            headers.append((b"cookie", cookie.encode()))
        path = f"/ws/threads/{thread_id}/?caps={caps}"
        if after is not None:
            path += f"&after={after}"
        communicator = WebsocketCommunicator(application, path, headers=headers)
        opened.append(communicator)
        connected, code = await communicator.connect(timeout=5)
        return communicator, connected, code

    yield connect


ROOT_DIR = Path(__file__).resolve().parent.parent


@pytest.fixture
def board_server(personas, tmp_path):
    """The real `board` example over stdio, bound to the personas' workspace."""
    server = factories.McpServerFactory(
        name="Board",
        slug="board",
        command=sys.executable,
        args=[str(ROOT_DIR / "examples" / "board" / "server.py")],
        env={"BOARD_STATE_FILE": str(tmp_path / "board.json")},
    )
    binding = factories.AppBindingFactory(server=server, workspace=personas.workspace)
    # What an admin of a board does: a standing approval for the view's harmless writes
    # (audited as a policy change); deleting still asks.
    for tool in ("move_item", "add_item"):
        factories.ToolPolicyFactory(binding=binding, tool_name=tool, approval="auto")
    return server, binding


@pytest.fixture
def statements(monkeypatch) -> list[str]:
    """Every SQL statement sent through Django's cursors from now on (clear it to start
    counting at a point)."""
    from django.db.backends import utils

    seen: list[str] = []
    original = utils.CursorWrapper._execute_with_wrappers

    def recording(self, sql, params, many, executor):
        seen.append(sql)
        return original(self, sql, params, many, executor)

    monkeypatch.setattr(utils.CursorWrapper, "_execute_with_wrappers", recording)
    return seen


async def next_frame(communicator, predicate, limit: int | None = None, timeout: float = 30):
    """The next frame matching predicate (frames in between are dropped), within ``timeout``
    seconds in all; with ``limit``, among at most that many frames."""
    if limit is None:
        return await waiting.next_frame(communicator, predicate, timeout=timeout)
    seen = 0

    def within_limit(frame) -> bool:
        nonlocal seen
        seen += 1
        if predicate(frame):
            return True
        if seen >= limit:
            raise AssertionError(f"no matching frame among {limit}")
        return False

    return await waiting.next_frame(communicator, within_limit, timeout=timeout)


async def open_socket(ws_connect, user, thread, caps: str = "interactiveToolUi"):
    """A connected thread socket past its `hello` frame."""
    communicator, ok, _ = await ws_connect(user, thread.pk, caps=caps)
    assert ok
    await next_frame(communicator, lambda f: f.get("type") == "hello")
    return communicator


async def reply_frame(communicator, rid, timeout: float = 20):
    """The `reply` frame of the action sent with `rid`."""
    return await next_frame(
        communicator, lambda f: f.get("type") == "reply" and f.get("rid") == rid, timeout=timeout
    )


def toolcall_event(status: str | None = None, tool: str | None = None):
    def match(frame) -> bool:
        if frame.get("type") != "event" or frame.get("kind") != "toolcall":
            return False
        data = frame["data"]
        return (status is None or data["status"] == status) and (
            tool is None or data["tool"] == tool
        )

    return match


def chromium_module(nodeid: str) -> bool:
    """Where the real-Chromium tests live: tests/browser/, tests/compat/ and modules named
    ``*_browser.py`` (the collection hook below holds every test to it)."""
    path = nodeid.split("::", 1)[0]
    return path.startswith(("tests/browser/", "tests/compat/")) or path.endswith("_browser.py")


def worker_group(nodeid: str) -> str:
    """The pytest-xdist unit a test runs in (``PYTEST_PARALLEL="-n 2"``).

    Embedded profile: the tests without Chromium in one worker, the Chromium tests (the npm
    compatibility suite included) in the other. Two units for two workers, so each worker
    takes one whole: a Chromium test must never precede an async test in one process (see
    ``browser``).

    Production profile: the Chromium tests are skipped (they run once, in the embedded
    pass) but for one, so the rest is shared out module by module, each worker with a
    Redis of its own (tests/worker_redis.py). The Chromium modules are one unit, last in
    the queue (``pytest_collection_modifyitems``), so whichever worker takes it has run
    its async tests already."""
    chromium = chromium_module(nodeid)
    if os.environ.get("ATRIUM_PROFILE") == "production" and not chromium:
        return nodeid.split("::", 1)[0]
    return "chromium" if chromium else "processes"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Units by ``worker_group``, decided from the test's id in the controller process.
    (Not xdist's ``xdist_group`` mark: pytest-xdist 3.6–3.8 writes the group into
    ``item._nodeid``, which pytest 9 no longer reads, so the mark groups nothing:
    pytest-xdist issue 1386.) The Chromium unit is handed out last: xdist queues units
    largest first."""
    from xdist.scheduler import LoadScopeScheduling

    class WorkerGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

        def _assign_work_unit(self, node) -> None:
            if "chromium" in self.workqueue:
                self.workqueue.move_to_end("chromium")
            super()._assign_work_unit(node)

    return WorkerGroups(config, log)


def pytest_collection_modifyitems(config, items) -> None:
    """Real-Chromium tests run last: they are the slowest and drive their own event loop
    (see ``browser``). Every test using Chromium is marked ``browser`` and lives where
    ``chromium_module`` says, and every test there is marked (the xdist units rely on it)."""
    unmarked = [
        item.nodeid
        for item in items
        if "browser" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("browser")
    ]
    if unmarked:
        raise pytest.UsageError(f"tests using `browser` must be marked browser: {unmarked[:3]}")
    misplaced = [
        item.nodeid
        for item in items
        if (item.get_closest_marker("browser") is not None) != chromium_module(item.nodeid)
    ]
    if misplaced:
        raise pytest.UsageError(
            "browser-marked tests live in tests/browser/, tests/compat/ or *_browser.py "
            f"modules, and only they: {misplaced[:3]}"
        )
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Debian's Chromium through Playwright, launched once for the run; every test opens
    its own contexts. Safe only because its tests run last (above): Playwright's sync API
    keeps an asyncio loop running in the main thread while it is open, which would break
    any async test after it."""
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture(autouse=True)
def fresh_rate_limits():
    """Every test starts with full rate-limit buckets (bindings.ratelimit: the local store, or
    a fresh namespace of Redis keys in the production profile)."""
    from bindings import ratelimit

    ratelimit.reset_for_tests()
    yield


def pytest_configure(config) -> None:
    live.remember_pytest_config(config)


def pytest_addoption(parser) -> None:
    parser.addoption(
        "--repeat",
        type=int,
        default=1,
        help="run each selected test N times in a row (flake checks, docs/testing.md)",
    )


@pytest.fixture
def repeat_step(request) -> int:
    return request.param


def pytest_generate_tests(metafunc) -> None:
    count = metafunc.config.getoption("repeat")
    if count > 1:
        metafunc.fixturenames.append("repeat_step")
        metafunc.parametrize(
            "repeat_step", range(1, count + 1), indirect=True, ids=lambda n: f"run{n}"
        )
