"""Tool-result media end to end: a real web server (tests/live.py), the real `media` example
server over stdio, a real websocket client, and a real Celery worker *process* that is
started only after the results arrived.

One scenario runs once per module (it is the expensive part) and the tests below check
what it recorded:

1. no worker: a 50 MB video result appears at once as a placeholder, and the ASGI
   process's peak memory grows by at most 16 MiB (DESIGN §9);
2. still no worker: image, audio, video, binary, a PNG decompression bomb and two
   mislabelled files all appear as placeholders (status ``staged``), also after a reload;
3. the worker starts: every asset turns ``ready`` or ``rejected`` through live ``media``
   events, without a reload, and a reload then shows exactly the last live payloads;
4. the stored files are served to members only, with byte ranges, streamed.

The media inline limit is lowered to 256 bytes so that every payload (even the 298-byte
ZIP that claims to be a PNG) takes the worker path.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from tests.live import ROOT, LiveAtrium, RssGrowth, memory_kib, reset_peak_memory
from tests.waiting import poll

# DESIGN §9: what serving or receiving a 50 MB file may add to the web server's memory.
MEDIA_RSS_GROWTH_MIB = 16

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

MIB = 1024 * 1024
LARGE_MB = 50
PASSWORD = "pw-media-e2e-0123"

SEED = """
import json, sys
from django.contrib.auth import get_user_model
from bindings.services.bindings import binding_create
from chat import services
from mcp_bridge.services.servers import server_add

users = get_user_model().objects
owner = users.create_user("olivia", password={password!r})
outsider = users.create_user("oscar", password={password!r})
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
services.workspace_create(name="Globex", owner=outsider, slug="globex")
thread = services.thread_create(workspace=workspace, title="Media", actor=owner)
media = server_add(
    name="Media", slug="media", transport="stdio", command=sys.executable, args=[{server!r}]
)
binding_create(server=media, workspace=workspace)
print(json.dumps({{"thread": thread.pk}}))
"""

# tool → arguments; each returns exactly one media part.
TOOLS: dict[str, dict[str, Any]] = {
    "get_image": {"width": 1600, "height": 900, "format": "png"},
    "get_audio": {"seconds": 2.0, "frequency": 440.0},
    "get_video": {"seconds": 2.0, "fps": 12, "width": 320, "height": 240},
    "get_blob": {"kilobytes": 16},
    "get_bomb": {"side": 50000},
    "get_lying_file": {"block": "image"},
    "get_lying_file#resource": {"block": "resource"},
}
LIE = "The file's content (ZIP archive) does not match its declared type image/png."


# ------------------------------------------------------------------------ a websocket client


class LiveSocket:
    """A minimal RFC 6455 client (text frames, ping/pong, close) for a live web process.

    Like the browser client, it resumes after a dropped connection by reconnecting with
    ``?after=<last seq>`` (the protocol's replay), and counts how often it had to.
    """

    def __init__(self, origin: str, path: str, cookie: str) -> None:
        self.origin, self.path, self.cookie = origin, path, cookie
        self.frames: list[dict[str, Any]] = []
        self.received_at: list[float] = []
        self.rid = 0
        self.last_seq: int | None = None
        self.reconnects = 0
        self._connect(path)

    def _connect(self, path: str) -> None:
        parts = urlsplit(self.origin)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Origin: {self.origin}\r\nCookie: {self.cookie}\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            chunk = self.sock.recv(4096)
            assert chunk, "the server closed the connection during the handshake"
            self.buffer += chunk
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head.decode(errors="replace")

    def _resume(self) -> None:
        self.sock.close()
        self.reconnects += 1
        separator = "&" if "?" in self.path else "?"
        after = f"{separator}after={self.last_seq}" if self.last_seq is not None else ""
        self._connect(self.path + after)

    def _read(self, count: int) -> bytes:
        while len(self.buffer) < count:
            chunk = self.sock.recv(max(65536, count - len(self.buffer)))
            if not chunk:
                raise ConnectionError("websocket closed")
            self.buffer += chunk
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        length = len(payload)
        header = bytes([0x80 | opcode])
        if length < 126:
            header += bytes([0x80 | length])
        elif length < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", length)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", length)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def send(self, message: dict[str, Any]) -> None:
        try:
            self._send_frame(0x1, json.dumps(message).encode())
        except OSError:
            self._resume()
            self._send_frame(0x1, json.dumps(message).encode())

    def _receive(self, timeout: float) -> dict[str, Any]:
        self.sock.settimeout(timeout)
        message = b""
        while True:
            first, second = self._read(2)
            length = second & 0x7F
            if length == 126:
                length = struct.unpack(">H", self._read(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(length)
            opcode = first & 0x0F
            if opcode == 0x9:
                self._send_frame(0xA, payload)
                continue
            if opcode == 0x8:
                raise ConnectionError(f"websocket closed by the server: {payload!r}")
            if opcode in (0x0, 0x1):
                message += payload
                if first & 0x80:
                    frame = json.loads(message)
                    if isinstance(frame.get("seq"), int):
                        if self.last_seq is not None and frame["seq"] <= self.last_seq:
                            return {"type": "duplicate"}  # replayed: already seen
                        self.last_seq = frame["seq"]
                    self.frames.append(frame)
                    self.received_at.append(time.monotonic())
                    return frame

    def wait_for(self, predicate: Callable[[dict], bool], timeout: float = 60) -> dict[str, Any]:
        """The first frame (already received or arriving) that matches."""
        for frame in self.frames:
            if predicate(frame):
                return frame
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                frame = self._receive(left)
            except TimeoutError:
                break
            except (ConnectionError, OSError):
                self._resume()
                continue
            if predicate(frame):
                return frame
        raise AssertionError(f"no matching frame within {timeout}s")

    def call(self, tool: str, arguments: dict[str, Any]) -> int:
        """Start a media tool call; its id (from the reply, or — if the connection dropped
        before the reply — from the call's first event)."""
        self.rid += 1
        rid = self.rid
        known = {f["data"]["id"] for f in self.frames if f.get("kind") == "toolcall"}
        self.send(
            {
                "type": "tool.call",
                "server": "media",
                "tool": tool,
                "arguments": arguments,
                "rid": rid,
            }
        )
        frame = self.wait_for(
            lambda f: (
                (f.get("type") == "reply" and f.get("rid") == rid)
                or (
                    f.get("kind") == "toolcall"
                    and f["data"]["tool"] == tool
                    and f["data"]["id"] not in known
                )
            )
        )
        if frame.get("type") == "reply":
            assert frame["ok"], frame
            return frame["result"]["toolCallId"]
        return frame["data"]["id"]

    def finished(self, call_id: int, timeout: float = 120) -> dict[str, Any]:
        """The tool call's finished event (its result has placeholders for staged media)."""
        frame = self.wait_for(
            lambda f: (
                f.get("kind") == "toolcall"
                and f["data"]["id"] == call_id
                and f["data"]["status"] in ("success", "error")
            ),
            timeout,
        )
        assert frame["data"]["status"] == "success", frame["data"]
        return frame

    def close(self) -> None:
        try:
            self._send_frame(0x8, struct.pack(">H", 1000))
        except OSError:
            pass  # already closed by the server
        finally:
            self.sock.close()


# ------------------------------------------------------------------------ helpers


def isolated_redis_env(first_db: int) -> dict[str, str]:
    """Production profile only: Redis databases of our own for the channel layer and broker.

    tests/live.py gives every live server the same two (5 and 6), so servers of suites that
    run at the same time on one machine share groups ("thread.1") and each other's Celery
    messages. These are emptied first, so no stale message reaches our worker.
    """
    url = os.environ.get("REDIS_URL", "")
    if not url:
        return {}
    import redis

    parts = urlsplit(url)
    env = {
        "REDIS_URL": urlunsplit(parts._replace(path=f"/{first_db}")),
        "CELERY_BROKER_URL": urlunsplit(parts._replace(path=f"/{first_db + 1}")),
    }
    for address in env.values():
        redis.Redis.from_url(address).flushdb()
    return env


def login(origin: str, username: str) -> httpx.Client:
    client = httpx.Client(base_url=origin, timeout=60)
    form = client.get("/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
    response = client.post(
        "/login/",
        data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": token},
    )
    assert response.status_code == 302, response.text[:500]
    return client


def reload_snapshot(client: httpx.Client, thread_id: int) -> dict[str, Any]:
    """What a browser gets on reload: the snapshot embedded in the thread page."""
    page = client.get(f"/w/acme/t/{thread_id}/")
    assert page.status_code == 200
    found = re.search(
        r'<script id="thread-snapshot" type="application/json">(.*?)</script>', page.text, re.S
    )
    return json.loads(html.unescape(found.group(1)))


def media_parts(call: dict[str, Any]) -> list[dict[str, Any]]:
    parts = (call.get("result") or {}).get("parts") or []
    return [p for p in parts if p["type"] in ("image", "file")]


@dataclass
class Scenario:
    server: LiveAtrium
    thread_id: int
    owner: httpx.Client
    outsider: httpx.Client
    socket: LiveSocket
    calls: dict[str, int] = field(default_factory=dict)  # tool key → call id
    placeholders: dict[str, dict[str, Any]] = field(default_factory=dict)  # finished events
    staged_snapshot: dict[str, Any] = field(default_factory=dict)
    final_snapshot: dict[str, Any] = field(default_factory=dict)
    media_events: dict[int, dict[str, Any]] = field(default_factory=dict)  # asset id → event
    measures: dict[str, float] = field(default_factory=dict)
    worker: Any = None

    def asset_of(self, key: str) -> dict[str, Any]:
        (part,) = media_parts(self.placeholders[key]["data"])
        return part["asset"]

    def last_live_call(self, call_id: int) -> dict[str, Any]:
        return [
            f["data"]
            for f in self.socket.frames
            if f.get("kind") == "toolcall" and f["data"]["id"] == call_id
        ][-1]


# ------------------------------------------------------------------------ the scenario


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    var_dir = tmp_path_factory.mktemp("media-e2e") / "var"
    env = {"ATRIUM_MEDIA_INLINE_LIMIT": "256", **isolated_redis_env(11)}
    server = LiveAtrium(var_dir=var_dir, extra_env=env).setup()
    media_server = str(ROOT / "examples" / "media" / "server.py")
    seeded = json.loads(
        server.shell(SEED.format(password=PASSWORD, server=media_server)).strip().splitlines()[-1]
    )
    server.start()  # the web server only: no worker yet
    owner, outsider = login(server.app_origin, "olivia"), login(server.app_origin, "oscar")
    ws = LiveSocket(
        server.app_origin,
        f"/ws/threads/{seeded['thread']}/?caps=interactiveToolUi",
        f"sessionid={owner.cookies['sessionid']}",
    )
    ws.wait_for(lambda f: f.get("type") == "hello")
    run = Scenario(server, seeded["thread"], owner, outsider, ws)
    try:
        _run(run)
        yield run
    finally:
        ws.close()
        owner.close()
        outsider.close()
        server.stop()


def _run(run: Scenario) -> None:
    ws, web = run.socket, run.server.processes[0].pid
    # Warm up (MCP connection, imports, first queries) so the measurement below is the
    # large result alone.
    ws.finished(ws.call("get_audio", {"seconds": 0.1}))
    before = memory_kib(web)
    reset_peak_memory(web)  # the peak of this call, not of everything before it

    started = time.monotonic()
    large_id = ws.call("get_large", {"megabytes": LARGE_MB, "kind": "video"})
    large = ws.finished(large_id)
    arrived = run.socket.received_at[run.socket.frames.index(large)]
    after = memory_kib(web)
    run.calls["get_large"] = large_id
    run.placeholders["get_large"] = large
    run.measures.update(
        large_round_trip_s=arrived - started,
        large_tool_latency_ms=large["data"]["latencyMs"],
        # What the host adds after the tool's answer has fully arrived: normalizing,
        # decoding, staging 50 MB, the transaction, the broadcast.
        large_host_overhead_ms=(arrived - started) * 1000 - large["data"]["latencyMs"],
        rss_before_mib=before["VmRSS"] / 1024,
        hwm_after_mib=after["VmHWM"] / 1024,
        hwm_growth_mib=(after["VmHWM"] - before["VmRSS"]) / 1024,
        rss_after_mib=after["VmRSS"] / 1024,
    )

    for key, arguments in TOOLS.items():
        call_id = ws.call(key.split("#")[0], arguments)
        run.calls[key] = call_id
        run.placeholders[key] = ws.finished(call_id)
    run.staged_snapshot = reload_snapshot(run.owner, run.thread_id)

    # Now a worker: the broker kept every message while there was none.
    expected = {run.asset_of(key)["id"] for key in run.placeholders}
    worker_started = time.monotonic()
    run.worker = run.server.start_worker()
    while not expected <= set(run.media_events):
        frame = ws.wait_for(
            lambda f: f.get("kind") == "media" and f["data"]["id"] not in run.media_events,
            timeout=120,
        )
        run.media_events[frame["data"]["id"]] = frame["data"]
        run.measures[f"ready_after_worker_start_s#{frame['data']['id']}"] = (
            time.monotonic() - worker_started
        )
    # The toolcall event that follows each media event in the same transaction.
    for call_id in run.calls.values():
        ws.wait_for(
            lambda f, call_id=call_id: (
                f.get("kind") == "toolcall"
                and f["data"]["id"] == call_id
                and f["data"]["status"] == "success"
                and all(p["asset"]["status"] != "staged" for p in media_parts(f["data"]))
            ),
            timeout=30,
        )
    run.final_snapshot = reload_snapshot(run.owner, run.thread_id)
    run.measures["websocket_reconnects"] = ws.reconnects
    print("\nmedia e2e measures:", json.dumps(run.measures, indent=1))


# ------------------------------------------------------------------------ tests


def test_results_appear_at_once_with_placeholders_while_no_worker_runs(scenario):
    for key, frame in scenario.placeholders.items():
        (part,) = media_parts(frame["data"])
        assert part["asset"]["status"] == "staged", key
        assert part["asset"]["id"] and "url" not in part["asset"]
    large = scenario.asset_of("get_large")
    assert large["size"] == LARGE_MB * MIB
    # DESIGN §9's 200 ms for the placeholder is a speed target: bench/media.py measures it
    # against a floor from the same run. A timed assertion here failed at 441 ms on a slow
    # phase of two busy cores (CI, session 19) with nothing wrong. What it guarded — the
    # 50 MB payload decoded on the request path — is caught by the memory test below.

    # A reload while nothing is persisted yet shows the same placeholders.
    calls = {c["id"]: c for c in scenario.staged_snapshot["toolCalls"]}
    for key, frame in scenario.placeholders.items():
        assert calls[scenario.calls[key]] == frame["data"], key


def test_the_asgi_process_never_holds_the_payload(scenario):
    """DESIGN §9: the web server's peak RSS grows by at most 16 MiB for a 50 MB video: the
    stdio transport streams the base64 text to a spool file as it arrives, staging renames that
    file, and the worker decodes it (was ~67–76 MiB: the base64 text once, built in place)."""
    growth = scenario.measures["hwm_growth_mib"]
    assert growth <= MEDIA_RSS_GROWTH_MIB, (
        f"the web server's peak RSS grew by {growth:.0f} MiB for a {LARGE_MB} MiB result, over "
        f"{MEDIA_RSS_GROWTH_MIB} MiB ({scenario.measures})"
    )


def test_media_becomes_ready_live_once_a_worker_starts(scenario):
    events = scenario.media_events
    image = events[scenario.asset_of("get_image")["id"]]
    audio = events[scenario.asset_of("get_audio")["id"]]
    video = events[scenario.asset_of("get_video")["id"]]
    blob = events[scenario.asset_of("get_blob")["id"]]
    large = events[scenario.asset_of("get_large")["id"]]
    for event in (image, audio, video, blob, large):
        assert event["status"] == "ready" and event["url"] == f"/media/{event['id']}/"
        assert event["reason"] is None
    assert (image["width"], image["height"]) == (1600, 900)
    assert image["thumbnailUrl"] == f"/media/{image['id']}/thumbnail/"
    assert audio["duration"] == 2.0 and audio["thumbnailUrl"] is None
    assert (video["width"], video["height"], video["duration"]) == (320, 240, 2.0)
    assert video["posterUrl"] == f"/media/{video['id']}/poster/"
    assert (large["width"], large["height"]) == (640, 360) and large["posterUrl"]
    assert large["size"] == LARGE_MB * MIB
    assert image["toolCallId"] == scenario.calls["get_image"]


def test_bomb_and_lying_files_are_rejected_with_a_clear_reason(scenario):
    events = scenario.media_events
    bomb = events[scenario.asset_of("get_bomb")["id"]]
    assert bomb["status"] == "rejected" and bomb["url"] is None
    assert bomb["reason"] == (
        "The image is larger than 50 megapixels (50000 × 50000 pixels; "
        "decompression bomb protection)."
    )
    for key in ("get_lying_file", "get_lying_file#resource"):
        lie = events[scenario.asset_of(key)["id"]]
        assert (lie["status"], lie["reason"]) == ("rejected", LIE)


def test_a_reload_shows_exactly_what_live_clients_saw(scenario):
    stored = {c["id"]: c for c in scenario.final_snapshot["toolCalls"]}
    for key, call_id in scenario.calls.items():
        live = scenario.last_live_call(call_id)
        assert stored[call_id] == live, key
        (part,) = media_parts(live)
        event = dict(scenario.media_events[part["asset"]["id"]])
        assert event.pop("toolCallId") == call_id
        assert part["asset"] == event


def test_range_requests_and_streaming_downloads(scenario):
    owner = scenario.owner
    audio = scenario.media_events[scenario.asset_of("get_audio")["id"]]
    first = owner.get(audio["url"], headers={"Range": "bytes=0-11"})
    assert first.status_code == 206 and first.content[:4] == b"RIFF"
    assert first.headers["content-range"] == f"bytes 0-11/{audio['size']}"
    assert first.headers["content-type"] == "audio/wav"
    beyond = owner.get(audio["url"], headers={"Range": f"bytes={audio['size']}-"})
    assert beyond.status_code == 416

    large = scenario.media_events[scenario.asset_of("get_large")["id"]]
    tail = owner.get(large["url"], headers={"Range": f"bytes={large['size'] - 16}-"})
    assert tail.status_code == 206 and len(tail.content) == 16
    # The whole 50 MB through the web server: its memory must not grow by the file's size.
    received = 0
    with (
        RssGrowth([scenario.server.processes[0].pid]) as web,
        owner.stream("GET", large["url"]) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-length"] == str(large["size"])
        assert response.headers["content-type"] == "video/x-msvideo"
        for chunk in response.iter_bytes():
            received += len(chunk)
    assert received == large["size"]
    growth_mib = web.most_mib()
    scenario.measures["download_rss_growth_mib"] = growth_mib
    # Streamed with backpressure (uvicorn pauses the response while the socket's buffer is
    # full), so the server holds a buffer, not the file, however slowly this client reads.
    # Under daphne (no backpressure, django/daphne#170) this grew 28-73 MiB on a busy machine.
    assert growth_mib < MEDIA_RSS_GROWTH_MIB, f"the web server grew {growth_mib:.1f} MiB"


def test_media_urls_are_for_members_only(scenario):
    image = scenario.media_events[scenario.asset_of("get_image")["id"]]
    video = scenario.media_events[scenario.asset_of("get_video")["id"]]
    urls = [image["url"], image["thumbnailUrl"], video["url"], video["posterUrl"]]
    anonymous = httpx.Client(base_url=scenario.server.app_origin, timeout=30)
    for url in urls:
        assert scenario.owner.get(url).status_code == 200
        assert scenario.outsider.get(url).status_code == 404
        assert anonymous.get(url).status_code == 404
    anonymous.close()
    response = scenario.owner.get(image["url"])
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["cache-control"] == "private, max-age=31536000, immutable"


def test_a_worker_killed_mid_task_loses_nothing(scenario):
    """SIGKILL the worker while it is inside the task; a new worker finishes the job."""
    server, ws = scenario.server, scenario.socket
    scenario.worker.terminate()  # a clean stop first: the next call must wait in staging
    scenario.worker.wait(timeout=30)
    call_id = ws.call("get_video", {"seconds": 1.0})
    finished = ws.finished(call_id)
    (part,) = media_parts(finished["data"])
    asset_id = part["asset"]["id"]
    key = server.shell(
        f"from chat.media.models import MediaAsset; print(MediaAsset.objects.get(pk={asset_id})"
        ".staging_path)"
    ).split()[-1]
    staging = server.var_dir / "staging" / key
    kept = staging.with_name(key + ".kept")
    shutil.move(staging, kept)
    os.mkfifo(staging)  # the worker's read blocks here: it is reliably "mid-task"
    worker = server.start_worker()
    attempts = _wait_for_attempts(server, asset_id, 1)
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(timeout=10)
    staging.unlink()
    shutil.move(kept, staging)

    scenario.worker = server.start_worker()
    # A client that comes back asks for what it missed (the protocol's replay) and then
    # follows live events.
    resumed = LiveSocket(
        server.app_origin,
        f"/ws/threads/{scenario.thread_id}/?caps=interactiveToolUi&after={finished['seq']}",
        f"sessionid={scenario.owner.cookies['sessionid']}",
    )
    try:
        event = resumed.wait_for(
            lambda f: f.get("kind") == "media" and f["data"]["id"] == asset_id, 90
        )
    finally:
        resumed.close()
    assert event["data"]["status"] == "ready" and event["data"]["duration"] == 1.0
    assert attempts == 1
    assert _attempts(server, asset_id) >= 2


def _attempts(server: LiveAtrium, asset_id: int) -> int:
    out = server.shell(
        f"from chat.media.models import MediaAsset; print(MediaAsset.objects.get(pk={asset_id}).attempts)"
    )
    return int(out.split()[-1])


def _wait_for_attempts(server: LiveAtrium, asset_id: int, wanted: int) -> int:
    # Polled: the worker is another process; its progress is only in the database.
    return poll(
        lambda: (n := _attempts(server, asset_id)) >= wanted and n,
        timeout=60,
        interval=0.2,
        reason=f"the worker starts attempt {wanted} of asset {asset_id}",
    )


def test_report_measures(scenario):
    """Not a check: prints the numbers for the report (run with -s)."""
    print(f"\n{sys.argv[0]}: media e2e measures:\n{json.dumps(scenario.measures, indent=1)}")
