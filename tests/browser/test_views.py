"""App views in real Chromium against a real web server (DESIGN §7-§8, docs/view-bridge.md).

One seeded server per module: every MCP server the tests use is registered and bound to
the workspace, and each test gets its own thread. Pages fail on CSP violations or
uncaught errors of the host page (the sandboxed views are watched by their own tests).

The views run in the real sandbox: host page on ``localhost:<port>``, each server's proxy
on ``<label>.localhost:<port>`` (one per server and workspace), the app in the proxy's inner
frame on that origin. Playwright reaches the app through
``row.frame_locator("iframe.view-frame").frame_locator("iframe")``.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from audit.models import AuditEvent
from chat.models import ToolCall
from tests.browser.helpers_ui import CSP_WATCH_JS, PageWatch, login
from tests.live import ROOT, LiveAtrium
from tests.waiting import poll

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NODE_SERVERS = ROOT / "tools" / "mcp-servers" / "node_modules" / "@modelcontextprotocol"
FIXTURES = ROOT / "tests" / "fixtures" / "mcp_servers"
THREADS = [
    "basic",
    "sysmon",
    "debug",
    "board",
    "legacy",
    "hostile",
    "theme",
    "reload",
    "burst",
    "sdk",
    "many",
]

SEED = """
import json, socket, sys
from pathlib import Path
from django.contrib.auth import get_user_model
from chat import services
from bindings.services.bindings import binding_create
from bindings.services.policies import tool_policy_set
from mcp_bridge.services.servers import server_add

PASSWORD = {password!r}
VAR = Path({var_dir!r})
ROOT = Path({root!r})
NODE = ROOT / "tools" / "mcp-servers" / "node_modules" / "@modelcontextprotocol"
U = get_user_model()
with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    LEGACY_PORT = probe.getsockname()[1]

def person(username, first, last):
    return U.objects.create_user(username, password=PASSWORD, first_name=first, last_name=last)

owner = person("olivia", "Olivia", "Park")
member = person("marco", "Marco", "Rossi")
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
services.membership_set(workspace=workspace, user=member, role="member")
threads = {{
    name: services.thread_create(workspace=workspace, title="Views " + name, actor=owner).pk
    for name in {threads!r}
}}

def bind(name, slug, command, args, env=None, auto=(), allowed=None):
    server = server_add(
        name=name, slug=slug, transport="stdio", command=command, args=[str(a) for a in args],
        env=env or {{}},
    )
    binding = binding_create(server=server, workspace=workspace,
                                              allowed_domains=allowed)
    for tool in auto:
        tool_policy_set(binding=binding, tool_name=tool, approval="auto")
    return server.pk

servers = {{
    "basic": bind("Basic", "basic", "node", [NODE / "server-basic-vanillajs" / "dist" / "index.js", "--stdio"],
                  auto=["get-time"]),
    "sysmon": bind("System monitor", "sysmon", "node",
                   [NODE / "server-system-monitor" / "dist" / "index.js", "--stdio"],
                   auto=["get-system-info", "poll-system-stats"]),
    "debug": bind("Debug", "debug", "node", [NODE / "server-debug" / "dist" / "index.js", "--stdio"],
                  auto=["debug-tool", "debug-refresh", "debug-log"]),
    "board": bind("Board", "board", sys.executable, [ROOT / "examples" / "board" / "server.py"],
                  env={{"BOARD_STATE_FILE": str(VAR / "board.json")}}, auto=["move_item", "add_item"]),
    # Its external page is on loopback: a view reaches it only when the admin names that
    # exact origin (docs/sandbox.md).
    "legacy": bind("Legacy", "legacy", sys.executable, [ROOT / "examples" / "legacy" / "server.py"],
                   env={{"LEGACY_PAGE_PORT": str(LEGACY_PORT)}},
                   allowed={{"frameDomains": [f"http://127.0.0.1:{{LEGACY_PORT}}"]}}),
    "hostile": bind("Hostile", "hostile", sys.executable, [ROOT / "tests" / "fixtures" / "mcp_servers" / "hostile.py"]),
    "skybridge": bind("Counter", "skybridge", sys.executable,
                      [ROOT / "tests" / "fixtures" / "mcp_servers" / "skybridge.py"], auto=["echo"]),
}}
print(json.dumps({{"threads": threads, "servers": servers}}))
"""


@dataclass
class World:
    server: LiveAtrium
    password: str
    threads: dict[str, int]
    servers: dict[str, int]

    @property
    def origin(self) -> str:
        return self.server.app_origin

    def thread_url(self, name: str) -> str:
        return f"{self.origin}/w/acme/t/{self.threads[name]}/"

    def shell_json(self, code: str) -> Any:
        out = self.server.shell(code)
        return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    var_dir = tmp_path_factory.mktemp("views") / "var"
    server = LiveAtrium(var_dir=var_dir).setup()
    password = "pw-" + secrets.token_urlsafe(10)
    seeded = json.loads(
        server.shell(
            SEED.format(password=password, var_dir=str(var_dir), root=str(ROOT), threads=THREADS)
        )
        .strip()
        .splitlines()[-1]
    )
    server.start()
    try:
        yield World(server, password, seeded["threads"], seeded["servers"])
    finally:
        server.stop()


class HostPageWatch(PageWatch):
    """PageWatch for the host page only: a sandboxed view's own CSP refusals (the hostile
    view provokes many) are the sandbox working, not a host problem."""

    def __init__(self, page: Any, host_origin: str) -> None:
        self.host_origin = host_origin
        super().__init__(page)

    def _console(self, message: Any) -> None:
        source = (message.location or {}).get("url", "")
        if source.startswith(self.host_origin):
            super()._console(message)


@pytest.fixture
def open_as(browser: Any, world: World) -> Iterator[Any]:
    """open_as("olivia") → a logged-in page in its own context; the host page must end
    without CSP violations or uncaught errors."""
    contexts: list[Any] = []
    watches: list[PageWatch] = []

    def open_page(username: str, *, color_scheme: str = "light", viewport=(1280, 900)) -> Any:
        context = browser.new_context(
            viewport={"width": viewport[0], "height": viewport[1]},
            color_scheme=color_scheme,
            device_scale_factor=1,
        )
        context.add_init_script(CSP_WATCH_JS)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(20_000)
        watches.append(HostPageWatch(page, world.origin))
        login(page, world.origin, username, world.password)
        return page

    yield open_page
    problems = [p for watch in watches for p in watch.problems()]
    for context in contexts:
        context.close()
    assert not problems, "CSP violations or script errors on the host page:\n" + "\n".join(problems)


# ---- helpers -------------------------------------------------------------------------------


def goto_thread(page: Any, world: World, name: str) -> None:
    page.goto(world.thread_url(name))
    page.wait_for_selector("#conn-indicator[data-state=live]")


def call_tool(page: Any, target: str, arguments: dict[str, Any] | None = None) -> None:
    box = page.locator("#composer-input")
    box.fill(f"/call {target} {json.dumps(arguments or {})}")
    box.press("Enter")


def view_row(page: Any, tool: str) -> Any:
    # Calls a view makes for itself have hidden rows of their own (.view-child-call).
    name = page.locator(".view-tool", has_text=re.compile(f"^{re.escape(tool)}$"))
    return page.locator(".view-row:not(.view-child-call)", has=name).last


def app_frame(row: Any) -> Any:
    """The app document: the proxy's inner frame."""
    return row.frame_locator(":scope > .view-body > .view-stage > iframe.view-frame").frame_locator(
        "iframe"
    )


def wait_ready(page: Any, row: Any, timeout: float = 20_000) -> int:
    """Wait until the row's view finished its handshake; returns its tool call id.

    In two stages, so that the view's own budget does not include a cold start: the row
    appears once the server decided the call, which for the first call to a server in a
    module includes starting it (node parsing a 2 MB bundle, the catalogue: seconds on a
    busy machine); from there the frame and the handshake get ``timeout``."""
    expect(row).to_be_attached(timeout=60_000)
    expect(row.locator(":scope > .view-body iframe.view-frame")).to_be_attached(timeout=timeout)
    call_id = int(row.get_attribute("data-tool-call-id"))
    page.wait_for_function(
        "id => (window.AtriumAppViews.list().find(v => v.toolCallId === id && !v.modal) || {}).ready === true",
        arg=call_id,
        timeout=timeout,
    )
    return call_id


def open_counter(page: Any, world: World, thread: str, label: str, start: int) -> tuple[int, Any]:
    """The skybridge counter widget opened in a thread; its call id and app frame."""
    goto_thread(page, world, thread)
    call_tool(page, "skybridge.show_counter", {"label": label, "start": start})
    row = view_row(page, "show_counter")
    call_id = wait_ready(page, row)
    return call_id, app_frame(row)


def view_state(page: Any, call_id: int) -> dict[str, Any]:
    return page.evaluate(
        "id => window.AtriumAppViews.list().find(v => v.toolCallId === id && !v.modal)", call_id
    )


def shot(page: Any, directory: Path, name: str) -> None:
    page.screenshot(path=str(directory / f"views-{name}.png"))


def audit(world: World, **filters: Any) -> list[dict[str, Any]]:
    """The live server's audit rows matching ``filters``, oldest first."""

    def query(alias: str) -> list[dict[str, Any]]:
        rows = AuditEvent.objects.using(alias).filter(**filters).order_by("id")
        return [
            {
                "action": r.action,
                "decision": r.decision,
                "reason": r.reason,
                "tool": r.tool_name,
                "actor": r.actor_kind,
                "type": r.event_type,
                "extra": r.extra,
            }
            for r in rows
        ]

    return world.server.read(query)


# ---- 1. server-basic-vanillajs ---------------------------------------------------------------


def test_basic_vanillajs_renders_and_round_trips(open_as, world, screenshots):
    page = open_as("olivia")
    goto_thread(page, world, "basic")
    call_tool(page, "basic.get-time")
    row = view_row(page, "get-time")
    call_id = wait_ready(page, row)
    app = app_frame(row)
    # The initial result arrives as ui/notifications/tool-result and is shown.
    time_el = app.locator("#server-time")
    expect(time_el).not_to_have_text(re.compile(r"^(Loading|\s*)$"), timeout=15_000)
    before = time_el.inner_text()
    # No wait for the clock: the server's time has milliseconds, and a round trip takes more.
    app.locator("#get-time-btn").click()
    expect(time_el).not_to_have_text(before, timeout=15_000)
    # The click went through the server as an app tool call, audited.
    calls = audit(world, tool_name="get-time", actor_kind="app_view")
    assert any(c["decision"] == "allowed" for c in calls), calls
    assert view_state(page, call_id)["height"] >= 60
    shot(page, screenshots, "basic-vanillajs")


# ---- 2. server-system-monitor: app-only polling -------------------------------------------------


def test_system_monitor_polls_its_app_only_tool(open_as, world, screenshots):
    page = open_as("olivia")
    goto_thread(page, world, "sysmon")
    call_tool(page, "sysmon.get-system-info")
    row = view_row(page, "get-system-info")
    wait_ready(page, row)
    app = app_frame(row)
    expect(app.locator("#info-hostname")).not_to_have_text("--", timeout=15_000)
    toggle = app.locator("#poll-toggle-btn")
    if "start" in toggle.inner_text().lower():
        toggle.click()
    expect(app.locator("#memory-percent")).not_to_have_text("--%", timeout=15_000)

    def allowed_polls() -> list[dict[str, Any]]:
        polls = audit(world, tool_name="poll-system-stats", actor_kind="app_view")
        return [p for p in polls if p["decision"] == "allowed"][1:]  # truthy from 2 on

    # Polled: the audit rows are in the live server's database.
    poll(allowed_polls, timeout=20, interval=0.2, reason="two polls of the view, audited")

    # The polling tool is app-only: the model's tool list never offers it.
    reply = page.evaluate("() => window.AtriumClient.send({type: 'tools.list'})")
    assert reply["ok"], reply
    offered = reply["result"]["tools"]
    names = {t.get("name") or t.get("tool") for t in offered}
    assert "get-system-info" in names, offered[:3]
    assert "poll-system-stats" not in names, names
    shot(page, screenshots, "system-monitor")


# ---- 3. server-debug: display modes, ui/message, model context, links, logging ------------------


def test_debug_server_bridge_features(open_as, world, screenshots):
    page = open_as("olivia")
    goto_thread(page, world, "debug")
    call_tool(page, "debug.debug-tool", {"contentType": "text"})
    row = view_row(page, "debug-tool")
    call_id = wait_ready(page, row)
    app = app_frame(row)
    expect(app.locator("#event-log")).to_contain_text("ontoolresult", timeout=15_000)

    # Display modes requested by the app: the host arbitrates and reports the result. The
    # gesture is a key press in the frame (as good as a click, F14): a click can miss while
    # the view's own calls add their cards and the row moves under the pointer.
    app.locator("#display-fullscreen-btn").press("Enter")
    page.wait_for_function(
        "id => window.AtriumAppViews.list().find(v => v.toolCallId === id).mode === 'fullscreen'",
        arg=call_id,
    )
    expect(page.locator(".view-stage[data-mode=fullscreen]")).to_be_visible()
    stage_box = page.locator(".view-stage[data-mode=fullscreen]").bounding_box()
    assert stage_box["width"] >= 1270 and stage_box["height"] >= 890, stage_box
    shot(page, screenshots, "debug-fullscreen")
    app.locator("#display-pip-btn").click()
    page.wait_for_function(
        "id => window.AtriumAppViews.list().find(v => v.toolCallId === id).mode === 'pip'",
        arg=call_id,
    )
    pip = page.locator(".view-stage[data-mode=pip]")
    box = pip.bounding_box()
    assert box["x"] > 640 and box["y"] > 400 and box["width"] < 500, box
    # The panel stays put while the chat scrolls.
    page.locator("#timeline").evaluate("el => el.scrollTo(0, 0)")
    assert pip.bounding_box() == box
    shot(page, screenshots, "debug-pip")
    # Host-initiated: the header/panel controls bring it back (host-context-changed).
    pip.locator(".view-exit").click()
    page.wait_for_function(
        "id => window.AtriumAppViews.list().find(v => v.toolCallId === id).mode === 'inline'",
        arg=call_id,
    )
    expect(app.locator("#event-log")).to_contain_text("onhostcontextchanged")

    # ui/message lands in the thread, labelled as coming from the app.
    app.locator("#message-text").fill("Hello from the debug app")
    app.locator("#send-message-text-btn").click()
    posted = page.locator(".msg-entry", has_text="Hello from the debug app").last
    try:
        # Bounded like the other round trips of this module: the app's own debug-log calls
        # share the database thread with this request on a busy machine.
        expect(posted.locator(".via-tag")).to_contain_text("Debug", timeout=15_000)
    except AssertionError as exc:
        log_tail = app.locator("#event-log").inner_text()[-3000:]
        raise AssertionError(
            f"ui/message not shown; the app's event log ends:\n{log_tail}"
        ) from exc

    # ui/update-model-context (checked in the database below) and a log line.
    app.locator("#context-text").fill("the user is on step 3")
    app.locator("#update-context-text-btn").click()
    app.locator("#log-data").fill("debug log line 42")
    app.locator("#log-info-btn").click()

    # ui/open-link: the host's card shows the URL and a click on Open opens a new page
    # (docs/view-bridge.md §8); javascript: is refused (and audited).
    app.locator("#open-link-btn").click()
    with page.context.expect_page(timeout=10_000) as opened:
        row.locator(".host-card[data-card=link] [data-card-action=open]").click()
    assert re.match(r"^(https://modelcontextprotocol\.io|chrome-error:)", opened.value.url), (
        opened.value.url
    )
    opened.value.close()
    app.locator("#link-url").fill("javascript:alert(document.domain)")
    app.locator("#open-link-btn").click()

    # What the server recorded: one query, retried while the last writes land.
    def query(alias: str) -> dict[str, Any]:
        def rows(**filters: Any) -> list[list[Any]]:
            events = AuditEvent.objects.using(alias).filter(**filters).order_by("id")
            return [[r.decision, r.reason, json.dumps(r.extra)] for r in events]

        return {
            "context": ToolCall.objects.using(alias).get(pk=call_id).model_context,
            "modes": rows(action="ui_request_display_mode"),
            "links": rows(action="ui_open_link"),
            "logs": rows(action="log_message"),
        }

    def recorded() -> dict[str, Any] | None:
        found = world.server.read(query)
        logs = [r for r in found["logs"] if "debug log line 42" in r[2]]
        return found if found["context"] and logs and len(found["links"]) >= 2 else None

    # Polled: the rows are in the live server's database.
    found = poll(recorded, timeout=20, interval=0.2, reason="the view's writes, audited")
    logs = [r for r in found["logs"] if "debug log line 42" in r[2]]
    # The refused link opened nothing. No wait: its request reached the server (audited
    # above) and a later round trip on the same socket comes back after its answer.
    page.evaluate("() => window.AtriumClient.send({type: 'tools.list'})")
    assert len(page.context.pages) == 1
    assert "the user is on step 3" in json.dumps(found["context"]), found["context"]
    assert [m[0] for m in found["modes"]][-2:] == ["allowed", "allowed"], found["modes"]
    assert found["links"][0][0] == "allowed", found["links"]
    assert any(r[0] == "denied" and r[1] == "scheme_not_allowed" for r in found["links"]), found[
        "links"
    ]
    assert logs, "the view's log message was not audited"

    # Unmounting sends ui/resource-teardown and waits for the app's answer (≤ 3 s).
    elapsed = page.evaluate(
        """async id => {
            const row = document.querySelector(`.view-row[data-tool-call-id="${id}"]`);
            const started = performance.now();
            await window.AtriumAppViews.unmount(row);
            return performance.now() - started;
        }""",
        call_id,
    )
    assert elapsed < 2500, f"teardown was not answered ({elapsed:.0f} ms)"
    assert row.locator("iframe").count() == 0


# ---- 4. the board example: app-only move, destructive delete with approval ----------------------


def test_board_moves_and_deletes_with_approval(open_as, world, screenshots):
    page = open_as("olivia")
    goto_thread(page, world, "board")
    call_tool(page, "board.list_items")
    row = view_row(page, "list_items")
    wait_ready(page, row)
    app = app_frame(row)
    card = app.locator('.card[data-id="ATR-101"]')
    expect(card).to_be_visible(timeout=15_000)
    expect(app.locator('.column[data-column="todo"] .card[data-id="ATR-101"]')).to_be_visible()

    # The card's "move right" control calls the app-only move_item through the server.
    synced = app.locator("#subtitle").inner_text()  # "3 tasks · v4 · synced …"
    card.hover()
    card.get_by_role("button", name=re.compile("to In progress")).click()
    expect(app.locator('.column[data-column="doing"] .card[data-id="ATR-101"]')).to_be_visible()
    # The move shows at once (optimistic); the server's answer brings a new board version,
    # and the call's decision was audited before it ran.
    expect(app.locator("#subtitle")).not_to_have_text(synced)
    expect(app.locator("#subtitle")).to_contain_text(re.compile(r"v\d+"))
    moves = audit(world, tool_name="move_item", actor_kind="app_view")
    assert any(m["decision"] == "allowed" for m in moves), moves

    # Delete needs approval: the app's request waits, another member approves it.
    other = open_as("marco")
    goto_thread(other, world, "board")
    page.bring_to_front()  # Olivia acts in her window (see the widget-state test)
    victim = app.locator('.card[data-id="ATR-102"]')
    victim.hover()
    delete = victim.get_by_role("button", name=re.compile("^Delete"))
    delete.click()
    delete.click()  # second click confirms
    approve = other.locator('button[data-action="approve"]').last
    expect(approve).to_be_visible(timeout=15_000)
    shot(page, screenshots, "board-awaiting-approval")
    other.bring_to_front()
    approve.click()
    expect(app.locator('.card[data-id="ATR-102"]')).to_have_count(0, timeout=15_000)
    decisions = [(r["decision"], r["action"]) for r in audit(world, tool_name="delete_item")]
    assert ("pending", "app_tool_call") in decisions, decisions
    assert ("approved", "approval") in decisions, decisions
    row.evaluate("el => el.scrollIntoView({block: 'start'})")
    shot(page, screenshots, "board")


# ---- 5. legacy MCP-UI: rawHtml round trip, remote-dom rendered -----------------------------------


def test_legacy_raw_html_and_remote_dom(open_as, world, screenshots):
    page = open_as("olivia")
    goto_thread(page, world, "legacy")
    call_tool(page, "legacy.show_raw_html", {"greeting": "Hello, legacy world"})
    row = view_row(page, "show_raw_html")
    call_id = wait_ready(page, row)
    assert view_state(page, call_id)["protocol"] == "legacy"
    app = app_frame(row)
    # ui-lifecycle-iframe-render-data delivered the resource's initial render data.
    expect(app.locator("#greeting")).to_have_text("Hello, legacy world")
    expect(app.locator("#who")).to_have_text("Signed in as Ada")
    # A legacy `tool` action → tools/call through the server → ui-message-response.
    app.locator("#text").fill("ping from the test")
    app.locator("#tool").click()
    entry = app.locator("#log li", has_text="legacy_echo").first
    expect(entry.locator(".state")).to_have_text("done", timeout=15_000)
    expect(entry.locator("pre")).to_contain_text("Echo: ping from the test")
    # Render data went once: the frame's first resize, 150 ms after mounting, changes no
    # render data and sends none (it used to re-render the view, and the page moved under
    # the click above).
    expect(app.locator("#log li .kind", has_text="render")).to_have_count(1)
    calls = audit(world, tool_name="legacy_echo")
    assert any(c["action"] == "legacy_tool" and c["decision"] == "allowed" for c in calls), calls
    shot(page, screenshots, "legacy-raw-html")

    # A legacy text/uri-list view: the external page loads in the proxy's inner frame and
    # its legacy `notify` reaches the server.
    call_tool(page, "legacy.show_external_url")
    external = view_row(page, "show_external_url")
    wait_ready_frame = external.frame_locator(
        ":scope > .view-body > .view-stage > iframe.view-frame"
    ).frame_locator("iframe")
    expect(wait_ready_frame.locator("h1")).to_have_text(
        "An external page in a frame", timeout=20_000
    )
    wait_ready_frame.locator("#notify").click()
    # Polled: the audit row is in the live server's database.
    notes = poll(
        lambda: [r for r in audit(world, actor_kind="app_view") if r["action"] == "legacy_notify"],
        timeout=15,
        interval=0.2,
        reason="the legacy notify, audited",
    )
    assert notes[0]["decision"] == "allowed", notes

    # A legacy remote-dom view (framework=react): the script runs in the sandbox, its `ui-*`
    # elements are drawn by the host's library, and its `tool` action reaches the server
    # (tests/compat/test_mcp_ui_servers.py has the third-party ones).
    call_tool(page, "legacy.show_remote_dom")
    remote = view_row(page, "show_remote_dom")
    drawn = app_frame(remote)
    expect(drawn.locator("ui-text").first).to_have_text("Remote DOM counter", timeout=20_000)
    # Clicks dispatched in the view's own document, on the button inside the element's
    # shadow root (its click is the element's `press`): a synthesized mouse click into the
    # cross-site frame was lost once in session 17's flake run ("Clicks: 0"; the flake
    # class of docs/testing.md, "The two browser flakes of issue 14").
    drawn.locator("ui-button", has_text="Add one").locator("button").dispatch_event("click")
    expect(drawn.locator("ui-text").nth(1)).to_have_text("Clicks: 1")
    before = len([r for r in audit(world, tool_name="legacy_echo") if r["action"] == "legacy_tool"])
    drawn.locator("ui-button", has_text="Echo via tool").locator("button").dispatch_event("click")
    poll(
        lambda: (
            len([r for r in audit(world, tool_name="legacy_echo") if r["action"] == "legacy_tool"])
            > before
        ),
        timeout=15,
        interval=0.2,
        reason="the remote-dom view's tool action, audited",
    )
    remote.scroll_into_view_if_needed()
    shot(page, screenshots, "legacy-remote-dom")


# ---- 7. theme switch → host-context-changed ---------------------------------------------------------


def test_theme_switch_reaches_the_view(open_as, world, screenshots):
    page = open_as("olivia")
    goto_thread(page, world, "theme")
    call_tool(page, "board.list_items")
    row = view_row(page, "list_items")
    wait_ready(page, row)
    app = app_frame(row)
    expect(app.locator("html")).to_have_attribute("data-theme", "light", timeout=15_000)
    light_bg = app.locator("body").evaluate("el => getComputedStyle(el).backgroundColor")
    row.scroll_into_view_if_needed()
    shot(page, screenshots, "theme-light")

    page.evaluate("() => window.AtriumTheme.set('dark')")
    expect(app.locator("html")).to_have_attribute("data-theme", "dark")
    # The host's own tokens went along (styles.variables).
    host_surface = page.evaluate(
        "() => getComputedStyle(document.documentElement).getPropertyValue('--surface').trim()"
    )
    app_bg = app.locator("html").evaluate(
        "el => el.style.getPropertyValue('--color-background-primary')"
    )
    assert app_bg.strip() == host_surface, (app_bg, host_surface)
    dark_bg = app.locator("body").evaluate("el => getComputedStyle(el).backgroundColor")
    assert dark_bg != light_bg
    shot(page, screenshots, "theme-dark")
    page.evaluate("() => window.AtriumTheme.set('light')")
    expect(app.locator("html")).to_have_attribute("data-theme", "light")


# ---- 8. reload restores views and Apps SDK widget state ----------------------------------------------


def test_reload_restores_views_and_widget_state(open_as, world, screenshots):
    page = open_as("olivia")
    goto_thread(page, world, "reload")
    call_tool(page, "board.list_items")
    board_row = view_row(page, "list_items")
    wait_ready(page, board_row)
    call_tool(page, "skybridge.show_counter", {"label": "Coffees", "start": 3})
    row = view_row(page, "show_counter")
    call_id = wait_ready(page, row)
    widget = app_frame(row)
    expect(widget.locator("#label")).to_have_text("Coffees", timeout=15_000)
    expect(widget.locator("#count")).to_have_text("3")
    expect(widget.locator("#theme")).to_have_text("light")

    # Another member watches the same widget live.
    other = open_as("marco")
    goto_thread(other, world, "reload")
    other_widget = app_frame(view_row(other, "show_counter"))
    view_row(other, "show_counter").scroll_into_view_if_needed()
    expect(other_widget.locator("#count")).to_have_text("3", timeout=20_000)

    # The click is dispatched in the widget's own document: headless Chromium sometimes
    # drops a synthesized mouse click routed into a cross-site (out-of-process) frame
    # before it reaches the frame (docs/testing.md, "The two browser flakes"); what this
    # test checks starts at the widget's click handler. One click at a time: two writes
    # in flight are covered by test_widget_state_writes_in_a_burst_end_at_the_latest.
    widget.locator("#inc").dispatch_event("click")
    expect(widget.locator("#count")).to_have_text("4", timeout=15_000)
    expect(other_widget.locator("#count")).to_have_text("4", timeout=15_000)
    widget.locator("#inc").dispatch_event("click")
    expect(widget.locator("#count")).to_have_text("5", timeout=15_000)
    expect(other_widget.locator("#count")).to_have_text("5", timeout=15_000)
    stored = world.server.read(
        lambda alias: ToolCall.objects.using(alias).get(pk=call_id).widget_state
    )
    assert stored == {"count": 5}

    page.reload()
    page.wait_for_selector("#conn-indicator[data-state=live]")
    row = view_row(page, "show_counter")
    row.scroll_into_view_if_needed()
    wait_ready(page, row)
    expect(app_frame(row).locator("#count")).to_have_text("5", timeout=15_000)
    board_row = view_row(page, "list_items")
    board_row.scroll_into_view_if_needed()
    wait_ready(page, board_row)
    expect(app_frame(board_row).locator('.card[data-id="ATR-101"]')).to_be_visible()
    row.evaluate("el => el.scrollIntoView({block: 'center'})")
    shot(page, screenshots, "reload-restored")


def test_widget_state_writes_in_a_burst_end_at_the_latest(open_as, world):
    """Three setWidgetState writes in one go: the server stores the last, every member ends
    there, and the writer's widget is never taken back by the echoes of its older writes."""
    page = open_as("olivia")
    call_id, widget = open_counter(page, world, "burst", "Burst", 3)
    expect(widget.locator("#count")).to_have_text("3", timeout=15_000)
    other = open_as("marco")
    goto_thread(other, world, "burst")
    view_row(other, "show_counter").scroll_into_view_if_needed()
    other_widget = app_frame(view_row(other, "show_counter"))
    expect(other_widget.locator("#count")).to_have_text("3", timeout=20_000)

    # Counts the widget-state notifications the writer's widget receives from the host.
    widget.locator("body").evaluate(
        """() => { window.__widgetStateNotes = [];
          window.addEventListener("message", (e) => {
            if (e.data && e.data.method === "atrium/notifications/widget-state")
              window.__widgetStateNotes.push(e.data.params.state);
          }); }"""
    )
    widget.locator("#inc").evaluate("b => { b.click(); b.click(); b.click(); }")
    expect(widget.locator("#count")).to_have_text("6")
    expect(other_widget.locator("#count")).to_have_text("6", timeout=15_000)
    stored = world.shell_json(
        "import json\nfrom chat.models import ToolCall\n"
        f"call = ToolCall.objects.select_related('thread').get(pk={call_id})\n"
        "print(json.dumps([call.widget_state, call.thread.last_seq]))"
    )
    assert stored[0] == {"count": 6}
    # Every event up to the last write has reached the writer's page (an event to wait on:
    # the client's own sequence number), so any echo it was going to apply has been applied.
    page.wait_for_function("seq => window.AtriumClient.lastSeq >= seq", arg=stored[1])
    expect(widget.locator("#count")).to_have_text("6")
    assert widget.locator("body").evaluate("() => window.__widgetStateNotes") == []


# ---- a long thread: views mount lazily -------------------------------------------------------------


def test_many_views_mount_lazily(open_as, world, screenshots):
    page = open_as("olivia")
    goto_thread(page, world, "many")
    total = 20  # one person's burst of posts (ATRIUM_RATE_LIMITS["message"])
    page.evaluate(
        """n => Promise.all(Array.from({length: n}, () =>
            window.AtriumClient.send({type: 'message.post', text: '/call board.list_items {}'})))""",
        total,
    )
    expect(page.locator(".view-row")).to_have_count(total, timeout=25_000)
    expect(page.locator('.toolcall .status-pill[data-status="success"]')).to_have_count(
        total, timeout=25_000
    )
    page.reload()
    page.wait_for_selector("#conn-indicator[data-state=live]")
    # No wait for the clock: once a view finished its handshake, the lazy observer has
    # long made its first decision for every row (it runs before any view opens).
    page.wait_for_function(
        "n => { const v = window.AtriumAppViews.list(); return v.length === n && v.some(x => x.ready); }",
        arg=total,
        timeout=25_000,
    )
    views = page.evaluate("() => window.AtriumAppViews.list()")
    opened = [v for v in views if v["phase"] != "idle"]
    assert len(views) == total, len(views)
    assert 1 <= len(opened) <= 8, f"{len(opened)} of {total} views opened at once"
    # The page stays responsive while they load.
    started = time.monotonic()
    page.evaluate("() => 1")
    assert time.monotonic() - started < 1.0
    # Scrolling up opens the ones coming into view.
    first = page.locator(".view-row").first
    first.scroll_into_view_if_needed()
    first_id = int(first.get_attribute("data-tool-call-id"))
    page.wait_for_function(
        "id => window.AtriumAppViews.list().find(v => v.toolCallId === id).phase !== 'idle'",
        arg=first_id,
    )
    shot(page, screenshots, "many-lazy")


# ---- Apps SDK surface (window.openai) ---------------------------------------------------------------


def test_apps_sdk_widget_surface(open_as, world, screenshots):
    page = open_as("olivia")
    call_id, widget = open_counter(page, world, "sdk", "Teas", 1)
    row = view_row(page, "show_counter")
    expect(widget.locator("#label")).to_have_text("Teas", timeout=15_000)
    expect(widget.locator("#view")).to_have_text("inline")

    # Clicks are dispatched in the widget's own document, as in
    # test_reload_restores_views_and_widget_state: headless Chromium sometimes drops a
    # synthesized mouse click routed into a cross-site frame (docs/testing.md); this test is
    # about the window.openai surface from the widget's click handlers on. openExternal
    # keeps a real click: opening a tab needs the user's gesture.
    # callTool → tools/call, audited as an Apps SDK action.
    widget.locator("#echo-btn").dispatch_event("click")
    expect(widget.locator("#echo")).to_have_text("hi from the widget", timeout=15_000)

    # requestDisplayMode → {mode}, and the globals follow. A dispatched click is no user
    # gesture: the host asks first (docs/view-bridge.md §8), and Allow is the gesture.
    widget.locator("#fullscreen").dispatch_event("click")
    row.locator(".host-card[data-card=display-mode] [data-card-action=allow]").click()
    expect(widget.locator("#last")).to_have_text('mode: {"mode":"fullscreen"}')
    expect(widget.locator("#mode")).to_have_text("fullscreen")
    assert view_state(page, call_id)["mode"] == "fullscreen"
    page.locator(".view-stage[data-mode=fullscreen] .view-exit").click()  # the host's exit control
    expect(widget.locator("#mode")).to_have_text("inline")

    # requestModal opens the same widget in a host dialog, with view.mode "modal";
    # requestClose inside it closes the dialog.
    widget.locator("#modal").dispatch_event("click")
    dialog = page.locator("dialog.view-modal[open]")
    expect(dialog).to_be_visible()
    expect(dialog.locator(".view-modal-head")).to_contain_text("Counter details")
    modal_widget = dialog.frame_locator("iframe.view-frame").frame_locator("iframe")
    expect(modal_widget.locator("#view")).to_have_text('modal {"from":"widget"}', timeout=15_000)
    shot(page, screenshots, "apps-sdk-modal")
    modal_widget.locator("#close").dispatch_event("click")
    expect(page.locator("dialog.view-modal")).to_have_count(0, timeout=10_000)

    # sendFollowUpMessage → ui/message in the thread; openExternal → ui/open-link.
    widget.locator("#follow").dispatch_event("click")
    posted = page.locator(".msg-entry", has_text="How many coffees is too many?").last
    expect(posted.locator(".via-tag")).to_contain_text("Counter")
    widget.locator("#external").click()
    with page.context.expect_page(timeout=10_000) as opened:
        row.locator(".host-card[data-card=link] [data-card-action=open]").click()
    opened.value.close()
    row.evaluate("el => el.scrollIntoView({block: 'center'})")
    shot(page, screenshots, "apps-sdk")

    # requestClose in the inline widget: the host tears the view down and offers to reopen.
    widget.locator("#close").dispatch_event("click")
    closed = row.locator(".view-closed")
    expect(closed).to_be_visible()
    closed.get_by_role("button", name="Reopen").click()
    wait_ready(page, row)
    expect(app_frame(row).locator("#label")).to_have_text("Teas")

    actions = {(r["action"], r["decision"]) for r in audit(world, actor_kind="app_view")}
    for expected in ("apps_sdk_call_tool", "apps_sdk_follow_up", "apps_sdk_open_external"):
        assert (expected, "allowed") in actions, (expected, actions)
