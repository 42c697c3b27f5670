"""A real Atrium server for end-to-end tests: the web server, uvicorn through config/serve.py
(+ optionally a Celery worker).

Each LiveAtrium gets its own var/ folder. Under the production profile (DATABASE_URL set)
it gets its own fresh PostgreSQL database and Redis database numbers, so tests never share
state with the machine's other users.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import dj_database_url
import httpx
import pytest
from django.db import DEFAULT_DB_ALIAS, connections
from pytest_django.plugin import blocking_manager_key

from tests.fixtures.http_servers import free_port
from tests.live_shell import ShellSession
from tests.waiting import poll

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def memory_kib(pid: int) -> dict[str, int]:
    """A process's resident set now (VmRSS) and at its peak (VmHWM), in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmHWM", "VmRSS"):
            fields[name] = int(value.split()[0])
    return fields


def reset_peak_memory(pid: int) -> None:
    """Start VmHWM over from the current RSS (Linux: ``clear_refs`` 5)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


class RssGrowth:
    """How far some processes' resident sets grew, at their peak, above where they were on
    entering the ``with`` block (VmHWM, reset on entry: nothing is missed between samples)."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.growth_kib: dict[int, int] = {}

    def __enter__(self) -> RssGrowth:
        self.baselines = {pid: memory_kib(pid)["VmRSS"] for pid in self.pids}
        for pid in self.pids:
            reset_peak_memory(pid)
        return self

    def __exit__(self, *exc: object) -> None:
        self.growth_kib = {
            pid: memory_kib(pid)["VmHWM"] - baseline for pid, baseline in self.baselines.items()
        }

    def most_mib(self) -> float:
        """The largest growth of any of the processes, in MiB."""
        return max(self.growth_kib.values()) / 1024


def wait_for_http(url: str, timeout: float = 30.0, process: subprocess.Popen | None = None) -> None:
    """Until ``url`` answers. Polled: the server logs no line when it starts listening. A
    ``process`` that exits meanwhile fails the wait at once."""

    def answers() -> bool:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode} before {url}")
        try:
            httpx.get(url, timeout=2.0)
        except httpx.HTTPError:
            return False
        return True

    poll(answers, timeout=timeout, interval=0.1, reason=f"{url} answers")


_migrated_template: Path | None = None
_pytest_config: pytest.Config | None = None


def remember_pytest_config(config: pytest.Config) -> None:
    global _pytest_config
    _pytest_config = config


def database_blocker() -> Any:
    """pytest-django's database blocker: tests without the ``db`` fixture (the browser
    suite) may still read a live server's database (``LiveAtrium.read``)."""
    assert _pytest_config is not None, "tests/conftest.py remembers the pytest config"
    return _pytest_config.stash[blocking_manager_key]


def migrated_sqlite(env: dict[str, str]) -> Path:
    """A migrated embedded database, made once per test run: every live server starts
    from a copy instead of running ``migrate`` (a Django start-up and ~90 migrations)."""
    global _migrated_template
    if _migrated_template is None:
        folder = Path(tempfile.mkdtemp(prefix="atrium-migrated-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        subprocess.run(
            [PYTHON, "manage.py", "migrate", "-v0"],
            cwd=ROOT,
            env={**env, "ATRIUM_VAR_DIR": str(folder)},
            check=True,
            capture_output=True,
            timeout=300,
        )
        _migrated_template = folder / "atrium.sqlite3"
    return _migrated_template


def _production_env(name: str, env: dict[str, str]) -> dict[str, str]:
    """A fresh PostgreSQL database for this server, when the suite runs in production mode:
    a copy of one migrated this run (``CREATE DATABASE … TEMPLATE``, a file copy, instead of
    ~90 migrations and a Django start-up per server)."""
    base = os.environ.get("DATABASE_URL", "")
    if not base:
        return {}
    parts = urlsplit(base)
    db_name = f"atrium_live_{name}"
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    _create_database(admin_url, db_name, template=_migrated_postgres(env))
    made = {"DATABASE_URL": urlunsplit(parts._replace(path=f"/{db_name}"))}
    # Separate, emptied Redis databases keep each live server apart from the suite's own
    # layer and from earlier live servers (whose queued Celery messages would leak in).
    redis = os.environ.get("REDIS_URL", "")
    if redis:
        import redis as redis_client

        global _redis_pair
        _redis_pair = (_redis_pair + 1) % 5
        layer_db, broker_db = 5 + 2 * _redis_pair, 6 + 2 * _redis_pair
        r = urlsplit(redis)
        for db in (layer_db, broker_db):
            url = urlunsplit(r._replace(path=f"/{db}"))
            redis_client.Redis.from_url(url).flushdb()
        made["REDIS_URL"] = urlunsplit(r._replace(path=f"/{layer_db}"))
        made["CELERY_BROKER_URL"] = urlunsplit(r._replace(path=f"/{broker_db}"))
    return made


_redis_pair = 0
_migrated_postgres_name: str | None = None


def _migrated_postgres(env: dict[str, str]) -> str:
    """The name of a PostgreSQL database migrated once per test process; it is dropped
    when the process ends. Nothing connects to it after ``migrate``: a database is copied
    only while no session uses it."""
    global _migrated_postgres_name
    if _migrated_postgres_name is None:
        parts = urlsplit(os.environ["DATABASE_URL"])
        name = f"atrium_live_template_{os.getpid()}"
        admin_url = urlunsplit(parts._replace(path="/postgres"))
        _create_database(admin_url, name)
        subprocess.run(
            [PYTHON, "manage.py", "migrate", "-v0"],
            cwd=ROOT,
            env={**env, "DATABASE_URL": urlunsplit(parts._replace(path=f"/{name}"))},
            check=True,
            capture_output=True,
            timeout=300,
        )
        atexit.register(_drop_database, admin_url, name)
        _migrated_postgres_name = name
    return _migrated_postgres_name


def _create_database(admin_url: str, name: str, *, template: str = "") -> None:
    """A new empty (or ``template``'s copy) database ``name``, replacing any of that name."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))


def _drop_database(admin_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass
class LiveAtrium:
    var_dir: Path
    port: int = field(default_factory=free_port)
    extra_env: dict[str, str] = field(default_factory=dict)
    processes: list[subprocess.Popen] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    sandbox_origins: dict[tuple[str, str], str] = field(default_factory=dict)
    _shell: ShellSession | None = field(default=None, repr=False)

    @property
    def app_origin(self) -> str:
        return f"http://localhost:{self.port}"

    @property
    def sandbox_origin(self) -> str:
        """One origin per MCP server and workspace: "<label>.localhost" (docs/sandbox.md)."""
        return f"http://*.localhost:{self.port}"

    def sandbox_origin_of(self, server_slug: str, workspace: str = "acme") -> str:
        """The sandbox origin of a server's views in a workspace (by slugs), as this server
        builds it: the label is keyed by its SECRET_KEY (chat/sandbox_hosts.py)."""
        if (server_slug, workspace) not in self.sandbox_origins:
            out = self.shell(
                "from chat.models import Workspace; from chat.sandbox_hosts import sandbox_origin_for; "
                f"print(sandbox_origin_for({server_slug!r}, "
                f"Workspace.objects.get(slug={workspace!r}).pk))"
            )
            self.sandbox_origins[(server_slug, workspace)] = out.strip().splitlines()[-1]
        return self.sandbox_origins[(server_slug, workspace)]

    def setup(self) -> LiveAtrium:
        self.var_dir.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
        env.pop("DJANGO_SETTINGS_MODULE", None)
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "config.settings",
                "ATRIUM_VAR_DIR": str(self.var_dir),
                "ATRIUM_APP_ORIGIN": self.app_origin,
                "ATRIUM_SANDBOX_ORIGIN": self.sandbox_origin,
                "PYTHONUNBUFFERED": "1",
            }
        )
        production = _production_env(f"{os.getpid()}_{self.port}", env)
        self._live_database_url = production.get("DATABASE_URL")
        if self._live_database_url:
            # Not in stop(): a test may stop and start the same server again.
            atexit.register(self._drop_live_database)
        env.update(production)
        env.update(self.extra_env)
        self.env = env
        database = self.var_dir / "atrium.sqlite3"
        if env.get("DATABASE_URL"):
            if env["DATABASE_URL"] != self._live_database_url:
                self.manage("migrate", "-v0")  # the caller's database (extra_env)
            # else: made here from the migrated copy
        elif database.exists():
            self.manage("migrate", "-v0")
        else:
            # The migrate command closed its connection: the WAL is checkpointed into the file.
            shutil.copyfile(migrated_sqlite(env), database)
        return self

    def manage(self, *args: str, input: str | None = None) -> str:
        result = subprocess.run(
            [PYTHON, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if result.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stderr}")
        return result.stdout

    def shell(self, code: str, *, input: str | None = None) -> str:
        """Run Python with Django set up inside the server's environment, as
        ``manage.py shell -c`` would; returns its stdout. One Django process per server
        and environment runs every snippet (tests/live_shell.py): a start-up per snippet
        was ≈ 1.6 s."""
        if self._shell is None or not self._shell.alive() or self._shell.env != self.env:
            self._close_shell()
            self._shell = ShellSession(self.env, self.var_dir / "shell.log")
        return self._shell.run(code, input)

    def _close_shell(self) -> None:
        if self._shell is not None:
            self._shell.close()
            self._shell = None

    def start(self, *, worker: bool = False) -> LiveAtrium:
        log = open(self.var_dir / "server.log", "ab")  # noqa: SIM115 (held by the child)
        self.processes.append(
            subprocess.Popen(
                [PYTHON, "-m", "config.serve", "--port", str(self.port)],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        if worker:
            self.start_worker()
        wait_for_http(f"{self.app_origin}/login/", process=self.processes[0])
        return self

    def start_worker(self) -> subprocess.Popen:
        log = open(self.var_dir / "celery.log", "ab")  # noqa: SIM115 (held by the child)
        proc = subprocess.Popen(
            [
                PYTHON,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "--pool=solo",
                "--loglevel=INFO",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.processes.append(proc)
        return proc

    def start_beat(self) -> subprocess.Popen:
        """Celery beat: the scheduler of the periodic sweeps (config/settings/tasks.py)."""
        log = open(self.var_dir / "beat.log", "ab")  # noqa: SIM115 (held by the child)
        proc = subprocess.Popen(
            [PYTHON, "-m", "celery", "-A", "config", "beat", "--loglevel=INFO"],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.processes.append(proc)
        return proc

    def stop(self) -> None:
        self._close_shell()
        for proc in reversed(self.processes):
            if proc.poll() is None:
                proc.terminate()
        for proc in self.processes:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.processes.clear()

    def _drop_live_database(self) -> None:
        """The fresh PostgreSQL database of this server goes when the test run ends."""
        self.stop()
        url = getattr(self, "_live_database_url", None)
        if not url:
            return
        self._live_database_url = None
        parts = urlsplit(url)
        _drop_database(urlunsplit(parts._replace(path="/postgres")), parts.path.lstrip("/"))

    def read(self, query: Callable[[str], T]) -> T:
        """``query(alias)`` in the test process against this server's database (the ORM
        with ``.using(alias)``): no ``manage.py shell`` process, a Django start-up, per
        read. Reads only; the server writes."""
        url = self.env.get("DATABASE_URL")
        own = dj_database_url.parse(url) if url else {"NAME": str(self.var_dir / "atrium.sqlite3")}
        # Named after the database, not the port: a later server in this process may get
        # an earlier one's port, and must not read the earlier one's database.
        alias = "live-" + hashlib.sha256(repr(sorted(own.items())).encode()).hexdigest()[:12]
        if alias not in connections.settings:
            suite = connections.settings[DEFAULT_DB_ALIAS]
            if own.get("ENGINE", suite["ENGINE"]) != suite["ENGINE"]:
                # Another engine takes none of the suite's options (SQLite, PostgreSQL's).
                own = {**own, "OPTIONS": own.get("OPTIONS") or {}}
            connections.settings[alias] = {**suite, **own}

        def read_and_close() -> T:
            try:
                return query(alias)
            finally:
                connections[alias].close()  # the next read sees the server's newer writes

        # In a thread of its own: Playwright's sync API runs an event loop in this one,
        # where Django refuses synchronous database work.
        with database_blocker().unblock(), ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(read_and_close).result()

    def create_user(self, username: str, password: str | None = None, staff: bool = False) -> str:
        password = password or secrets.token_urlsafe(12)
        self.shell(
            "from django.contrib.auth import get_user_model; U=get_user_model(); "
            f"u=U.objects.create_user({username!r}, password={password!r}); "
            f"u.is_staff=u.is_superuser={staff!r}; u.save()"
        )
        return password


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

__all__ = ["LiveAtrium", "free_port", "wait_for_http", "CHROMIUM", "CHROMIUM_ARGS", "ROOT"]
