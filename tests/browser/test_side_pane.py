"""The side pane: an app view pinned beside the conversation (issue 29, docs/side-pane.md).

Real Chromium against a real web server, with the official example servers
(``@modelcontextprotocol/server-basic-vanillajs``, ``server-system-monitor`` and
``server-debug``, whose event log shows what the host told it). The pinned view is the
inline view itself (its stage is fixed over the pane, never moved: moving an iframe reloads
it), so a marker set in the app's document survives pinning, messages and resizes.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from audit.models import AuditEvent
from chat.layout.models import ThreadLayout
from tests.browser.helpers_ui import CSP_WATCH_JS, PageWatch, login
from tests.live import ROOT, LiveAtrium
from tests.waiting import poll

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SHOTS = Path("/work/notes/shots")
THREADS = ["sysmon", "resize", "reload", "narrow", "shots"]

SEED = """
import json
from pathlib import Path
from django.contrib.auth import get_user_model
from chat import services
from bindings.services.bindings import binding_create
from bindings.services.policies import tool_policy_set
from mcp_bridge.services.servers import server_add

PASSWORD = {password!r}
NODE = Path({root!r}) / "tools" / "mcp-servers" / "node_modules" / "@modelcontextprotocol"
U = get_user_model()

def person(username, first, last):
    return U.objects.create_user(username, password=PASSWORD, first_name=first, last_name=last)

owner = person("olivia", "Olivia", "Park")
member = person("marco", "Marco", "Rossi")
viewer = person("vera", "Vera", "Lind")
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
services.membership_set(workspace=workspace, user=member, role="member")
services.membership_set(workspace=workspace, user=viewer, role="viewer")
threads = {{
    name: services.thread_create(workspace=workspace, title="Pane " + name, actor=owner).pk
    for name in {threads!r}
}}

def bind(name, slug, package, auto=()):
    server = server_add(name=name, slug=slug, transport="stdio", command="node",
                        args=[str(NODE / package / "dist" / "index.js"), "--stdio"])
    binding = binding_create(server=server, workspace=workspace)
    for tool in auto:
        tool_policy_set(binding=binding, tool_name=tool, approval="auto")

bind("Basic", "basic", "server-basic-vanillajs", auto=["get-time"])
bind("System monitor", "sysmon", "server-system-monitor", auto=["get-system-info", "poll-system-stats"])
bind("Debug", "debug", "server-debug", auto=["debug-tool", "debug-refresh", "debug-log"])
print(json.dumps({{"threads": threads}}))
"""


class World:
    def __init__(self, server: LiveAtrium, password: str, threads: dict[str, int]) -> None:
        self.server = server
        self.password = password
        self.threads = threads

    def thread_url(self, name: str) -> str:
        return f"{self.server.app_origin}/w/acme/t/{self.threads[name]}/"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    server = LiveAtrium(var_dir=tmp_path_factory.mktemp("pane") / "var").setup()
    password = "pw-" + secrets.token_urlsafe(10)
    out = server.shell(SEED.format(password=password, root=str(ROOT), threads=THREADS))
    threads = json.loads(out.strip().splitlines()[-1])["threads"]
    server.start()
    try:
        yield World(server, password, threads)
    finally:
        server.stop()


class HostPageWatch(PageWatch):
    """Only the host page's own CSP violations and errors fail a test."""

    def __init__(self, page: Any, host_origin: str) -> None:
        self.host_origin = host_origin
        super().__init__(page)

    def _console(self, message: Any) -> None:
        if (message.location or {}).get("url", "").startswith(self.host_origin):
            super()._console(message)


@pytest.fixture
def open_as(browser: Any, world: World) -> Iterator[Any]:
    contexts: list[Any] = []
    watches: list[PageWatch] = []

    def open_page(
        username: str, *, viewport=(1440, 900), color_scheme: str = "light", context=None
    ) -> Any:
        if context is None:
            context = browser.new_context(
                viewport={"width": viewport[0], "height": viewport[1]},
                color_scheme=color_scheme,
                device_scale_factor=1,
            )
            context.add_init_script(CSP_WATCH_JS)
            contexts.append(context)
            page = context.new_page()
            login(page, world.server.app_origin, username, world.password)
        else:
            page = context.new_page()
        page.set_default_timeout(20_000)
        watches.append(HostPageWatch(page, world.server.app_origin))
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
    name = page.locator(".view-tool", has_text=re.compile(f"^{re.escape(tool)}$"))
    return page.locator(".view-row:not(.view-child-call)", has=name).last


def app_frame(row: Any) -> Any:
    return row.frame_locator(":scope > .view-body > .view-stage > iframe.view-frame").frame_locator(
        "iframe"
    )


def wait_ready(page: Any, row: Any) -> int:
    expect(row).to_be_attached(timeout=60_000)
    expect(row.locator(":scope > .view-body iframe.view-frame")).to_be_attached(timeout=30_000)
    call_id = int(row.get_attribute("data-tool-call-id"))
    page.wait_for_function(
        "id => (window.AtriumAppViews.list().find(v => v.toolCallId === id && !v.modal) || {}).ready === true",
        arg=call_id,
        timeout=30_000,
    )
    return call_id


def view_state(page: Any, call_id: int) -> dict[str, Any]:
    return page.evaluate(
        "id => window.AtriumAppViews.list().find(v => v.toolCallId === id && !v.modal)", call_id
    )


def pane(page: Any) -> dict[str, Any]:
    return page.evaluate("() => window.AtriumAppViews.pane()")


def inner_app(page: Any, row: Any) -> Any:
    """The app's document as a Playwright Frame (to mark it and read it back)."""
    proxy = row.locator("iframe.view-frame").element_handle().content_frame()
    assert proxy is not None
    inner = proxy.wait_for_selector("iframe").content_frame()
    assert inner is not None
    return inner


def pin(page: Any, row: Any, call_id: int) -> None:
    row.locator(".view-pin-btn").click()
    page.wait_for_function(
        "id => (window.AtriumAppViews.list().find(v => v.toolCallId === id) || {}).mode === 'split'",
        arg=call_id,
    )
    expect(page.locator("#side-pane")).to_be_visible()


def stage_box(row: Any) -> dict[str, float]:
    return row.locator(".view-stage").bounding_box()


def inside(inner: dict[str, float], outer: dict[str, float], slack: float = 2) -> bool:
    return (
        inner["x"] >= outer["x"] - slack
        and inner["y"] >= outer["y"] - slack
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + slack
        and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + slack
    )


def stored_layout(world: World, username: str, thread: str) -> dict[str, Any] | None:
    def query(alias: str) -> dict[str, Any] | None:
        row = (
            ThreadLayout.objects.using(alias)
            .filter(user__username=username, thread_id=world.threads[thread])
            .first()
        )
        return None if row is None else {"call": row.pinned_call_id, "width": row.pane_width}

    return world.server.read(query)


# ---- 1. pinned: stays, keeps its state and live updates, while the thread moves ----------


def test_pinned_view_stays_live_beside_the_conversation(open_as, world):
    page = open_as("olivia")
    goto_thread(page, world, "sysmon")
    call_tool(page, "sysmon.get-system-info")
    row = view_row(page, "get-system-info")
    call_id = wait_ready(page, row)
    app = app_frame(row)
    expect(app.locator("#info-hostname")).not_to_have_text("--", timeout=15_000)
    toggle = app.locator("#poll-toggle-btn")
    if "start" in toggle.inner_text().lower():
        toggle.click()
    expect(app.locator("#memory-percent")).not_to_have_text("--%", timeout=15_000)
    inner_app(page, row).evaluate("() => { window.__atriumMarker = 'kept'; }")

    pin(page, row, call_id)
    # Host chrome names the app and its server; the row says where the view went.
    header = page.locator(".side-pane-header")
    expect(header.locator(".side-pane-title")).to_have_text("System monitor")
    expect(header.locator(".side-pane-tool")).to_have_text("get-system-info")
    expect(header.locator(".side-pane-server")).to_contain_text("sysmon")
    expect(row.locator(".view-pinned-away")).to_contain_text("Pinned beside the conversation")
    assert row.locator("iframe.view-frame").count() == 1  # one frame, not two
    slot = page.locator(".side-pane-slot").bounding_box()
    before = stage_box(row)
    assert inside(before, slot), (before, slot)
    assert before["width"] > 300 and before["height"] > 500, before
    # The app is told: no "split" for an app that did not declare it, but the pane's size.
    state = view_state(page, call_id)
    assert state["mode"] == "split" and state["displayMode"] == "inline", state
    stored = poll(
        lambda: stored_layout(world, "olivia", "sysmon"), reason="the pin, saved", timeout=10
    )
    assert stored["call"] == call_id

    # 20 messages arrive: the thread scrolls, the pane stays, the app keeps its document.
    polls_before = len(audit_polls(world))
    for i in range(20):
        reply = page.evaluate(
            "t => window.AtriumClient.send({type: 'message.post', text: t})", f"update {i + 1}"
        )
        assert reply["ok"], reply
    expect(page.locator(".msg-entry", has_text="update 20")).to_be_visible()
    assert stage_box(row) == before
    assert inner_app(page, row).evaluate("() => window.__atriumMarker") == "kept"
    # Live: the view keeps polling (audited app calls) and showing new numbers.
    poll(
        lambda: len(audit_polls(world)) >= polls_before + 2,
        reason="the pinned view keeps polling",
        timeout=20,
    )
    expect(app.locator("#memory-percent")).not_to_have_text("--%")
    # A new tool call with its own view arrives below: the pane is unchanged.
    call_tool(page, "basic.get-time")
    wait_ready(page, view_row(page, "get-time"))
    assert stage_box(row) == before
    assert view_state(page, call_id)["mode"] == "split"

    # Keyboard: Alt+Shift+P into the pane and back; Esc in the pane returns to the composer.
    page.locator("#composer-input").focus()
    page.keyboard.press("Alt+Shift+KeyP")
    page.wait_for_function(
        "() => document.activeElement && document.activeElement.classList.contains('view-frame')"
    )
    page.locator(".side-pane-title").focus()
    page.keyboard.press("Escape")
    expect(page.locator("#composer-input")).to_be_focused()

    # Unpin from the pane's chrome: the view is back in its row, same document.
    page.locator("[data-pane-action=unpin]").click()
    page.wait_for_function(
        "id => window.AtriumAppViews.list().find(v => v.toolCallId === id).mode === 'inline'",
        arg=call_id,
    )
    expect(page.locator("#side-pane")).to_be_hidden()
    assert inner_app(page, row).evaluate("() => window.__atriumMarker") == "kept"
    poll(
        lambda: (stored_layout(world, "olivia", "sysmon") or {}).get("call", 0) is None,
        reason="the unpin, saved",
        timeout=10,
    )


def audit_polls(world: World) -> list[int]:
    def query(alias: str) -> list[int]:
        return list(
            AuditEvent.objects.using(alias)
            .filter(tool_name="poll-system-stats", actor_kind="app_view", decision="allowed")
            .values_list("id", flat=True)
        )

    return world.server.read(query)


# ---- 2. resize: host-context-changed with the new dimensions, width remembered -----------


def test_resizing_the_pane_tells_the_app(open_as, world):
    page = open_as("olivia")
    goto_thread(page, world, "resize")
    call_tool(page, "debug.debug-tool", {"contentType": "text"})
    row = view_row(page, "debug-tool")
    call_id = wait_ready(page, row)
    app = app_frame(row)
    expect(app.locator("#event-log")).to_contain_text("ontoolresult", timeout=15_000)
    pin(page, row, call_id)
    width_before = pane(page)["shownWidth"]

    handle = page.locator(".side-pane-handle").bounding_box()
    x, y = handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x - 120, y, steps=6)
    page.mouse.move(x - 200, y, steps=6)
    page.mouse.up()
    page.wait_for_function(
        "w => window.AtriumAppViews.pane().shownWidth >= w + 190", arg=width_before
    )
    frame_width = round(row.locator("iframe.view-frame").bounding_box()["width"])
    # The app heard it: host-context-changed with the frame's new width (its event log).
    expect(app.locator("#event-log")).to_contain_text(re.compile(rf'"width":\s*{frame_width}\b'))
    stored = poll(
        lambda: (
            ((s := stored_layout(world, "olivia", "resize")) and s["width"] >= width_before + 190)
            and s
        ),
        reason="the new width, saved",
        timeout=10,
    )
    assert stored["call"] == call_id
    # The keyboard resizes too (the handle is a separator).
    page.locator(".side-pane-handle").focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function(
        "w => window.AtriumAppViews.pane().shownWidth < w", arg=pane(page)["shownWidth"] + 1
    )


# ---- 3. reload, another device, another member, a viewer -----------------------------------


def test_reload_and_other_devices_restore_the_pane_other_members_see_nothing(open_as, world):
    page = open_as("olivia")
    goto_thread(page, world, "reload")
    call_tool(page, "basic.get-time")
    row = view_row(page, "get-time")
    call_id = wait_ready(page, row)
    # Olivia's other device, and Marco (a member), already on the thread.
    other_device = open_as("olivia")
    goto_thread(other_device, world, "reload")
    marco = open_as("marco")
    goto_thread(marco, world, "reload")

    pin(page, row, call_id)
    # Her other device follows live; Marco's page does not change.
    other_device.wait_for_function(
        "id => (window.AtriumAppViews.list().find(v => v.toolCallId === id) || {}).mode === 'split'",
        arg=call_id,
    )
    expect(other_device.locator("#side-pane")).to_be_visible()
    expect(marco.locator("#side-pane")).to_be_hidden()
    marco_row = view_row(marco, "get-time")
    wait_ready(marco, marco_row)
    assert view_state(marco, call_id)["mode"] == "inline"
    expect(marco_row.locator(".view-pinned-away")).to_have_count(0)

    # Reload: the pane is in the first render, and the view opens in it at once.
    page.reload()
    expect(page.locator("#side-pane")).to_be_visible()
    expect(page.locator(".side-pane-title")).to_have_text("Basic")
    page.wait_for_selector("#conn-indicator[data-state=live]")
    row = view_row(page, "get-time")
    wait_ready(page, row)
    assert view_state(page, call_id)["mode"] == "split"
    assert inside(stage_box(row), page.locator(".side-pane-slot").bounding_box())
    expect(app_frame(row).locator("#server-time")).not_to_have_text(
        re.compile(r"^(Loading|\s*)$"), timeout=15_000
    )

    # Vera, a viewer, pins it too: her own layout; she still cannot post.
    vera = open_as("vera")
    goto_thread(vera, world, "reload")
    vera_row = view_row(vera, "get-time")
    wait_ready(vera, vera_row)
    pin(vera, vera_row, call_id)
    expect(vera.locator("#composer-input")).to_be_disabled()
    reply = vera.evaluate("() => window.AtriumClient.send({type: 'message.post', text: 'hi'})")
    assert not reply["ok"] and reply["error"]["code"] == "forbidden", reply
    assert stored_layout(world, "marco", "reload") is None
    expect(marco.locator("#side-pane")).to_be_hidden()

    # Unpinned on the other device: this page follows.
    other_device.locator("[data-pane-action=unpin]").click()
    page.wait_for_function(
        "id => window.AtriumAppViews.list().find(v => v.toolCallId === id).mode === 'inline'",
        arg=call_id,
    )
    expect(page.locator("#side-pane")).to_be_hidden()


# ---- 4. small screens: full screen with a way back ----------------------------------------


def test_a_narrow_window_pins_full_screen_with_a_way_back(open_as, world):
    page = open_as("olivia", viewport=(700, 860))
    goto_thread(page, world, "narrow")
    call_tool(page, "basic.get-time")
    row = view_row(page, "get-time")
    call_id = wait_ready(page, row)
    pin(page, row, call_id)
    box = stage_box(row)
    assert box["width"] >= 660 and box["height"] >= 700, box
    back = page.locator(".side-pane-back")
    expect(back).to_be_visible()
    assert view_state(page, call_id)["displayMode"] == "fullscreen"
    page.screenshot(path=str(SHOTS / "side-pane-narrow-700-light.png"))

    back.click()
    expect(page.locator("#side-pane")).to_be_hidden()
    expect(page.locator("#composer-input")).to_be_focused()
    chip = page.locator("#pane-chip")
    expect(chip).to_be_visible()
    expect(chip).to_contain_text("Basic")
    assert view_state(page, call_id)["mode"] == "split"  # still pinned, for later
    chip.click()
    expect(back).to_be_visible()
    page.locator(".side-pane-title").focus()
    page.keyboard.press("Escape")
    expect(page.locator("#composer-input")).to_be_focused()


# ---- 5. how it looks ------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_screenshots(open_as, world, scheme):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = open_as("olivia", color_scheme=scheme)
    goto_thread(page, world, "shots")
    page.evaluate(f"() => window.AtriumTheme.set('{scheme}')")
    if not page.locator(".view-row").count():
        for text in (
            "Morning! Pinning the system monitor so we can all watch the rollout.",
            "Memory looks steady. Starting the canary now.",
        ):
            page.evaluate("t => window.AtriumClient.send({type: 'message.post', text: t})", text)
        call_tool(page, "sysmon.get-system-info")
    row = view_row(page, "get-system-info")
    call_id = wait_ready(page, row)
    if view_state(page, call_id)["mode"] != "split":
        pin(page, row, call_id)
    app = app_frame(row)
    expect(app.locator("#info-hostname")).not_to_have_text("--", timeout=15_000)
    # The default width (other tests widened Olivia's remembered one); the page follows the
    # server's answer like any of her other devices would.
    reply = page.evaluate("() => window.AtriumClient.send({type: 'layout.set', width: 480})")
    assert reply["ok"], reply
    page.wait_for_function("() => window.AtriumAppViews.pane().width === 480")
    for width in (1440, 900):
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_function(
            "() => { const p = window.AtriumAppViews.pane(); return p.mounted && !p.narrow; }"
        )
        if width == 900:  # the workspace sidebar steps aside while a pane is open
            expect(page.locator("#sidebar")).to_be_hidden()
            expect(page.locator(".sidebar-toggle")).to_be_visible()
        slot = page.locator(".side-pane-slot").bounding_box()
        poll(lambda slot=slot: inside(stage_box(row), slot), reason="stage placed", timeout=5)
        page.screenshot(path=str(SHOTS / f"side-pane-{width}-{scheme}.png"))
