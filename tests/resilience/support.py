"""Helpers for the resilience tests: the faulty server, live servers, a private Redis."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.live import LiveAtrium, free_port
from tests.waiting import OutputWatch, apoll

ROOT_DIR = Path(__file__).resolve().parents[2]

FAULTY = ROOT_DIR / "tests" / "fixtures" / "mcp_servers" / "faulty.py"
BOARD = ROOT_DIR / "examples" / "board" / "server.py"
MEDIA = ROOT_DIR / "examples" / "media" / "server.py"
PRODUCTION = bool(os.environ.get("DATABASE_URL"))


def faulty_server(workspace: Any, *, call_timeout: float = 60.0, tools: tuple[str, ...] = ()):
    """The misbehaving fixture server over stdio, bound to `workspace`; `tools` run unasked."""
    from bindings.services.bindings import binding_create
    from bindings.services.policies import tool_policy_set
    from mcp_bridge.services.servers import server_add

    server = server_add(
        name="Faulty",
        slug="faulty",
        transport="stdio",
        command=sys.executable,
        args=[str(FAULTY)],
        call_timeout=call_timeout,
    )
    binding = binding_create(server=server, workspace=workspace)
    for tool in tools:
        tool_policy_set(binding=binding, tool_name=tool, risk="read", approval="auto")
    return server, binding


async def ping_latency(communicator, rid: str = "ping", timeout: float = 5.0) -> float:
    """Seconds until the `pong` of a `ping` (other frames are skipped, not lost to tests
    that do not look for them)."""
    started = time.perf_counter()
    await communicator.send_json_to({"type": "ping", "rid": rid})
    deadline = started + timeout
    while True:
        frame = await communicator.receive_json_from(
            timeout=max(deadline - time.perf_counter(), 0.01)
        )
        if frame.get("type") == "pong" and frame.get("rid") == rid:
            return time.perf_counter() - started


# ------------------------------------------------------------------------- live servers


SEED = r"""
import json, sys
from django.contrib.auth import get_user_model
from django.test import Client
from chat import services
from chat.models import Workspace
from mcp_bridge.services.servers import server_add
from bindings.services.bindings import binding_create
from bindings.services.policies import tool_policy_set

spec = json.loads(sys.stdin.read())
U = get_user_model()
owner = U.objects.create_user("olivia")
member = U.objects.create_user("marco")
workspace = services.workspace_create(name=spec["workspace"], owner=owner)
services.membership_set(workspace=workspace, user=member, role="member")
if spec["llm"]:
    Workspace.objects.filter(pk=workspace.pk).update(
        provider="openai", model="fake-model", provider_base_url=spec["llm"], provider_api_key="sk-x"
    )
threads = {
    name: services.thread_create(workspace=workspace, title=name, actor=owner).pk
    for name in spec["threads"]
}
for slug, server in spec["servers"].items():
    row = server_add(name=slug.title(), slug=slug, **server)
    binding_create(server=row, workspace=workspace)
cookies = {}
for user in (owner, member):
    client = Client()
    client.force_login(user)
    cookies[user.username] = client.cookies["sessionid"].value
print("SEED=" + json.dumps({"threads": threads, "cookies": cookies, "workspace": workspace.pk}))
"""


def seed_workspace(
    server: LiveAtrium,
    *,
    servers: dict[str, Any],
    workspace: str = "Acme",
    threads: list[str] | tuple[str, ...] = ("Launch",),
    llm: str = "",
) -> dict[str, Any]:
    """Seed a live server (through ``LiveAtrium.shell``): olivia owns ``workspace``, marco
    is a member, ``threads`` by title, ``servers`` (slug: ``server_add`` fields) bound to
    the workspace, and with ``llm`` the fake OpenAI model at that base URL. Returns
    ``{"threads": {title: id}, "cookies": {username: sessionid}, "workspace": id}``."""
    spec = {"workspace": workspace, "threads": list(threads), "servers": servers, "llm": llm}
    out = server.shell(SEED, input=json.dumps(spec))
    line = next(x for x in out.splitlines() if x.startswith("SEED="))
    return json.loads(line[5:])


def seed_live(server: LiveAtrium, servers: dict[str, Any]) -> dict[str, Any]:
    """``seed_workspace`` with the one thread "Launch" in "Acme", also as ``thread``."""
    seeded = seed_workspace(server, servers=servers)
    return {**seeded, "thread": seeded["threads"]["Launch"]}


def stdio(path: Path, **env: str) -> dict[str, Any]:
    return {"transport": "stdio", "command": sys.executable, "args": [str(path)], "env": env}


def post_from_another_process(server: LiveAtrium, thread_id: int, texts: list[str]) -> None:
    """Messages written by another process (as the text channel would): stored events."""
    code = (
        "from chat.realtime.events import emit\n"
        "from chat.models import Message, Thread\n"
        "from chat.presenters import serialize_message\n"
        "from django.contrib.auth import get_user_model\n"
        "from django.db import transaction\n"
        f"thread = Thread.objects.get(pk={thread_id})\n"
        "author = get_user_model().objects.get(username='olivia')\n"
        f"for text in {texts!r}:\n"
        "    with transaction.atomic():\n"
        "        m = Message.objects.create(thread=thread, role='user', author=author, text=text)\n"
        "        emit(thread_id=thread.pk, kind='message', payload=serialize_message(m))\n"
    )
    server.shell(code)


def db_rows(server: LiveAtrium, sql: str) -> list[tuple]:
    """Read the live server's database directly (SQLite file or PostgreSQL)."""
    url = server.env.get("DATABASE_URL")
    if url:
        import psycopg

        with psycopg.connect(url) as conn:
            return list(conn.execute(sql).fetchall())
    with contextlib.closing(sqlite3.connect(server.var_dir / "atrium.sqlite3", timeout=20)) as conn:
        return list(conn.execute(sql).fetchall())


def drop_live_database(server: LiveAtrium) -> None:
    """LiveAtrium creates a PostgreSQL database per server; remove it afterwards."""
    url = server.env.get("DATABASE_URL")
    if not url or url == os.environ.get("DATABASE_URL"):
        return
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    name = urlsplit(url).path.lstrip("/")
    admin = urlunsplit(urlsplit(os.environ["DATABASE_URL"])._replace(path="/postgres"))
    with contextlib.suppress(Exception), psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class PrivateRedis:
    """A redis-server of our own on a free loopback port (never the machine's shared one)."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> PrivateRedis:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        OutputWatch(self.proc).wait_for("(?i)ready to accept connections", timeout=10)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


async def reconnect(server, cookie: str, thread_id: int, *, after: int, attempts: int = 20):
    """Reconnect the way the chat client does: retry with a short backoff until accepted.

    After a Redis restart the server's pooled layer connections are stale; the first
    handshake that uses one fails (HTTP 500) and the pool replaces it.
    """
    from bench.harness import connect

    last: Exception | None = None
    for attempt in range(attempts):
        try:
            return await connect(server, cookie, thread_id, after=after)
        except Exception as exc:  # noqa: BLE001 — retried like a browser would
            last = exc
            await asyncio.sleep(min(0.1 * 2**attempt, 1.0))
    raise AssertionError(f"could not reconnect: {last!r}")


async def wait_until(predicate, *, reason: str, timeout: float = 20.0) -> None:
    """Bounded poll of another process's database (no change notification reaches the
    test); frames wait with ``tests.waiting.socket_event`` instead."""
    await apoll(predicate, timeout=timeout, reason=reason)
