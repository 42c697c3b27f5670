"""The MCP Apps lifecycle of a view, in real Chromium against a real web server (DESIGN §7).

A view is mounted when its call starts: it receives `tool-input-partial` while the model
streams the arguments, `tool-input` once, then `tool-result` — or `tool-cancelled` when the
call is cancelled or rejected — and `ui/resource-teardown` before it goes away. The app is
our `examples/lifecycle` recorder, which lists every notification it receives (and whose
server records each `notifications/cancelled`); the model is the fake OpenAI-compatible
server of `tests/chat/fake_llm.py`, its stream paced by gates the test opens.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from audit.models import AuditEvent
from tests.browser.helpers_ui import CSP_WATCH_JS, login
from tests.browser.test_views import HostPageWatch, app_frame, call_tool, view_row, wait_ready
from tests.chat.fake_llm import FakeLLM, openai_text, openai_tool_calls
from tests.live import ROOT, LiveAtrium
from tests.waiting import poll

pytestmark = [pytest.mark.browser, pytest.mark.slow]

THREADS = ["stream", "cancel", "reject", "failure", "teardown", "permission"]
LIFECYCLE = {
    "partial": "ui/notifications/tool-input-partial",
    "input": "ui/notifications/tool-input",
    "result": "ui/notifications/tool-result",
    "cancelled": "ui/notifications/tool-cancelled",
}

SEED = """
import json, sys
from django.contrib.auth import get_user_model
from chat import services
from bindings.services.bindings import binding_create
from mcp_bridge.services.servers import server_add

U = get_user_model()
owner = U.objects.create_user("olivia", password={password!r}, first_name="Olivia", last_name="Park")
member = U.objects.create_user("marco", password={password!r}, first_name="Marco", last_name="Rossi")
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
services.membership_set(workspace=workspace, user=member, role="member")
workspace.provider = "openai"
workspace.model = "fake-model"
workspace.provider_base_url = {llm_url!r}
workspace.provider_api_key = "sk-test-lifecycle"
workspace.save()
threads = {{
    name: services.thread_create(workspace=workspace, title="Lifecycle " + name, actor=owner).pk
    for name in {threads!r}
}}
server = server_add(
    name="Lifecycle recorder", slug="lifecycle", transport="stdio", command=sys.executable,
    args=[{server_py!r}, "--record", {record!r}],
)
binding = binding_create(server=server, workspace=workspace)
print(json.dumps({{"threads": threads, "binding": binding.pk}}))
"""


@dataclass
class World:
    server: LiveAtrium
    llm: FakeLLM
    password: str
    threads: dict[str, int]
    binding: int
    record: Path

    def thread_url(self, name: str) -> str:
        return f"{self.server.app_origin}/w/acme/t/{self.threads[name]}/"

    def shell_json(self, code: str) -> Any:
        return json.loads(self.server.shell(code).strip().splitlines()[-1])

    def audit(self, **filters: Any) -> list[dict[str, Any]]:
        """The live server's audit rows matching ``filters``, oldest first."""

        def query(alias: str) -> list[dict[str, Any]]:
            rows = AuditEvent.objects.using(alias).filter(**filters).order_by("id")
            return [
                {
                    "type": r.event_type,
                    "reason": r.reason,
                    "decision": r.decision,
                    "actor": r.actor_kind,
                    "user": r.actor_user_id,
                    "tool": r.tool_name,
                    "extra": r.extra,
                }
                for r in rows
            ]

        return self.server.read(query)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("lifecycle")
    record = base / "cancelled.jsonl"
    llm = FakeLLM("openai").start()
    server = LiveAtrium(var_dir=base / "var").setup()
    password = "pw-" + secrets.token_urlsafe(10)
    seeded = json.loads(
        server.shell(
            SEED.format(
                password=password,
                llm_url=llm.base_url,
                threads=THREADS,
                server_py=str(ROOT / "examples" / "lifecycle" / "server.py"),
                record=str(record),
            )
        )
        .strip()
        .splitlines()[-1]
    )
    server.start()
    try:
        yield World(server, llm, password, seeded["threads"], seeded["binding"], record)
    finally:
        server.stop()
        llm.stop()


@pytest.fixture
def open_as(browser: Any, world: World) -> Iterator[Any]:
    contexts: list[Any] = []
    watches: list[HostPageWatch] = []

    def open_page(username: str, thread: str, *, color_scheme: str = "light") -> Any:
        context = browser.new_context(
            viewport={"width": 1180, "height": 900},
            color_scheme=color_scheme,
            device_scale_factor=1,
        )
        context.add_init_script(CSP_WATCH_JS)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(30_000)
        watches.append(HostPageWatch(page, world.server.app_origin))
        login(page, world.server.app_origin, username, world.password)
        page.goto(world.thread_url(thread))
        page.wait_for_selector("#conn-indicator[data-state=live]")
        return page

    yield open_page
    problems = [p for watch in watches for p in watch.problems()]
    for context in contexts:
        context.close()
    assert not problems, "CSP violations or script errors on the host page:\n" + "\n".join(problems)


# ---- helpers -------------------------------------------------------------------------------


def post(page: Any, text: str) -> None:
    box = page.locator("#composer-input")
    box.fill(text)
    box.press("Enter")


def received(app: Any) -> list[str]:
    """The lifecycle notifications the app has logged, in order (short names)."""
    names = {v: k for k, v in LIFECYCLE.items()}
    methods = app.locator("#log li code").all_inner_texts()
    return [names[f"ui/notifications/{m}"] for m in methods if f"ui/notifications/{m}" in names]


def expect_exact(app: Any, short: str, count: int) -> None:
    """Wait until the app has logged exactly `count` of this notification (e.g. `tool-input`)."""
    codes = app.locator("#log li code")
    expect(codes.filter(has_text=re.compile(f"^{re.escape(short)}$"))).to_have_count(
        count, timeout=30_000
    )


def shot(page: Any, directory: Path, name: str) -> None:
    page.screenshot(path=str(directory / f"lifecycle-{name}.png"))


def wait_for_file_line(path: Path, timeout: float = 30.0) -> list[dict[str, Any]]:
    """The server's record of notifications/cancelled. Polled: a file, no event reaches
    the test."""
    poll(
        lambda: path.exists() and path.read_text().strip(),
        timeout=timeout,
        interval=0.1,
        reason=f"the MCP server records notifications/cancelled in {path}",
    )
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ---- 1. streamed arguments: partials, then input, then result ----------------------------------


def test_a_streamed_call_feeds_its_view_partials_then_input_then_result(
    open_as, world, screenshots
):
    first_piece_seen = threading.Event()
    second_piece_seen = threading.Event()
    world.llm.push(
        openai_tool_calls(
            (
                "call_plan",
                "lifecycle__show_plan",
                [
                    '{"title": "Launch',
                    first_piece_seen,
                    ' plan", "steps": ["Draft the notes"',
                    second_piece_seen,
                    ', "Review", "Ship it"]}',
                ],
            )
        ),
        openai_text("The plan is on screen."),
    )
    page = open_as("olivia", "stream")
    post(page, "Plan the launch, please")

    # The view is there while the model is still writing the arguments.
    row = view_row(page, "show_plan")
    call_id = wait_ready(page, row)
    card = page.locator(f".toolcall[data-tool-call-id='{call_id}']")
    expect(card).to_have_attribute("data-status", "streaming")
    app = app_frame(row)
    expect_exact(app, "tool-input-partial", 1)
    expect(app.locator("#plan-title")).to_have_text("Launch")

    first_piece_seen.set()
    expect_exact(app, "tool-input-partial", 2)
    expect(app.locator("#plan-steps li")).to_have_count(1)
    assert received(app) == ["partial", "partial"]
    # A member sees the same live view, and can stop the answer (a Stop button).
    watcher = open_as("marco", "stream", color_scheme="dark")
    watcher_row = view_row(watcher, "show_plan")
    wait_ready(watcher, watcher_row)
    expect(app_frame(watcher_row).locator("#plan-steps li")).to_have_count(1)
    for theme, target in (("light", page), ("dark", watcher)):
        expect(target.locator(".msg-stop")).to_be_visible()
        target.locator(f".view-row[data-tool-call-id='{call_id}']").scroll_into_view_if_needed()
        shot(target, screenshots, f"streaming-{theme}")

    second_piece_seen.set()
    expect_exact(app, "tool-result", 1)
    expect(app.locator("#plan-steps li")).to_have_count(3)
    sequence = received(app)
    partials = sequence.count("partial")
    assert partials >= 2
    assert sequence == ["partial"] * partials + ["input", "result"], sequence
    expect(card).to_have_attribute("data-status", "success")

    # One row from the first streamed piece to the result: the decision filled it in.
    rows = world.shell_json(
        "import json\nfrom chat.models import ToolCall\n"
        f"print(json.dumps(list(ToolCall.objects.filter(thread_id={world.threads['stream']})"
        ".values('id', 'status', 'arguments'))))"
    )
    assert rows == [
        {
            "id": call_id,
            "status": "success",
            "arguments": {
                "title": "Launch plan",
                "steps": ["Draft the notes", "Review", "Ship it"],
            },
        }
    ]
    started = world.audit(event_type=320)
    assert [r["extra"]["tool_call_id"] for r in started] == [call_id]

    # After a reload the view gets the same sequence, up to where the call stands.
    page.reload()
    page.wait_for_selector("#conn-indicator[data-state=live]")
    row = view_row(page, "show_plan")
    wait_ready(page, row)
    app = app_frame(row)
    expect_exact(app, "tool-result", 1)
    assert received(app) == ["input", "result"]


# ---- 2. cancel a running call: notifications/cancelled, tool-cancelled --------------------------


def test_cancelling_a_running_call_tells_the_server_and_the_view(open_as, world, screenshots):
    page = open_as("olivia", "cancel")
    watcher = open_as("marco", "cancel", color_scheme="dark")
    call_tool(page, "lifecycle.slow_task", {"label": "Index the archive", "seconds": 300})
    row = view_row(page, "slow_task")
    call_id = wait_ready(page, row)
    app = app_frame(row)
    expect_exact(app, "tool-input", 1)
    card = page.locator(f".toolcall[data-tool-call-id='{call_id}']")
    expect(card).to_have_attribute("data-status", "running")
    # The server is working on it (it reports progress) before it is cancelled.
    expect(card.locator(".tc-progress")).to_be_visible()

    card.locator(".tc-cancel").click()
    expect_exact(app, "tool-cancelled", 1)
    assert received(app) == ["input", "cancelled"]
    expect(card).to_have_attribute("data-status", "cancelled")
    expect(card).to_contain_text("Olivia Park cancelled this call.")
    # Everyone sees it live: the member's page, and the member's view.
    other = watcher.locator(f".toolcall[data-tool-call-id='{call_id}']")
    expect(other).to_have_attribute("data-status", "cancelled")
    other_row = view_row(watcher, "slow_task")
    wait_ready(watcher, other_row)
    expect_exact(app_frame(other_row), "tool-cancelled", 1)

    lines = wait_for_file_line(world.record)
    assert [(line["method"], line["label"]) for line in lines] == [
        ("notifications/cancelled", "Index the archive")
    ]
    cancelled = world.audit(event_type=321)
    assert len(cancelled) == 1
    assert cancelled[0]["reason"] == "cancelled_by_member" and cancelled[0]["actor"] == "user"
    assert cancelled[0]["extra"]["tool_call_id"] == call_id

    for theme, target in (("light", page), ("dark", watcher)):
        target.locator(f".toolcall[data-tool-call-id='{call_id}']").scroll_into_view_if_needed()
        shot(target, screenshots, f"cancelled-{theme}")


# ---- 3. a rejected approval: tool-cancelled --------------------------------------------------


def test_a_view_waits_with_its_approval_card_and_a_rejection_cancels_it(
    open_as, world, screenshots
):
    world.llm.push(
        openai_tool_calls(
            ("call_risky", "lifecycle__risky_change", ['{"target": ', '"the billing plan"}'])
        ),
        openai_text("Understood, I left the billing plan alone."),
    )
    page = open_as("olivia", "reject")
    dark = open_as("marco", "reject", color_scheme="dark")
    post(page, "Switch the billing plan")
    row = view_row(page, "risky_change")
    call_id = wait_ready(page, row)
    card = page.locator(f".toolcall[data-tool-call-id='{call_id}']")
    expect(card).to_have_attribute("data-status", "awaiting_approval")
    app = app_frame(row)
    expect_exact(app, "tool-input", 1)
    expect(app.locator("#plan-title")).to_have_text("Change the billing plan")
    # The view and its approval card are shown together.
    expect(card.locator(".approval")).to_be_visible()
    expect(row).to_be_visible()
    dark_row = view_row(dark, "risky_change")
    wait_ready(dark, dark_row)
    expect(app_frame(dark_row).locator("#plan-title")).to_have_text("Change the billing plan")
    for theme, target in (("light", page), ("dark", dark)):
        target.locator(f".toolcall[data-tool-call-id='{call_id}']").scroll_into_view_if_needed()
        shot(target, screenshots, f"approval-with-view-{theme}")

    card.locator("button[data-action=reject]").click()
    expect_exact(app, "tool-cancelled", 1)
    assert received(app) == ["input", "cancelled"]
    expect(card).to_have_attribute("data-status", "rejected")
    expect_exact(app_frame(dark_row), "tool-cancelled", 1)


def test_a_call_that_fails_on_the_server_cancels_its_view(open_as, world):
    page = open_as("olivia", "failure")
    # The server refuses the arguments (no steps): no result exists, so no tool-result.
    call_tool(page, "lifecycle.show_plan", {"title": "Broken"})
    row = view_row(page, "show_plan")
    call_id = wait_ready(page, row)
    card = page.locator(f".toolcall[data-tool-call-id='{call_id}']")
    expect(card).to_have_attribute("data-status", "error")
    app = app_frame(row)
    expect_exact(app, "tool-cancelled", 1)
    assert received(app) == ["input", "cancelled"]


# ---- 4. closing a view: ui/resource-teardown first ----------------------------------------------


def test_closing_a_view_sends_teardown_first_and_waits_for_the_answer(open_as, world):
    page = open_as("olivia", "teardown")
    call_tool(page, "lifecycle.show_plan", {"title": "Retro", "steps": ["Wins", "Fixes"]})
    row = view_row(page, "show_plan")
    call_id = wait_ready(page, row)
    app = app_frame(row)
    expect_exact(app, "tool-result", 1)

    outcome = page.evaluate(
        """async (id) => {
            const row = document.querySelector(`.view-row[data-tool-call-id="${id}"]`);
            const started = performance.now();
            const framed = () => !!row.querySelector("iframe.view-frame");
            const before = framed();
            await window.AtriumAppViews.unmount(row);
            return {before, after: framed(), ms: performance.now() - started};
        }""",
        call_id,
    )
    assert outcome["before"] and not outcome["after"]
    # Answered, not timed out: the host waits at most 3 s for the answer.
    assert outcome["ms"] < 3000, outcome

    # The app saw the teardown (after its whole lifecycle) while it was still mounted.
    def teardown_logs() -> list[dict[str, Any]]:
        return [
            json.loads(r["extra"]["data"])
            for r in world.audit(event_type=406, thread_id=world.threads["teardown"])
            if '"teardown"' in r["extra"].get("data", "")
        ]

    # Polled: the view's log line is an audit row of the live server's database.
    logs = poll(teardown_logs, timeout=30, reason="the view's teardown log, audited")
    assert logs[0]["received"][-1] == "ui/resource-teardown"
    seen = [m for m in logs[0]["received"] if m in LIFECYCLE.values()]
    assert seen == [LIFECYCLE["input"], LIFECYCLE["result"]]


# ---- 5. permission requests ---------------------------------------------------------------------


def test_an_owner_allows_a_permission_from_the_view_and_it_remounts(open_as, world, screenshots):
    owner = open_as("olivia", "permission")
    member = open_as("marco", "permission", color_scheme="dark")
    call_tool(owner, "lifecycle.voice_note", {"topic": "standup"})
    row = view_row(owner, "voice_note")
    wait_ready(owner, row)
    frame = row.locator("iframe.view-frame")
    assert (frame.get_attribute("allow") or "") == ""
    prompt = row.locator(".view-permission")
    expect(prompt).to_contain_text("Lifecycle recorder asks to use the microphone")
    expect(prompt.get_by_role("button", name="Allow for this app")).to_be_visible()
    expect(prompt.get_by_role("button", name="Not now")).to_be_visible()

    member_row = view_row(member, "voice_note")
    wait_ready(member, member_row)
    member_prompt = member_row.locator(".view-permission")
    expect(member_prompt).to_contain_text("waiting for a workspace owner")
    expect(member_prompt.locator("button")).to_have_count(0)
    for theme, target, where in (("light", owner, row), ("dark", member, member_row)):
        where.scroll_into_view_if_needed()
        shot(target, screenshots, f"permission-prompt-{theme}")

    # A member cannot grant it (refused and audited), whatever the client sends.
    refused = member.evaluate(
        """(id) => window.AtriumClient.send({type: "view.grant_permissions", toolCallId: id,
            permissions: ["microphone"]})""",
        int(row.get_attribute("data-tool-call-id")),
    )
    assert refused["ok"] is False and refused["error"]["code"] == "forbidden"

    prompt.get_by_role("button", name="Allow for this app").click()
    expect(row.locator(".view-permission")).to_have_count(0, timeout=30_000)
    expect(row.locator("iframe.view-frame")).to_have_attribute("allow", "microphone")
    wait_ready(owner, row)
    expect_exact(app_frame(row), "tool-result", 1)

    granted = world.shell_json(
        "import json\nfrom bindings.models import AppBinding\n"
        f"print(json.dumps(AppBinding.objects.get(pk={world.binding}).granted_permissions))"
    )
    assert granted == ["microphone"]
    assert [r["reason"] for r in world.audit(event_type=421)] == ["forbidden"]
    assert [r["reason"] for r in world.audit(event_type=420)] == ["allowed_for_app"]
    changed = world.audit(event_type=601, binding_id=world.binding)
    assert changed and changed[-1]["reason"] == "view_permission_prompt"
    # The old document was told before it was replaced.
    teardowns = [
        json.loads(r["extra"]["data"])
        for r in world.audit(event_type=406, thread_id=world.threads["permission"])
        if '"teardown"' in r["extra"].get("data", "")
    ]
    assert teardowns and teardowns[0]["reason"] == "permissions changed"
