"""Shared fixtures: personas (owner, member, viewer, outsider) and small factories."""

from __future__ import annotations

import functools
import multiprocessing
from dataclasses import dataclass
from typing import Any

import pytest

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


@functools.cache
def _password_hash(password: str, hashers: tuple[str, ...]) -> str:
    """One real hash per password for the whole run: the default hasher costs ~0.3 s a user
    on CI's machine, and every persona set made four. The hash (salt included) is as valid
    for every user as for the first, also for live servers' processes."""
    from django.contrib.auth.hashers import make_password

    return make_password(password)


def make_user(username: str, *, staff: bool = False, password: str = "pw-" + "x" * 12):
    from django.conf import settings
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username=username)
    user.password = _password_hash(password, tuple(settings.PASSWORD_HASHERS))
    user.save(update_fields=["password"])
    if staff:
        user.is_staff = user.is_superuser = True
        user.save()
    return user


@pytest.fixture
def personas(db) -> Personas:
    from chat import services

    owner = make_user("olivia")
    member = make_user("marco")
    viewer = make_user("vera")
    outsider = make_user("oscar")
    workspace = services.create_workspace(name="Acme", owner=owner)
    services.set_membership(workspace=workspace, user=member, role="member")
    services.set_membership(workspace=workspace, user=viewer, role="viewer")
    thread = services.create_thread(workspace=workspace, title="Launch plan", actor=owner)
    other_workspace = services.create_workspace(name="Globex", owner=outsider)
    other_thread = services.create_thread(
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


ROOT_DIR = __import__("pathlib").Path(__file__).resolve().parent.parent


@pytest.fixture
def board_server(personas, tmp_path):
    """The real `board` example over stdio, bound to the personas' workspace."""
    import sys

    from bindings import services as binding_services
    from mcp_bridge import services as bridge_services

    server = bridge_services.add_server(
        name="Board",
        slug="board",
        transport="stdio",
        command=sys.executable,
        args=[str(ROOT_DIR / "examples" / "board" / "server.py")],
        env={"BOARD_STATE_FILE": str(tmp_path / "board.json")},
    )
    binding = binding_services.create_binding(server=server, workspace=personas.workspace)
    # What an admin of a board does: a standing approval for the view's harmless writes
    # (audited as a policy change); deleting still asks.
    for tool in ("move_item", "add_item"):
        binding_services.set_tool_policy(binding=binding, tool_name=tool, approval="auto")
    return server, binding


async def next_frame(communicator, predicate, limit: int = 50, timeout: float = 15):
    """The next frame matching predicate (frames in between are dropped)."""
    for _ in range(limit):
        frame = await communicator.receive_json_from(timeout=timeout)
        if predicate(frame):
            return frame
    raise AssertionError("no matching frame")


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


def pytest_collection_modifyitems(config, items) -> None:
    """Real-Chromium tests run last: they are the slowest and drive their own event loop."""
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)


@pytest.fixture(autouse=True)
def fresh_rate_limits():
    """Every test starts with full rate-limit buckets (bindings.ratelimit, embedded store)."""
    from bindings import ratelimit

    ratelimit.reset_for_tests()
    yield
