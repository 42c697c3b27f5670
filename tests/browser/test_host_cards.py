"""Host cards in real Chromium: what a view asks that needs its person (docs/view-bridge.md).

The view is tests/fixtures/mcp_servers/host_cards.py ("Asking"): one button per request,
each outcome written into its own DOM. The workspace has a model (the fake OpenAI server
of tests/chat/fake_llm.py), so a view's ui/message would start a model turn (F11).

- ui/message → "<app> wants to send: …"; Send posts it (labelled with the app) and starts
  the turn, Dismiss answers the view with an error; "Always allow" is remembered per thread.
- Full screen without a click in the frame → "<app> wants to go full screen" (F14); with a
  click in the frame it just happens; Esc inside the frame leaves it.
- ui/open-link → the whole URL and Open; the click opens a new page (a real gesture).
- A request nested 3,000 deep → a JSON-RPC error with its id, at once.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from audit.models import AuditEvent
from tests.browser.helpers_ui import CSP_WATCH_JS, login
from tests.browser.test_views import HostPageWatch, app_frame, call_tool, view_row, wait_ready
from tests.chat.fake_llm import FakeLLM, openai_text
from tests.live import ROOT, LiveAtrium

pytestmark = [pytest.mark.browser, pytest.mark.slow]

THREADS = ["message", "remember", "modes", "pip", "link", "deep"]

SEED = """
import json, sys
from django.contrib.auth import get_user_model
from chat import services
from bindings.services.bindings import binding_create
from mcp_bridge.services.servers import server_add

U = get_user_model()
owner = U.objects.create_user("olivia", password={password!r}, first_name="Olivia", last_name="Park")
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
workspace.provider = "openai"
workspace.model = "fake-model"
workspace.provider_base_url = {llm_url!r}
workspace.provider_api_key = "sk-test-cards"
workspace.save()
threads = {{
    name: services.thread_create(workspace=workspace, title="Cards " + name, actor=owner).pk
    for name in {threads!r}
}}
server = server_add(
    name="Asking", slug="asking", transport="stdio", command=sys.executable, args=[{server_py!r}],
)
binding_create(server=server, workspace=workspace)
print(json.dumps({{"threads": threads}}))
"""


@dataclass
class World:
    server: LiveAtrium
    llm: FakeLLM
    password: str
    threads: dict[str, int]

    def thread_url(self, name: str) -> str:
        return f"{self.server.app_origin}/w/acme/t/{self.threads[name]}/"

    def audit(self, **filters: Any) -> list[dict[str, Any]]:
        def query(alias: str) -> list[dict[str, Any]]:
            rows = AuditEvent.objects.using(alias).filter(**filters).order_by("id")
            return [
                {"type": r.event_type, "decision": r.decision, "reason": r.reason, "extra": r.extra}
                for r in rows
            ]

        return self.server.read(query)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("cards")
    llm = FakeLLM("openai").start()
    server = LiveAtrium(var_dir=base / "var").setup()
    password = "pw-" + secrets.token_urlsafe(10)
    seeded = json.loads(
        server.shell(
            SEED.format(
                password=password,
                llm_url=llm.base_url,
                threads=THREADS,
                server_py=str(ROOT / "tests" / "fixtures" / "mcp_servers" / "host_cards.py"),
            )
        )
        .strip()
        .splitlines()[-1]
    )
    server.start()
    try:
        yield World(server, llm, password, seeded["threads"])
    finally:
        server.stop()
        llm.stop()


@pytest.fixture
def open_page(browser: Any, world: World) -> Iterator[Any]:
    contexts: list[Any] = []
    watches: list[HostPageWatch] = []

    def open_(thread: str) -> Any:
        context = browser.new_context(
            viewport={"width": 1180, "height": 860}, color_scheme="light", device_scale_factor=1
        )
        context.add_init_script(CSP_WATCH_JS)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(30_000)
        watches.append(HostPageWatch(page, world.server.app_origin))
        login(page, world.server.app_origin, "olivia", world.password)
        page.goto(world.thread_url(thread))
        page.wait_for_selector("#conn-indicator[data-state=live]")
        return page

    yield open_
    problems = [p for watch in watches for p in watch.problems()]
    for context in contexts:
        context.close()
    assert not problems, "CSP violations or script errors on the host page:\n" + "\n".join(problems)


def open_view(page: Any, arguments: dict[str, Any] | None = None) -> tuple[Any, Any, int]:
    call_tool(page, "asking.asking_view", arguments or {})
    row = view_row(page, "asking_view")
    call_id = wait_ready(page, row, timeout=30_000)
    return row, app_frame(row), call_id


def mode_of(page: Any, call_id: int) -> str:
    return page.evaluate(
        "id => window.AtriumAppViews.list().find(v => v.toolCallId === id && !v.modal).mode",
        call_id,
    )


def wait_mode(page: Any, call_id: int, mode: str) -> None:
    page.wait_for_function(
        "([id, mode]) => window.AtriumAppViews.list().find(v => v.toolCallId === id).mode === mode",
        arg=[call_id, mode],
    )


def posted_msg(page: Any, text: str) -> Any:
    """A message in the timeline (not the card, which sits in the view's row)."""
    return page.locator(".msg-entry:not(:has(.view-row))", has_text=text)


def shots(page: Any, directory: Path, name: str, row: Any) -> None:
    """The view's row with its card, armed, in the light theme and in the dark one."""
    expect(row.locator(".host-card button").first).to_be_enabled()
    row.scroll_into_view_if_needed()
    target = row
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.wait_for_selector(f"html[data-theme={scheme}]")
        target.screenshot(path=str(directory / f"cards-{name}-{scheme}.png"))
    page.emulate_media(color_scheme="light")


# ---- F11: ui/message ------------------------------------------------------------------------


def test_message_card_send_posts_and_dismiss_refuses(open_page, world, screenshots):
    page = open_page("message")
    row, app, call_id = open_view(page)

    # The view asks: a card, and nothing is posted (the request's decision is audited).
    app.locator("#text").fill("Dismiss me, please")
    app.locator("#send").click()
    card = row.locator(".host-card[data-card=message]")
    expect(card).to_be_visible()
    expect(card.locator(".host-card-title")).to_have_text("Asking wants to send:")
    expect(card.locator(".host-card-quote")).to_have_text("Dismiss me, please")
    expect(app.locator("#out-message")).to_have_attribute("data-state", "waiting")
    expect(posted_msg(page, "Dismiss me, please")).to_have_count(0)
    shots(page, screenshots, "message", row)

    # Dismiss: the view hears a clear JSON-RPC error; nothing is posted.
    card.locator("[data-card-action=dismiss]").click()
    expect(card).to_have_count(0)
    expect(app.locator("#out-message")).to_have_attribute("data-state", "error")
    expect(app.locator("#out-message")).to_contain_text("dismissed")
    expect(posted_msg(page, "Dismiss me, please")).to_have_count(0)

    # Send: the frozen text is posted, labelled with the app, and the model answers it.
    world.llm.push(openai_text("Here is the summary you asked for."))
    asked = len(world.llm.requests)
    app.locator("#text").fill("Send me, please")
    app.locator("#send").click()
    card.locator("[data-card-action=send]").click()
    expect(app.locator("#out-message")).to_have_attribute("data-state", "ok")
    posted = posted_msg(page, "Send me, please").last
    expect(posted.locator(".via-tag")).to_contain_text("Asking")
    expect(posted_msg(page, "Here is the summary you asked for.")).to_be_visible()
    assert len(world.llm.requests) == asked + 1

    sent = world.audit(thread_id=world.threads["message"], action="view_message")
    assert [(r["reason"], r["decision"]) for r in sent] == [
        ("dismissed", "rejected"),
        ("sent", "approved"),
    ], sent


def test_message_card_always_allow_is_remembered_in_the_thread(open_page, world, screenshots):
    page = open_page("remember")
    row, app, _ = open_view(page)
    world.llm.push(openai_text("First answer."), openai_text("Second answer."))
    app.locator("#text").fill("First, with the box ticked")
    app.locator("#send").click()
    card = row.locator(".host-card[data-card=message]")
    remember = card.locator("[data-card-remember]")
    expect(card.locator(".host-card-remember")).to_contain_text(
        "Always allow Asking to send messages in this thread"
    )
    remember.check()
    card.locator("[data-card-action=send]").click()
    expect(app.locator("#out-message")).to_have_attribute("data-state", "ok")
    expect(posted_msg(page, "First answer.")).to_be_visible()

    # Remembered: the next message of this app in this thread is posted without a card,
    # and the thread's allowances list it (revocable like a tool's).
    app.locator("#text").fill("Second, no card")
    app.locator("#send").click()
    expect(posted_msg(page, "Second, no card").locator(".via-tag")).to_contain_text("Asking")
    expect(card).to_have_count(0)
    expect(page.locator("#allowances")).to_contain_text("ui/message")

    # Per thread: another thread's view still asks.
    other = open_page("message")
    row2, app2, _ = open_view(other)
    app2.locator("#text").fill("Elsewhere")
    app2.locator("#send").click()
    expect(row2.locator(".host-card[data-card=message]")).to_be_visible()
    row2.locator("[data-card-action=dismiss]").click()
    expect(app2.locator("#out-message")).to_have_attribute("data-state", "error")


# ---- F14: display modes -----------------------------------------------------------------------


def test_fullscreen_without_a_gesture_asks_and_esc_in_the_frame_leaves(
    open_page, world, screenshots
):
    page = open_page("modes")
    # Asked for by itself, with no click or key in its frame: a card, the view stays inline.
    row, app, call_id = open_view(page, {"auto": "fullscreen"})
    card = row.locator(".host-card[data-card=display-mode]")
    expect(card).to_be_visible()
    expect(card.locator(".host-card-title")).to_have_text("Asking wants to go full screen")
    assert mode_of(page, call_id) == "inline"
    shots(page, screenshots, "fullscreen", row)
    card.locator("[data-card-action=dismiss]").click()
    expect(app.locator("#out-mode")).to_have_text('{"mode":"inline"}')
    assert mode_of(page, call_id) == "inline"

    # A click in the frame is a gesture there: full screen at once, no card; the app's
    # name and the exit control are host chrome.
    app.locator("#fullscreen").click()
    wait_mode(page, call_id, "fullscreen")
    expect(card).to_have_count(0)
    stage = page.locator(".view-stage[data-mode=fullscreen]")
    expect(stage.locator(".view-stage-title")).to_have_text("Asking")
    expect(stage.locator(".view-exit")).to_be_visible()

    # Esc inside the frame (where the host page never sees the key) leaves full screen.
    app.locator("#text").press("Escape")
    wait_mode(page, call_id, "inline")

    # Again, and Esc with the focus left in the frame.
    app.locator("#fullscreen").click()
    wait_mode(page, call_id, "fullscreen")
    page.keyboard.press("Escape")  # focus is still in the frame
    wait_mode(page, call_id, "inline")
    modes = world.audit(thread_id=world.threads["modes"], action="ui_request_display_mode")
    gestures = [r["extra"].get("gesture") for r in modes if r["decision"] == "allowed"]
    assert gestures.count("frame") == 2, modes


def test_picture_in_picture_card_allow(open_page, world, screenshots):
    page = open_page("pip")
    # Asked for by itself once open: no click or key in its frame.
    row, _app, call_id = open_view(page, {"auto": "pip"})
    card = row.locator(".host-card[data-card=display-mode]")
    expect(card.locator(".host-card-title")).to_have_text(
        "Asking wants to show itself in picture in picture"
    )
    card.locator("[data-card-action=allow]").click()
    wait_mode(page, call_id, "pip")
    modes = world.audit(thread_id=world.threads["pip"], action="ui_request_display_mode")
    assert [r["extra"].get("gesture") for r in modes] == ["card"], modes


# ---- ui/open-link -------------------------------------------------------------------------------


def test_open_link_shows_the_whole_url_and_open_opens_it(open_page, world, screenshots):
    page = open_page("link")
    row, app, _ = open_view(page)
    url = "https://example.com/docs/page?q=1"
    app.locator("#link").click()
    card = row.locator(".host-card[data-card=link]")
    expect(card.locator(".host-card-title")).to_have_text("Asking wants to open a link")
    expect(card.locator(".host-card-url")).to_have_text(url)
    expect(card.locator(".host-card-url strong")).to_have_text("https://example.com")
    expect(app.locator("#out-link")).to_have_attribute("data-state", "waiting")
    shots(page, screenshots, "link", row)
    with page.context.expect_page(timeout=10_000) as opened:
        card.locator("[data-card-action=open]").click()
    assert re.match(r"^(https://example\.com/docs/page\?q=1|chrome-error:)", opened.value.url), (
        opened.value.url
    )
    opened.value.close()
    expect(app.locator("#out-link")).to_have_attribute("data-state", "ok")
    # The frame says under itself which link the view opened.
    expect(row.locator(".view-notice")).to_contain_text("Opened a link from")
    expect(row.locator(".view-notice a")).to_have_text(url)

    # Dismiss: the view hears it was not opened.
    app.locator("#link").click()
    card.locator("[data-card-action=dismiss]").click()
    expect(app.locator("#out-link")).to_have_attribute("data-state", "error")
    expect(app.locator("#out-link")).to_contain_text("did not open")


# ---- deep nesting -------------------------------------------------------------------------------


def test_a_request_nested_3000_deep_gets_a_jsonrpc_error(open_page, world, screenshots):
    page = open_page("deep")
    _row, app, _ = open_view(page)
    app.locator("#deep").click()
    out = app.locator("#out-deep")
    expect(out).to_have_attribute("data-state", "error", timeout=10_000)
    expect(out).to_have_attribute("data-code", "-32600")
    expect(out).to_contain_text("nested too deeply")
    # The socket is kept: the view still talks to the server.
    app.locator("#link").click()
    expect(page.locator(".host-card[data-card=link]")).to_be_visible()
    expect(page.locator("#conn-indicator")).to_have_attribute("data-state", "live")
