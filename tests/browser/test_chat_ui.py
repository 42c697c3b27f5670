"""The chat UI in real Chromium against a real web server: pages, live updates, roles, theme.

Every page opened through `open_as` fails the test on a CSP violation or an uncaught script
error (see helpers_ui.PageWatch).
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser import helpers_ui as ui

# The fixtures live in helpers_ui (conftest.py belongs to the whole browser suite).
ui_world = ui.ui_world
open_as = ui.open_as
shot = ui.shot
wait_live = ui.wait_live

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _composer_send(page, text: str) -> None:
    box = page.locator("#composer-input")
    box.fill(text)
    box.press("Enter")


def _bodies(page) -> list[str]:
    return page.locator("#messages .msg-body").all_inner_texts()


def test_login_workspace_thread_and_live_delivery(open_as, ui_world, screenshots):
    page = open_as(None)
    page.goto(f"{ui_world.origin}/login/")
    expect(page.locator("h1")).to_have_text("Sign in to your team")
    shot(page, screenshots, "login-light")

    page.fill("input[name=username]", "olivia")
    page.fill("input[name=password]", "wrong password")
    page.click("button[type=submit]")
    expect(page.locator(".alert-error")).to_be_visible()

    page.fill("input[name=password]", ui_world.password)
    page.click("button[type=submit]")
    # Home sends a member to their workspace.
    expect(page).to_have_url(re.compile(r"/w/acme/$"))
    expect(page.locator(".page-title")).to_have_text("Acme")
    expect(page.locator(".thread-row-title").first).to_be_visible()
    shot(page, screenshots, "workspace-light")

    page.fill("#new-thread-title", "Release checklist")
    page.click(".start-form button[type=submit]")
    expect(page).to_have_url(re.compile(r"/w/acme/t/\d+/$"))
    expect(page.locator("#thread-title")).to_contain_text("Release checklist")
    expect(page.locator(".thread-link.is-active")).to_contain_text("Release checklist")
    wait_live(page)
    thread_url = page.url

    other = open_as("marco")
    other.goto(thread_url)
    wait_live(other)
    expect(other.locator("#role-badge")).to_have_text("Member")

    _composer_send(page, "Hello from **Olivia** — <script>alert(1)</script>")
    # (The workspace has no model: Atrium's one note about it may follow the message.)
    mine = page.locator("#messages .msg-entry").filter(has_text="Hello from Olivia").last
    expect(mine.locator(".msg-body")).to_contain_text("Hello from Olivia")
    expect(mine.locator(".msg-body strong")).to_have_text("Olivia")
    expect(page.locator("#composer-input")).to_have_value("")

    # The other member sees it without reloading; the markup was escaped, not run.
    theirs = other.locator("#messages .msg-entry").filter(has_text="Hello from Olivia").last
    expect(theirs.locator(".msg-author")).to_have_text("Olivia Park")
    expect(theirs.locator(".msg-body")).to_contain_text("<script>alert(1)</script>")
    assert other.locator("#messages script").count() == 0

    _composer_send(other, "Hi Olivia! Adding the QA items now.\nShift+Enter works too.")
    expect(page.locator("#messages .msg-entry").last.locator(".msg-author")).to_have_text(
        "Marco Rossi"
    )
    # Consecutive messages of one author are grouped.
    _composer_send(other, "Done ✅")
    expect(page.locator("#messages .msg-entry").last).to_have_class(re.compile("is-continuation"))


def test_help_command_answers(open_as, ui_world):
    page = open_as("olivia")
    page.goto(ui_world.thread_url(ui_world.launch_thread))
    wait_live(page)
    box = page.locator("#composer-input")
    box.fill("/")
    popup = page.locator("#slash-popup")
    expect(popup).to_be_visible()
    expect(popup.locator(".slash-name")).to_have_text(["/help", "/tools", "/call"])
    box.press_sequentially("he")
    expect(popup.locator(".slash-name")).to_have_text(["/help"])
    box.press("Enter")

    answer = page.locator("#messages .msg-entry").filter(has_text="Commands").last
    expect(answer.locator(".msg-author")).to_have_text("Atrium")
    expect(answer.locator(".msg-body")).to_contain_text("/call server.tool")
    expect(answer.locator(".msg-body code").first).to_be_visible()


def test_viewer_reads_but_cannot_post(open_as, ui_world, screenshots):
    page = open_as("vera")
    page.goto(ui_world.thread_url(ui_world.launch_thread))
    wait_live(page)
    expect(page.locator("#role-badge")).to_have_text("Viewer")
    box = page.locator("#composer-input")
    expect(box).to_be_disabled()
    expect(box).to_have_attribute("placeholder", "You have view-only access")
    expect(page.locator("#composer-hint")).to_contain_text("view-only access")
    expect(page.locator("#tool-picker-btn")).to_have_count(0)
    expect(page.locator("#messages")).to_contain_text("Kicking off the Q3 launch thread")
    expect(
        page.locator("#messages .msg-body a[href='https://example.com/checklist']")
    ).to_have_attribute("rel", re.compile("noopener"))
    # A viewer has no "New thread" form either.
    expect(page.locator(".new-thread")).to_have_count(0)
    shot(page, screenshots, "thread-viewer-light")


def test_reload_shows_the_same_messages(open_as, ui_world):
    page = open_as("marco")
    page.goto(ui_world.thread_url(ui_world.launch_thread))
    wait_live(page)
    _composer_send(page, "Reload check: `same bytes` after a refresh")
    expect(page.locator("#messages .msg-entry", has_text="Reload check").last).to_be_visible()
    before = _bodies(page)
    authors_before = page.locator(
        "#messages .msg-entry:not(.is-continuation) .msg-author"
    ).all_inner_texts()

    page.reload()
    wait_live(page)
    expect(page.locator("#messages .msg-entry", has_text="Reload check").last).to_be_visible()
    assert _bodies(page) == before
    assert (
        page.locator("#messages .msg-entry:not(.is-continuation) .msg-author").all_inner_texts()
        == authors_before
    )


def test_theme_follows_the_system_and_the_toggle_sticks(open_as, ui_world, screenshots):
    dark_os = open_as("olivia", color_scheme="dark")
    dark_os.goto(ui_world.thread_url(ui_world.launch_thread))
    expect(dark_os.locator("html")).to_have_attribute("data-theme", "dark")

    page = open_as("olivia", color_scheme="light")
    page.goto(ui_world.thread_url(ui_world.launch_thread))
    wait_live(page)
    html = page.locator("html")
    expect(html).to_have_attribute("data-theme", "light")
    light_bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    shot(page, screenshots, "thread-light")

    page.click(".sidebar-bottom [data-theme-toggle]")
    expect(html).to_have_attribute("data-theme", "dark")
    dark_bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert dark_bg != light_bg
    assert page.evaluate("localStorage.getItem('atrium-theme')") == "dark"
    shot(page, screenshots, "thread-dark")

    page.reload()
    expect(html).to_have_attribute("data-theme", "dark")
    page.goto(f"{ui_world.origin}/w/acme/")
    expect(html).to_have_attribute("data-theme", "dark")
    shot(page, screenshots, "workspace-dark")

    # The account menu offers the three-way choice; "System" follows the OS again.
    page.click(".user-btn")
    page.click(".user-menu [data-theme-set=system]")
    expect(html).to_have_attribute("data-theme", "light")
    assert page.evaluate("localStorage.getItem('atrium-theme')") is None


def test_narrow_window_uses_a_drawer(open_as, ui_world, screenshots):
    page = open_as("olivia", viewport=(700, 800))
    page.goto(ui_world.thread_url(ui_world.launch_thread))
    wait_live(page)
    sidebar = page.locator("#sidebar")
    toggle = page.locator("#thread-app [data-sidebar-toggle]")
    expect(toggle).to_be_visible()
    expect(sidebar).to_be_hidden()  # off-canvas, and out of the tab order
    shot(page, screenshots, "thread-narrow")
    toggle.click()
    expect(page.locator("[data-app]")).to_have_class(re.compile("sidebar-open"))
    expect(sidebar.locator(".thread-link.is-active")).to_be_visible()
    expect(sidebar).to_have_css("transform", "none")  # slid in
    shot(page, screenshots, "thread-narrow-drawer")
    page.keyboard.press("Escape")
    expect(page.locator("[data-app]")).not_to_have_class(re.compile("sidebar-open"))
    expect(sidebar).to_be_hidden()


def test_user_without_workspace_gets_a_clear_page(open_as, ui_world):
    page = open_as("nadia")
    expect(page.locator("h1")).to_have_text("You're not in a workspace yet")


def test_tool_picker_cards_and_approvals(open_as, ui_world, screenshots):
    if "board" not in ui_world.servers:
        pytest.skip(f"servers could not be bound: {ui_world.servers.get('error')}")
    page = open_as("olivia")
    page.goto(ui_world.thread_url(ui_world.tools_thread))
    wait_live(page)

    _composer_send(page, "/call board.list_items {}")
    card = page.locator(".toolcall", has=page.locator(".tc-tool", has_text="list_items")).last
    expect(card.locator(".status-pill")).to_have_text("Done", timeout=30_000)
    expect(card.locator(".chip-origin")).to_have_text("Olivia Park")
    expect(card.locator(".tc-args")).not_to_have_attribute("open", "")
    expect(page.locator(".view-row[data-tool-call-id]")).to_have_count(1)

    # The picker lists the bound servers' tools (the catalogue is known after a first
    # call) and fills in a /call skeleton from the input schema.
    page.click("#tool-picker-btn")
    picker = page.locator("#tool-picker")
    expect(picker).to_be_visible()
    page.fill("#tool-picker-search", "add item")
    expect(picker.locator(".picker-item").first).to_contain_text("board.add_item")
    page.keyboard.press("Enter")
    expect(picker).to_be_hidden()
    expect(page.locator("#composer-input")).to_have_value(
        re.compile(r'^/call board\.add_item \{"title":""')
    )
    page.locator("#composer-input").fill("")

    # A person's own call is consent: even a destructive tool runs with no approval card,
    # and a viewer sees it run. (Approval cards, which views' and the model's calls get,
    # are covered by tests/browser/test_consent.py.)
    watcher = open_as("vera")
    watcher.goto(ui_world.thread_url(ui_world.tools_thread))
    wait_live(watcher)
    _composer_send(page, '/call board.delete_item {"id": "ATR-101"}')
    pending = page.locator(".toolcall", has=page.locator(".tc-tool", has_text="delete_item")).last
    expect(pending.locator(".status-pill")).to_have_text("Done", timeout=30_000)
    expect(pending.locator(".approval")).to_have_count(0)
    seen = watcher.locator(
        ".toolcall", has=watcher.locator(".tc-tool", has_text="delete_item")
    ).last
    expect(seen.locator(".status-pill")).to_have_text("Done", timeout=30_000)
    expect(seen.locator(".approval")).to_have_count(0)

    if "media" in ui_world.servers:
        _composer_send(page, "/call media.get_everything {}")
        media = page.locator(
            ".toolcall", has=page.locator(".tc-tool", has_text="get_everything")
        ).last
        expect(media.locator(".status-pill")).not_to_have_text("Running", timeout=30_000)
    page.locator(".toolcall").first.scroll_into_view_if_needed()
    shot(page, screenshots, "tools-light")

    page.locator("html").evaluate("el => el.setAttribute('data-theme', 'dark')")
    shot(page, screenshots, "tools-dark")


def test_reconnects_and_resumes_after_a_server_restart(open_as, ui_world):
    page = open_as("marco")
    page.goto(ui_world.thread_url(ui_world.launch_thread))
    wait_live(page)

    ui_world.server.stop()
    banner = page.locator("#reconnect-banner")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("Reconnecting")
    # Written while this client is away: it must arrive through the resume (?after=).
    ui_world.server.shell(
        "from django.contrib.auth import get_user_model; from chat import services; "
        "from chat.models import Thread; "
        f"t = Thread.objects.get(pk={ui_world.launch_thread}); "
        "u = get_user_model().objects.get(username='olivia'); "
        "services.message_post(thread=t, author=u, text='Sent while you were away')"
    )
    ui_world.server.start()

    expect(page.locator("#conn-indicator")).to_have_attribute("data-state", "live", timeout=30_000)
    expect(banner).to_be_hidden()
    expect(page.locator("#messages .msg-entry").last).to_contain_text("Sent while you were away")
    assert page.locator("#messages .msg-body", has_text="Sent while you were away").count() == 1

    _composer_send(page, "And I'm back")
    expect(page.locator("#messages .msg-entry", has_text="And I'm back").last).to_be_visible()
