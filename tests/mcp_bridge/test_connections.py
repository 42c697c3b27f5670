"""ConnectionManager against a real (deliberately faulty) MCP server over every transport.

The fixture server is ``tests/fixtures/mcp_servers/faulty.py``. It appends what it saw
(tool starts, cancellations, ``notifications/cancelled``) to the file named by
``FAULTY_LOG``; tests read that file to check what really reached the server.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from mcp_bridge.blocking_bridge import BlockingBridge
from mcp_bridge.connection_pool import UI_EXTENSION_ID, UI_MIME_TYPE, HealthInfo
from mcp_bridge.connections import ConnectionManager
from mcp_bridge.errors import (
    Cancelled,
    ResourceNotFound,
    ServerCrashed,
    ServerUnavailable,
    ToolNotFound,
    ToolTimeout,
)
from mcp_bridge.server_spec import ServerSpec
from tests.fixtures.http_servers import free_port, serve_async
from tests.waiting import apoll

pytestmark = pytest.mark.slow

FAULTY = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_servers" / "faulty.py"
PAGED_TOOLS = {f"paged_{index:02d}" for index in range(12)}
MODES = ["auto", "legacy"]


# ---- helpers -------------------------------------------------------------------------


def read_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line the server is still writing
    return entries


def events(path: Path, name: str) -> list[dict[str, Any]]:
    return [entry for entry in read_log(path) if entry["event"] == name]


async def eventually(
    check: Callable[[], Any], *, timeout: float = 5.0, message: str = "condition"
) -> Any:
    """``check``'s first truthy value. Polled: the fault-injecting server reports to the
    test only through its log file, and a process's exit through /proc."""
    return await apoll(check, timeout=timeout, interval=0.02, reason=message)


def process_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def text_of(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result["content"])


def stdio_spec(log: Path, *, mode: str = "auto", **overrides: Any) -> ServerSpec:
    options: dict[str, Any] = {
        "key": f"faulty-stdio-{uuid.uuid4().hex[:8]}",
        "name": "faulty",
        "transport": "stdio",
        "command": sys.executable,
        "args": (str(FAULTY),),
        "env": {"FAULTY_LOG": str(log)},
        "mode": mode,
        "call_timeout": 15,
        "connect_timeout": 15,
    }
    options.update(overrides)
    return ServerSpec(**options)


@asynccontextmanager
async def faulty_over_network(
    transport: str, log: Path, *, mode: str = "auto", port: int | None = None
) -> AsyncIterator[ServerSpec]:
    """Run the fixture server over streamable HTTP or SSE; yield a spec pointing at it."""
    port = port or free_port()
    flag, path = ("--http", "/mcp") if transport == "streamable_http" else ("--sse", "/sse")
    async with serve_async(
        [sys.executable, str(FAULTY), flag, str(port)],
        port=port,
        env={"FAULTY_LOG": str(log)},
        probe_path="/mcp" if transport == "streamable_http" else None,
    ):
        yield ServerSpec(
            key=f"faulty-{transport}-{uuid.uuid4().hex[:8]}",
            name="faulty",
            transport=transport,  # type: ignore[arg-type]
            url=f"http://127.0.0.1:{port}{path}",
            mode=mode,  # type: ignore[arg-type]
            call_timeout=15,
            connect_timeout=15,
        )


@pytest.fixture
def faulty_log(tmp_path: Path) -> Path:
    return tmp_path / "faulty.jsonl"


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[ConnectionManager]:
    manager = ConnectionManager(stderr_dir=tmp_path / "stderr")
    try:
        yield manager
    finally:
        await manager.aclose()


async def server_pid(manager: ConnectionManager, spec: ServerSpec) -> int:
    return int(text_of(await manager.call_tool(spec, "pid")))


# ---- transports ----------------------------------------------------------------------


async def exercise(manager: ConnectionManager, spec: ServerSpec) -> None:
    """The same checks over every transport and protocol era."""
    result = await manager.call_tool(spec, "echo", {"text": "hello"})
    assert text_of(result) == "hello"
    assert result["isError"] is False

    # The server saw the MCP Apps extension in our capabilities.
    advertised = await manager.call_tool(spec, "apps_advertised")
    assert advertised["structuredContent"] == {
        "advertised": True,
        "settings": {"mimeTypes": [UI_MIME_TYPE]},
    }
    # Raw wire form: camelCase keys and the result `_meta` kept for the UI.
    assert advertised["_meta"]["faulty/note"] == "result meta for the UI only"

    # The fixture pages tools/list five at a time; every page is followed.
    tools = await manager.list_tools(spec)
    names = [tool["name"] for tool in tools]
    assert len(names) == len(set(names)) == 23
    assert set(names) >= PAGED_TOOLS
    assert "inputSchema" in tools[0]

    resources = await manager.list_resources(spec)
    assert [resource["uri"] for resource in resources] == ["ui://faulty/view.html"]

    # Reads bypass the SDK cache: the view changes on every read and we see each change.
    first = await manager.read_resource(spec, "ui://faulty/view.html")
    second = await manager.read_resource(spec, "ui://faulty/view.html")
    assert first["contents"][0]["mimeType"] == UI_MIME_TYPE
    assert first["contents"][0]["text"] != second["contents"][0]["text"]

    assert await manager.ping(spec) < 5
    info = await manager.connect(spec)
    assert info["serverInfo"]["name"] == "faulty"
    health = manager.health(spec)
    assert health["state"] == "connected"
    assert health["connected_at"] is not None and health["last_seen"] is not None


async def test_stdio_transport_legacy(manager: ConnectionManager, faulty_log: Path) -> None:
    spec = stdio_spec(faulty_log, mode="legacy")
    await exercise(manager, spec)
    assert (await manager.connect(spec))["protocolVersion"] == "2025-11-25"


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
async def test_network_transports(
    manager: ConnectionManager, faulty_log: Path, transport: str
) -> None:
    # One server process answers both protocol eras.
    async with faulty_over_network(transport, faulty_log) as modern:
        legacy = ServerSpec(**{**_fields(modern), "key": modern.key + "-legacy", "mode": "legacy"})
        for spec, version in ((modern, "2026-07-28"), (legacy, "2025-11-25")):
            await exercise(manager, spec)
            assert (await manager.connect(spec))["protocolVersion"] == version
            await manager.close(spec)
            assert manager.health(spec)["state"] == "idle"  # forgotten after close


def _fields(spec: ServerSpec) -> dict[str, Any]:
    return {name: getattr(spec, name) for name in spec.__dataclass_fields__}


# ---- concurrency and reconnects ------------------------------------------------------


async def test_concurrent_first_calls_share_one_process(
    manager: ConnectionManager, faulty_log: Path
) -> None:
    spec = stdio_spec(faulty_log)
    started = time.monotonic()
    results = await asyncio.gather(
        *(manager.call_tool(spec, "slow", {"seconds": 0.5, "tag": str(i)}) for i in range(10))
    )
    elapsed = time.monotonic() - started
    assert [text_of(result) for result in results] == ["slept 0.5"] * 10
    # Ten first calls at once: one process (the connection lock), calls run side by side.
    assert len(events(faulty_log, "server_start")) == 1
    assert len({entry["pid"] for entry in events(faulty_log, "slow_start")}) == 1
    assert elapsed < 4.0


async def test_process_killed_between_calls_reconnects(
    manager: ConnectionManager, faulty_log: Path
) -> None:
    spec = stdio_spec(faulty_log)
    first_pid = await server_pid(manager, spec)
    os.kill(first_pid, signal.SIGKILL)
    await eventually(
        lambda: manager.health(spec)["state"] == "disconnected", message="death noticed"
    )

    second_pid = await server_pid(manager, spec)
    assert second_pid != first_pid
    assert manager.health(spec)["state"] == "connected"
    assert not process_alive(first_pid)


async def test_crash_during_call_then_recovery(
    manager: ConnectionManager, faulty_log: Path
) -> None:
    spec = stdio_spec(faulty_log)
    first_pid = await server_pid(manager, spec)
    with pytest.raises(ServerCrashed) as caught:
        await manager.call_tool(spec, "crash")
    assert caught.value.details["tool"] == "crash"
    assert "exited during tools/call 'crash'" in caught.value.details["reason"]
    health = manager.health(spec)
    assert health["state"] == "disconnected"
    assert health["last_error"] and "stopped while handling" in health["last_error"]

    assert await server_pid(manager, spec) != first_pid
    assert manager.health(spec)["state"] == "connected"


async def test_http_server_restart_is_survived(
    manager: ConnectionManager, faulty_log: Path
) -> None:
    """A restarted HTTP server has forgotten our session: the next call reconnects."""
    port = free_port()
    async with faulty_over_network("streamable_http", faulty_log, mode="legacy", port=port) as spec:
        assert text_of(await manager.call_tool(spec, "echo", {"text": "one"})) == "one"
    # Same port, so the same spec; the new process does not know the old session id.
    async with faulty_over_network("streamable_http", faulty_log, mode="legacy", port=port):
        assert text_of(await manager.call_tool(spec, "echo", {"text": "two"})) == "two"
    with pytest.raises(ServerUnavailable) as caught:
        await manager.call_tool(spec, "echo", {"text": "three"})
    assert "Could not connect" in str(caught.value)


async def test_http_crash_during_call(manager: ConnectionManager, faulty_log: Path) -> None:
    async with faulty_over_network("streamable_http", faulty_log) as spec:
        await manager.call_tool(spec, "echo", {"text": "warm"})
        with pytest.raises(ServerCrashed):
            await manager.call_tool(spec, "crash")


# ---- one shared server: timeouts, cancellation, progress, errors ----------------------


class SharedServer:
    """A manager and one stdio connection shared by a class's tests (saves process starts).

    Tests here must leave the connection usable and tag what they look for in the log.
    """

    def __init__(self, manager: ConnectionManager, spec: ServerSpec, log: Path) -> None:
        self.manager, self.spec, self.log = manager, spec, log

    def tagged(self, event: str, tag: str) -> list[dict[str, Any]]:
        return [entry for entry in events(self.log, event) if entry.get("tag") == tag]

    def cancel_notices(self, since: float) -> list[dict[str, Any]]:
        return [e for e in events(self.log, "cancel_notification") if e["time"] >= since]


@pytest_asyncio.fixture(loop_scope="class", scope="class")
async def shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SharedServer]:
    root = tmp_path_factory.mktemp("shared")
    log = root / "faulty.jsonl"
    manager = ConnectionManager(stderr_dir=root / "stderr")
    try:
        yield SharedServer(manager, stdio_spec(log), log)
    finally:
        await manager.aclose()


@pytest.mark.asyncio(loop_scope="class")
class TestOnOneConnection:
    async def test_stdio_transport(self, shared: SharedServer) -> None:
        await exercise(shared.manager, shared.spec)
        info = await shared.manager.connect(shared.spec)
        assert info["protocolVersion"] == "2026-07-28"  # "auto" speaks 2026 to a 2.x server

    async def test_hung_tool_times_out_and_server_is_told(self, shared: SharedServer) -> None:
        manager, spec = shared.manager, shared.spec
        pid = await server_pid(manager, spec)
        started = time.monotonic()
        with pytest.raises(ToolTimeout) as caught:
            await manager.call_tool(spec, "hang", {"tag": "timeout"}, timeout=0.5)
        assert time.monotonic() - started < 3
        assert caught.value.details == {"tool": "hang", "server": "faulty", "timeoutSeconds": 0.5}

        await eventually(lambda: shared.tagged("hang_cancelled", "timeout"), message="cancelled")
        notices = await eventually(
            lambda: shared.cancel_notices(started), message="notifications/cancelled"
        )
        assert "timed out" in notices[0]["reason"]
        # Same connection, still usable.
        assert await server_pid(manager, spec) == pid

    async def test_caller_cancellation_is_forwarded(self, shared: SharedServer) -> None:
        manager, spec = shared.manager, shared.spec
        pid = await server_pid(manager, spec)
        started = time.time()
        call = asyncio.create_task(
            manager.call_tool(spec, "slow", {"seconds": 30, "tag": "caller"})
        )
        await eventually(lambda: shared.tagged("slow_start", "caller"), message="tool started")
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await eventually(lambda: shared.tagged("slow_cancelled", "caller"), message="cancelled")
        notices = await eventually(
            lambda: shared.cancel_notices(started), message="notifications/cancelled"
        )
        assert notices[0]["reason"] == "caller cancelled"
        assert await server_pid(manager, spec) == pid

    async def test_cancel_event(self, shared: SharedServer) -> None:
        manager, spec = shared.manager, shared.spec
        stop = asyncio.Event()
        call = asyncio.create_task(
            manager.call_tool(spec, "slow", {"seconds": 30, "tag": "event"}, cancel_event=stop)
        )
        await eventually(lambda: shared.tagged("slow_start", "event"), message="tool started")
        stop.set()
        with pytest.raises(Cancelled):
            await call
        await eventually(lambda: shared.tagged("slow_cancelled", "event"), message="cancelled")
        # An event that is never set changes nothing.
        result = await manager.call_tool(spec, "echo", {"text": "x"}, cancel_event=asyncio.Event())
        assert text_of(result) == "x"

    async def test_progress_callback(self, shared: SharedServer) -> None:
        manager, spec = shared.manager, shared.spec
        updates: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            await asyncio.sleep(0.05)  # a slow consumer (say, a websocket broadcast)
            updates.append((progress, total, message))

        result = await manager.call_tool(spec, "progress", {"steps": 5}, progress=on_progress)
        assert text_of(result) == "done 5"
        # Every update has been handled by the time the call returns.
        assert sorted(updates) == [(float(i), 5.0, f"step {i}") for i in range(1, 6)]

        # A plain function works too, and a raising callback does not break the call.
        seen: list[float] = []

        def sync_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)
            raise RuntimeError("callback bug")

        result = await manager.call_tool(spec, "progress", {"steps": 3}, progress=sync_progress)
        assert text_of(result) == "done 3"
        assert sorted(seen) == [1.0, 2.0, 3.0]

    async def test_progress_flood(self, shared: SharedServer) -> None:
        manager, spec = shared.manager, shared.spec
        count = 0

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            nonlocal count
            count += 1

        result = await manager.call_tool(
            spec, "flood_progress", {"count": 2000}, progress=on_progress, timeout=30
        )
        assert text_of(result) == "flooded 2000"
        assert count == 2000
        assert text_of(await manager.call_tool(spec, "echo", {"text": "fine"})) == "fine"

    async def test_tool_and_resource_errors(self, shared: SharedServer) -> None:
        manager, spec = shared.manager, shared.spec
        with pytest.raises(ToolNotFound) as caught:
            await manager.call_tool(spec, "no_such_tool")
        assert caught.value.details == {"tool": "no_such_tool", "server": "faulty"}

        failed = await manager.call_tool(spec, "fail", {"message": "expected failure"})
        assert failed["isError"] is True and "expected failure" in text_of(failed)

        with pytest.raises(ResourceNotFound):
            await manager.read_resource(spec, "ui://faulty/missing.html")
        # None of that hurt the connection.
        assert manager.health(spec)["state"] == "connected"


# ---- progress and notifications --------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_list_changed_and_health_callbacks(
    tmp_path: Path, faulty_log: Path, mode: str
) -> None:
    changed: list[str] = []
    healths: list[tuple[str, HealthInfo]] = []

    async def on_health(key: str, health: HealthInfo) -> None:
        healths.append((key, health))

    async with ConnectionManager(
        on_tools_changed=changed.append, on_health=on_health, stderr_dir=tmp_path
    ) as manager:
        spec = stdio_spec(faulty_log, mode=mode)
        before = {tool["name"] for tool in await manager.list_tools(spec)}
        await manager.call_tool(spec, "change_tools", {"name": "brand_new"})
        await eventually(lambda: changed, message="list_changed callback")
        assert changed[0] == spec.key
        after = {tool["name"] for tool in await manager.list_tools(spec)}
        assert after - before == {"brand_new"}
        result = await manager.call_tool(spec, "brand_new", {"text": "hi"})
        assert text_of(result) == "brand_new: hi"
    states = [health["state"] for key, health in healths if key == spec.key]
    assert states[:2] == ["connecting", "connected"]
    assert states[-1] == "closed"


# ---- errors ----------------------------------------------------------------------------


async def test_unreachable_servers_fail_fast(manager: ConnectionManager, tmp_path: Path) -> None:
    missing = ServerSpec(key="missing", command="/nonexistent/mcp-server")
    started = time.monotonic()
    with pytest.raises(ServerUnavailable) as caught:
        await manager.call_tool(missing, "echo", {"text": "x"})
    assert (
        str(caught.value) == "Could not start '/nonexistent/mcp-server': No such file or directory"
    )
    assert manager.health(missing)["state"] == "failed"
    assert manager.health(missing)["last_error"] == str(caught.value)

    port = free_port()  # nothing listens there
    for transport, path in (("streamable_http", "/mcp"), ("sse", "/sse")):
        nobody = ServerSpec(
            key=f"nobody-{transport}", transport=transport, url=f"http://127.0.0.1:{port}{path}"
        )  # type: ignore[arg-type]
        with pytest.raises(ServerUnavailable) as caught:
            await manager.list_tools(nobody)
        assert f"Could not connect to http://127.0.0.1:{port}{path}" in str(caught.value)
    assert time.monotonic() - started < 3


async def test_server_dying_at_startup_reports_its_stderr(manager: ConnectionManager) -> None:
    broken = ServerSpec(
        key="broken",
        command=sys.executable,
        args=("-c", "import sys; sys.stderr.write('config file missing\\n'); sys.exit(3)"),
    )
    with pytest.raises(ServerUnavailable) as caught:
        await manager.call_tool(broken, "echo")
    assert "exited during startup" in str(caught.value)
    assert "config file missing" in str(caught.value)


async def test_silent_server_hits_connect_timeout(manager: ConnectionManager) -> None:
    # Reads its stdin and never answers; exits when we close stdin.
    silent = ServerSpec(
        key="silent", command="sh", args=("-c", "cat >/dev/null"), connect_timeout=0.5
    )
    started = time.monotonic()
    with pytest.raises(ServerUnavailable) as caught:
        await manager.list_tools(silent)
    assert "did not answer within 0.5 s" in str(caught.value)
    assert time.monotonic() - started < 3


# ---- process hygiene ----------------------------------------------------------------------


async def test_clean_environment_and_stderr_log(
    manager: ConnectionManager,
    faulty_log: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("ATRIUM_TEST_SECRET", "do-not-leak")
    spec = stdio_spec(faulty_log, env={"FAULTY_LOG": str(faulty_log), "EXTRA": "given"})
    assert (
        text_of(await manager.call_tool(spec, "env", {"name": "ATRIUM_TEST_SECRET"})) == "<unset>"
    )
    assert text_of(await manager.call_tool(spec, "env", {"name": "EXTRA"})) == "given"
    assert text_of(await manager.call_tool(spec, "env", {"name": "PATH"})) == os.environ["PATH"]

    logs = list((tmp_path / "stderr").glob("*.stderr.log"))
    assert len(logs) == 1
    assert "faulty: serving over stdio" in logs[0].read_text()
    captured = capfd.readouterr()
    assert "faulty: serving" not in captured.out + captured.err


async def test_close_stops_the_process(manager: ConnectionManager, faulty_log: Path) -> None:
    spec = stdio_spec(faulty_log)
    pid = await server_pid(manager, spec)
    await manager.close(spec)
    assert not process_alive(pid)
    # A later call simply opens a new connection.
    assert await server_pid(manager, spec) != pid
    await manager.aclose()
    with pytest.raises(ServerUnavailable):
        await manager.call_tool(spec, "pid")


async def test_idle_connections_close_and_reopen(tmp_path: Path, faulty_log: Path) -> None:
    async with ConnectionManager(idle_timeout=0.5, stderr_dir=tmp_path) as manager:
        spec = stdio_spec(faulty_log)
        # A call longer than the idle timeout keeps its connection.
        await manager.call_tool(spec, "slow", {"seconds": 0.8, "tag": "busy"})
        pid = await server_pid(manager, spec)
        await eventually(lambda: manager.health(spec)["state"] == "idle", message="idle close")
        assert not process_alive(pid)
        assert await server_pid(manager, spec) != pid


async def test_new_config_replaces_the_old_connection(
    manager: ConnectionManager, faulty_log: Path
) -> None:
    def config(version: str) -> ServerSpec:
        return ServerSpec.create(
            "faulty",
            command=sys.executable,
            args=(str(FAULTY),),
            env={"FAULTY_LOG": str(faulty_log), "VERSION": version},
        )

    old, new = config("1"), config("2")
    assert old.key != new.key
    old_pid = await server_pid(manager, old)
    running = asyncio.create_task(manager.call_tool(old, "slow", {"seconds": 1, "tag": "old"}))
    await eventually(lambda: events(faulty_log, "slow_start"), message="old call running")

    assert text_of(await manager.call_tool(new, "env", {"name": "VERSION"})) == "2"
    # The old connection finishes what it was doing, then stops; it takes no new calls.
    assert text_of(await running) == "slept 1.0"
    await eventually(lambda: not process_alive(old_pid), message="old process stopped")
    assert manager.health(old)["state"] == "idle"  # forgotten
    assert text_of(await manager.call_tool(new, "env", {"name": "VERSION"})) == "2"


def test_spec_key_follows_config_and_hides_secrets() -> None:
    base = ServerSpec.create("search", command="npx", args=["srv"], env={"TOKEN": "s3cret"})
    same = ServerSpec.create("search", command="npx", args=("srv",), env={"TOKEN": "s3cret"})
    other = ServerSpec.create("search", command="npx", args=["srv"], env={"TOKEN": "rotated"})
    assert base.key == same.key != other.key
    assert base.key.startswith("search:")
    assert "s3cret" not in repr(base)
    assert hash(base) == hash(same)
    with pytest.raises(ValueError):
        ServerSpec(key="x", transport="streamable_http")
    with pytest.raises(ValueError):
        ServerSpec(key="x", command="")


# ---- blocking bridge ------------------------------------------------------------------------


def test_blocking_bridge_from_sync_code(faulty_log: Path, tmp_path: Path) -> None:
    spec = stdio_spec(faulty_log)
    updates: list[float] = []
    bridge = BlockingBridge.shared(stderr_dir=tmp_path)  # one portal per process
    try:
        assert BlockingBridge.shared() is bridge
        assert text_of(bridge.call_tool(spec, "echo", {"text": "sync"})) == "sync"
        result = bridge.call_tool(
            spec, "progress", {"steps": 3}, progress=lambda p, t, m: updates.append(p)
        )
        assert text_of(result) == "done 3"
        assert len(bridge.list_tools(spec)) == 23
        view = bridge.read_resource(spec, "ui://faulty/view.html")
        assert view["contents"][0]["mimeType"] == UI_MIME_TYPE
        assert bridge.health(spec)["state"] == "connected"
        with pytest.raises(ToolTimeout):
            bridge.call_tool(spec, "hang", timeout=0.3)
        pid = int(text_of(bridge.call_tool(spec, "pid")))
    finally:
        bridge.stop()
    assert not process_alive(pid)
    assert sorted(updates) == [1.0, 2.0, 3.0]
    # Stopped: the next shared() starts a fresh bridge; a context manager works the same way.
    with BlockingBridge(stderr_dir=tmp_path) as scoped:
        assert BlockingBridge.shared() is not bridge
        BlockingBridge.shared().stop()
        assert scoped.ping(spec) < 5


def test_ui_extension_constants() -> None:
    assert UI_EXTENSION_ID == "io.modelcontextprotocol/ui"
    assert UI_MIME_TYPE == "text/html;profile=mcp-app"
