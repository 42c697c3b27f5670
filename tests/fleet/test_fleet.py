"""The fleet, for real (issue 15): `scripts/fleet.sh` starts nginx in front of 3 web
processes, 2 Celery workers and beat on PostgreSQL + Redis; everything here goes through
nginx. Processes are SIGKILLed mid-turn, mid-tool-call and mid-media: members reconnect
to the web processes left, resume from their last sequence number, and see everything end —
no gap, no duplicate event.

One fleet for the module (starting it takes ~10 s); the tests run in file order and the
later ones run on what the earlier ones left alive (each leaves at least one web process and
one worker).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import threading
import time
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from tests.chat.fake_llm import FakeLLM, openai_text
from tests.live import RssGrowth
from tests.resilience.support import BOARD, FAULTY, MEDIA, PRODUCTION, seed_workspace, stdio
from tests.waiting import apoll

from .support import Fleet, Member, is_call, is_message

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not PRODUCTION,
        reason="the fleet runs the production profile only (PostgreSQL + Redis): run under "
        "scripts/with-production-services.sh, as CI's production pass does",
    ),
]

APPROVAL_TTL = 3  # seconds
THREADS = ["approval", "turn", "call", "media"]
MIB = 1024 * 1024
# What the app says of a media file and nginx must pass on (chat/media/views.py).
APP_MEDIA_HEADERS = (
    "content-type",
    "content-disposition",
    "cache-control",
    "etag",
    "x-content-type-options",
    "content-security-policy",
    "cross-origin-resource-policy",
    "vary",
)


@pytest.fixture(scope="module")
def llm():
    fake = FakeLLM("openai").start()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, llm):
    var_dir = tmp_path_factory.mktemp("fleet")
    fleet = Fleet.start(
        var_dir,
        {
            "ATRIUM_APPROVAL_TTL": str(APPROVAL_TTL),
            "ATRIUM_SWEEP_INTERVAL": "1",
            # A killed worker's unacknowledged message goes to the other one after 5 s.
            "ATRIUM_BROKER_VISIBILITY_TIMEOUT": "5",
        },
    )
    try:
        fleet.seeded = seed_workspace(
            fleet.server,
            workspace="Fleet",
            llm=llm.base_url,
            threads=THREADS,
            servers={
                "kanban": stdio(BOARD, BOARD_STATE_FILE=str(var_dir / "board.json")),
                "faulty": stdio(FAULTY),
                "mediabox": stdio(MEDIA),
            },
        )
        yield fleet
    finally:
        fleet.stop()


def _members(fleet: Fleet, thread: str) -> tuple[Member, Member]:
    seeded = fleet.seeded
    thread_id = seeded["threads"][thread]
    return (
        Member(fleet.server, seeded["cookies"]["olivia"], thread_id),
        Member(fleet.server, seeded["cookies"]["marco"], thread_id),
    )


# ------------------------------------------------------------------------------ routing


def test_app_and_sandbox_hosts_go_round_robin_through_nginx(fleet):
    server = fleet.server
    web_ports = {p.port for p in fleet.named("web")}
    access_log = fleet.server.var_dir / "log" / "nginx-access.log"
    start = len(access_log.read_text())
    for _ in range(6):
        page = httpx.get(f"{server.app_origin}/login/")
        assert page.status_code == 200
    # A sandbox host ("<server-key>.localhost") reaches the sandbox routes, not the app.
    sandbox = httpx.get(
        f"http://127.0.0.1:{server.port}/sandbox/not-a-token/",
        headers={"Host": f"kanban.localhost:{server.port}"},
    )
    assert sandbox.status_code in (403, 404), sandbox.status_code
    assert "set-cookie" not in sandbox.headers
    app_only = httpx.get(
        f"http://127.0.0.1:{server.port}/login/",
        headers={"Host": f"kanban.localhost:{server.port}"},
    )
    assert app_only.status_code == 404  # the app's pages are not served on a sandbox host

    lines = access_log.read_text()[start:].splitlines()
    used = {int(m.group(1)) for m in re.finditer(r"127\.0\.0\.1:(\d+) ", "\n".join(lines))}
    assert used == web_ports, (used, web_ports)  # every web process took its turn


def test_the_sandbox_page_of_a_view_is_served_through_nginx(fleet):
    asyncio.run(_sandbox_page(fleet))


async def _sandbox_page(fleet: Fleet) -> None:
    from bench.harness import open_view

    olivia, _ = _members(fleet, "approval")
    await olivia.connect()
    view = await open_view(olivia.sock, "/call kanban.list_items", "list_items")
    url = view["sandboxUrl"]
    parts = urlsplit(url)
    assert parts.hostname.startswith("kanban-"), url  # the server's own origin in its workspace
    # "*.localhost" needs no DNS in a browser; here the Host header says it.
    async with httpx.AsyncClient() as client:
        page = await client.get(
            urlunsplit(parts._replace(netloc=f"127.0.0.1:{parts.port}")),
            headers={"Host": parts.netloc, "Referer": fleet.server.app_origin + "/"},
        )
    assert page.status_code == 200, (url, page.status_code, page.text[:300])
    assert "set-cookie" not in page.headers
    await olivia.close()


# ----------------------------------------------------------------------------- scheduler


def test_approval_expires_on_time_with_nobody_touching_the_thread(fleet):
    asyncio.run(_approval_expiry(fleet))


async def _approval_expiry(fleet: Fleet) -> None:
    from bench.harness import open_view

    olivia, marco = _members(fleet, "approval")
    await olivia.connect()
    await marco.connect()
    # A person's own /call is consent; a view's destructive call asks for approval.
    view = await open_view(olivia.sock, "/call kanban.list_items", "list_items")
    asking = asyncio.ensure_future(
        olivia.sock.request(
            {
                "type": "view.request",
                "token": view["token"],
                "method": "tools/call",
                "params": {"name": "delete_item", "arguments": {"id": "ATR-101"}},
            },
            timeout=120,
        )
    )
    await marco.wait_for(lambda f: is_call(f, tool="delete_item", status="awaiting_approval"))
    asked_at = time.monotonic()  # nobody in the thread acts from now on
    ended = await marco.wait_for(lambda f: is_call(f, tool="delete_item", status="rejected"))
    waited = time.monotonic() - asked_at
    assert ended["error"]["code"] == "approval_expired", ended
    assert waited < APPROVAL_TTL + 30, waited  # beat sweeps every second
    assert fleet.rows("select status from bindings_approvalrequest") == [("expired",)]
    refused = await asking
    assert refused["ok"] is False, refused
    for member in (olivia, marco):
        assert member.sequence_problems() == []
        await member.close()


# ------------------------------------------------------------------------ web process SIGKILL


def test_web_process_killed_mid_turn_and_mid_tool_call(fleet, llm):
    gate = threading.Event()
    try:
        asyncio.run(_web_process_killed(fleet, llm, gate))
    finally:
        gate.set()  # the fake model's stream to the dead process ends


async def _web_process_killed(fleet: Fleet, llm: FakeLLM, gate: threading.Event) -> None:
    olivia_turn, marco_turn = _members(fleet, "turn")
    olivia_call, marco_call = _members(fleet, "call")
    members = (olivia_turn, marco_turn, olivia_call, marco_call)
    for member in members:
        await member.connect()
    turn_thread, call_thread = olivia_turn.thread, olivia_call.thread

    # A model turn that streams a first piece, then hangs (the fake model waits at a gate).
    slow_answer = openai_text("Thinking", " it over.")
    slow_answer.frames.insert(2, gate)
    llm.push(slow_answer)
    posted = await olivia_turn.sock.request({"type": "message.post", "text": "What is the plan?"})
    assert posted["ok"], posted
    streaming = await marco_turn.wait_for(
        lambda f: is_message(f, role="assistant", status="streaming")
    )
    ((holder,),) = fleet.rows(f"select holder from chat_turnlease where thread_id = {turn_thread}")

    # A tool call that runs for minutes.
    started = await olivia_call.sock.request(
        {
            "type": "tool.call",
            "server": "faulty",
            "tool": "slow",
            "arguments": {"seconds": 600, "tag": "fleet"},
        }
    )
    assert started["ok"], started
    call_id = started["result"]["toolCallId"]
    await marco_call.wait_for(lambda f: is_call(f, tool="slow", status="running"))
    runner = await _runner_of(fleet, call_id)

    # SIGKILL the web process running the turn and the one running the call (maybe the same).
    victims = {fleet.by_pid(int(name.split(":")[1])) for name in (holder, runner)}
    assert all(v.name.startswith("web") for v in victims), victims
    for victim in victims:
        fleet.kill(victim)

    # Both end visibly for every member, who reconnect through nginx when their web process
    # went (the sweeps: turn lease take-over, orphaned call failure).
    for member in (olivia_turn, marco_turn):
        failed = await member.wait_for(
            lambda f: (
                is_message(f, role="assistant", status="error")
                and f["data"]["id"] == streaming["id"]
            )
        )
        assert "stopped" in failed["text"], failed
    for member in (olivia_call, marco_call):
        ended = await member.wait_for(
            lambda f: is_call(f, tool="slow", status="error") and f["data"]["id"] == call_id
        )
        assert ended["error"]["code"] == "runner_lost", ended

    assert all(not v.alive() for v in victims)
    # The posters were on the killed processes (a turn / call runs where it was asked).
    assert olivia_turn.reconnects >= 1 and olivia_call.reconnects >= 1
    for member in members:
        assert member.sequence_problems() == [], (member.thread, member.sequence_problems())
        await _caught_up(member)
        assert member.sequence_problems() == []
        await member.close()
    assert fleet.rows(
        "select count(*) from bindings_auditevent where event_type = 140 "
        f"and thread_id = {turn_thread}"
    ) == [(1,)]
    assert fleet.rows(
        "select reason from bindings_auditevent where action = 'tool_result' "
        f"and thread_id = {call_thread}"
    ) == [("runner_lost",)]


async def _runner_of(fleet: Fleet, call_id: int) -> str:
    """The process that claimed the running call (chat.calls.runners claims after ~1 s)."""

    def runner() -> str:
        ((name,),) = fleet.rows(f"select runner from chat_toolcall where id = {call_id}")
        return name

    return await apoll(
        runner, timeout=30, interval=0.1, reason="the fleet's database (a claim sends no event)"
    )


async def _caught_up(member: Member) -> None:
    """Wait until the member has every event of the thread (a new socket's hello)."""
    from bench.harness import connect

    probe = await connect(member.server, member.cookie, member.thread)
    last = probe.hello["lastSeq"]
    await probe.close()
    await member.wait_for(lambda f: f["seq"] >= last, timeout=30)


# ------------------------------------------------------------------------ worker SIGKILL


def test_worker_killed_while_persisting_media(fleet):
    asyncio.run(_worker_killed(fleet))


async def _worker_killed(fleet: Fleet) -> None:
    olivia, marco = _members(fleet, "media")
    await olivia.connect()
    await marco.connect()
    workers = fleet.named("worker")
    logs_before = {w.name: len(fleet.log(f"celery-{w.name[-1]}.log")) for w in workers}

    started = await olivia.sock.request(
        {
            "type": "tool.call",
            "server": "mediabox",
            "tool": "get_large",
            "arguments": {"megabytes": 60, "kind": "video"},
        },
        timeout=120,
    )
    assert started["ok"], started
    call_id = started["result"]["toolCallId"]
    await marco.wait_for(
        lambda f: is_call(f, tool="get_large", status="success") and f["data"]["id"] == call_id
    )

    # The worker that took the persist task is killed as soon as it says so.
    busy = await _worker_persisting(fleet, workers, logs_before)
    fleet.kill(busy)
    ((asset_id, status),) = fleet.rows(
        f"select id, status from chat_mediaasset where tool_call_id = {call_id}"
    )
    assert status == "staged", "persisted before the kill: the test proved nothing"

    # The other worker gets the unacknowledged message (acks late) and finishes it; every
    # member sees the media ready.
    for member in (olivia, marco):
        await member.wait_for(
            lambda f: (
                f.get("kind") == "media"
                and (f.get("data") or {}).get("id") == asset_id
                and f["data"].get("status") == "ready"
            ),
            timeout=120,
        )
        assert member.sequence_problems() == []
        await member.close()
    assert not busy.alive()
    (other,) = [w for w in workers if w is not busy]
    # The other worker took the message (its "succeeded" line may follow the event).
    other_log = fleet.log(f"celery-{other.name[-1]}.log")[logs_before[other.name] :]
    assert re.search(r"persist_tool_media\[[^]]+\] received", other_log)
    ((status, attempts),) = fleet.rows(
        f"select status, attempts from chat_mediaasset where id = {asset_id}"
    )
    assert status == "ready" and attempts >= 1, (status, attempts)


async def _worker_persisting(fleet: Fleet, workers, logs_before):

    def taker():
        for worker in workers:
            text = fleet.log(f"celery-{worker.name[-1]}.log")[logs_before[worker.name] :]
            if re.search(r"persist_tool_media\[[^]]+\] received", text):
                return worker
        return None

    return await apoll(
        taker, timeout=60, interval=0.01, reason="two workers' log files (either may take it)"
    )


# ---------------------------------------------------------------------- media download


def test_nginx_sends_media_files_with_the_apps_headers_and_ranges(fleet):
    # The 60 MB video the previous test persisted.
    ((asset_id, size, sha256),) = fleet.rows(
        "select id, size, sha256 from chat_mediaasset where status = 'ready' "
        "order by size desc limit 1"
    )
    assert size >= 50 * MIB, size
    cookies = {"sessionid": fleet.seeded["cookies"]["olivia"]}
    path = f"/media/{asset_id}/"
    webs = [p for p in fleet.named("web") if p.alive()]
    # A web process checks access and answers with the redirect and the headers, no body.
    direct = httpx.get(
        f"http://127.0.0.1:{webs[0].port}{path}",
        cookies=cookies,
        headers={"Host": f"localhost:{fleet.server.port}"},
    )
    assert direct.status_code == 200 and direct.content == b"", direct.status_code
    assert direct.headers["x-accel-redirect"].startswith("/_media_files/")

    url = f"{fleet.server.app_origin}{path}"
    digest = hashlib.sha256()
    with (
        RssGrowth([p.pid for p in webs]) as growth,
        httpx.Client(cookies=cookies, timeout=60) as client,
    ):
        with client.stream("GET", url) as response:
            assert response.status_code == 200
            assert response.headers["content-length"] == str(size)
            for header in APP_MEDIA_HEADERS:
                assert response.headers.get(header) == direct.headers[header], header
            assert "x-accel-redirect" not in response.headers
            for chunk in response.iter_bytes():
                digest.update(chunk)
        etag = direct.headers["etag"]
        tail = client.get(url, headers={"Range": f"bytes={size - 16}-"})
        assert tail.status_code == 206 and len(tail.content) == 16
        assert tail.headers["content-range"] == f"bytes {size - 16}-{size - 1}/{size}"
        kept = client.get(url, headers={"Range": "bytes=0-3", "If-Range": etag})
        assert kept.status_code == 206 and len(kept.content) == 4
        assert client.get(url, headers={"If-None-Match": etag}).status_code == 304
        assert client.get(url, headers={"Range": f"bytes={size}-"}).status_code == 416
        assert httpx.get(url).status_code == 404  # no session: the app's answer
    assert digest.hexdigest() == sha256
    # The body never went through a web process: nginx sent the file.
    assert growth.most_mib() < 16, f"a web process grew {growth.most_mib():.1f} MiB"


# ------------------------------------------------------------------------------ shutdown


def test_ctrl_c_stops_every_process(fleet):
    assert fleet.stop() == 0
    assert [p.name for p in fleet.processes if p.alive()] == []
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{fleet.server.app_origin}/login/", timeout=2)
