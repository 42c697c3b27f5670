"""Signing in to an OAuth-protected MCP server, in real Chromium against a real web server and
the real example authorization server (examples/oauth_server): connect, consent, call,
silent refresh, revocation → "Connect" again, and a second member with their own account.
"""

from __future__ import annotations

import json
import re
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.helpers_ui import CSP_WATCH_JS, PageWatch, login
from tests.fixtures.http_servers import free_port, serve
from tests.live import ROOT, LiveAtrium

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TOKEN_PREFIX = "atrium-oauth-sentinel-"

SEED = """
import json
from django.contrib.auth import get_user_model
from chat import services
from bindings.services.bindings import binding_create
from bindings.services.policies import tool_policy_set
from mcp_bridge.services.servers import server_add
from mcp_bridge.models import McpServer

U = get_user_model()

def person(username, first, last, staff=False):
    user = U.objects.create_user(username, password={password!r}, first_name=first, last_name=last)
    user.is_staff = user.is_superuser = staff
    user.save()
    return user

owner = person("olivia", "Olivia", "Park", staff=True)
member = person("marco", "Marco", "Rossi")
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
services.membership_set(workspace=workspace, user=member, role="member")
thread = services.thread_create(workspace=workspace, title="Notes", actor=owner)
server = server_add(name="Notes", slug="notes", transport="streamable_http", url={url!r})
McpServer.objects.filter(pk=server.pk).update(auth_mode="oauth_member")
binding = binding_create(server=server, workspace=workspace)
tool_policy_set(binding=binding, tool_name="my_notes", approval="auto")
print(json.dumps({{"thread": thread.pk, "server": server.pk}}))
"""


class World:
    def __init__(self, atrium: LiveAtrium, notes_base: str, password: str, seeded: dict) -> None:
        self.atrium, self.notes_base, self.password = atrium, notes_base, password
        self.thread, self.server = seeded["thread"], seeded["server"]

    @property
    def thread_url(self) -> str:
        return f"{self.atrium.app_origin}/w/acme/t/{self.thread}/"

    def notes_control(self, path: str) -> dict[str, Any]:
        method = "GET" if path == "stats" else "POST"
        response = httpx.request(method, f"{self.notes_base}/_control/{path}", timeout=10)
        response.raise_for_status()
        return response.json()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    var = tmp_path_factory.mktemp("oauth-live")
    port = free_port()
    command = [sys.executable, str(ROOT / "examples/oauth_server/server.py"), "--port", str(port)]
    # Access tokens shorter-lived than the refresh margin: each new connection refreshes.
    command += ["--access-ttl", "2"]
    with serve(command, port=port, probe_path=None, log_path=var / "notes.log", cwd=ROOT):
        atrium = LiveAtrium(var_dir=var / "var").setup()
        password = secrets.token_urlsafe(12)
        seeded = json.loads(
            atrium.shell(SEED.format(password=password, url=f"http://127.0.0.1:{port}/mcp"))
            .strip()
            .splitlines()[-1]
        )
        atrium.start()
        try:
            yield World(atrium, f"http://127.0.0.1:{port}", password, seeded)
        finally:
            atrium.stop()


@pytest.fixture
def pages(browser: Any, world: World) -> Iterator[Any]:
    contexts: list[Any] = []
    watches: list[PageWatch] = []

    def open_page(username: str, color_scheme: str = "light") -> Any:
        context = browser.new_context(
            viewport={"width": 1180, "height": 820}, color_scheme=color_scheme
        )
        context.add_init_script(CSP_WATCH_JS)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(20_000)
        watches.append(PageWatch(page))
        login(page, world.atrium.app_origin, username, world.password)
        return page

    yield open_page
    problems = [p for watch in watches for p in watch.problems()]
    for context in contexts:
        context.close()
    assert not problems, "CSP violations or script errors:\n" + "\n".join(problems)


def _call(page: Any) -> Any:
    """/call the notes tool; returns the new call's card."""
    before = page.locator(".toolcall").count()
    box = page.locator("#composer-input")
    box.fill("/call notes.my_notes {}")
    box.press("Enter")
    expect(page.locator(".toolcall")).to_have_count(before + 1)
    return page.locator(".toolcall").last


def _consent(popup: Any, account_button: str) -> None:
    """In the connect tab: continue to the provider, allow, and land on "Connected"."""
    popup.wait_for_load_state()
    expect(popup.locator("h1")).to_have_text(re.compile(r"Sign in to Notes|Notes would like"))
    if popup.locator("#oauth-continue").count():
        popup.click("#oauth-continue")
    popup.click(f"button:has-text('{account_button}')")
    expect(popup.locator("[data-oauth-result]")).to_have_attribute("data-oauth-result", "connected")
    # The result page has told the conversation's tabs (the tests close it next).
    expect(popup.locator("body")).to_have_attribute("data-oauth-announced", "true")


def test_connect_call_refresh_revoke_and_each_member_sees_their_own(
    world: World, pages: Any, screenshots: Path
) -> None:
    olivia = pages("olivia")

    # An admin connects her own account from the server's admin page.
    olivia.goto(f"{world.atrium.app_origin}/admin/mcp_bridge/mcpserver/{world.server}/change/")
    with olivia.expect_popup() as opened:
        olivia.click("button:has-text('Connect my account')")
    popup = opened.value
    expect(popup.locator("#oauth-continue")).to_be_visible()
    popup.screenshot(path=str(screenshots / "oauth-continue-light.png"))
    _consent(popup, "Allow as Alice")
    popup.screenshot(path=str(screenshots / "oauth-connected-light.png"))
    popup.close()

    # Her call runs with her grant; the stored token was due, so it was refreshed silently.
    refreshes = world.notes_control("stats")["refresh_token"]
    olivia.goto(world.thread_url)
    olivia.wait_for_selector("#conn-indicator[data-state=live]")
    card = _call(olivia)
    expect(card).to_contain_text("Notes of Alice")
    assert world.notes_control("stats")["refresh_token"] > refreshes

    # Marco has not connected: his call ends in the Connect card.
    marco = pages("marco")
    marco.goto(world.thread_url)
    marco.wait_for_selector("#conn-indicator[data-state=live]")
    card = _call(marco)
    connect = card.locator(".callout-connect")
    expect(connect).to_contain_text("Connect Notes to continue")
    expect(card).not_to_contain_text("Notes of")
    card.scroll_into_view_if_needed()
    card.screenshot(path=str(screenshots / "oauth-connect-card-light.png"))
    calls_before = marco.locator(".toolcall").count()
    with marco.expect_popup() as opened:
        connect.locator("button:has-text('Connect Notes')").click()
    _consent(opened.value, "Allow as Bob")
    opened.value.close()
    # Signed in: the refused call runs again by itself, once (sign-in on demand).
    expect(marco.locator(".toolcall").last).to_contain_text("Notes of Bob")
    expect(marco.locator(".toolcall")).to_have_count(calls_before + 1)

    # The provider revokes Alice's tokens: her next call asks her to connect again.
    world.notes_control("revoke?account=alice")
    card = _call(olivia)
    expect(card.locator(".callout-connect")).to_contain_text("Connect Notes to continue")
    expect(card).not_to_contain_text("Notes of")

    # Marco's grant is untouched.
    expect(_call(marco)).to_contain_text("Notes of Bob")


def test_connect_card_and_pages_in_dark_theme(world: World, pages: Any, screenshots: Path) -> None:
    page = pages("marco", color_scheme="dark")
    # Whatever state the first test left, a fresh provider-side revocation makes the card.
    world.notes_control("revoke?account=bob")
    page.goto(world.thread_url)
    page.wait_for_selector("#conn-indicator[data-state=live]")
    card = _call(page)
    expect(card.locator(".callout-connect")).to_be_visible()
    card.scroll_into_view_if_needed()
    card.screenshot(path=str(screenshots / "oauth-connect-card-dark.png"))
    with page.expect_popup() as opened:
        card.locator("button:has-text('Connect Notes')").click()
    popup = opened.value
    expect(popup.locator("#oauth-continue")).to_be_visible()
    popup.screenshot(path=str(screenshots / "oauth-continue-dark.png"))
    _consent(popup, "Allow as Bob")
    popup.screenshot(path=str(screenshots / "oauth-connected-dark.png"))


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_admin_grants_and_refusal_page(world: World, pages: Any, screenshots: Path, scheme: str):
    page = pages("olivia", color_scheme=scheme)
    # Her own grant, made here: what the earlier tests of the module left is theirs.
    page.goto(f"{world.atrium.app_origin}/admin/mcp_bridge/mcpserver/{world.server}/change/")
    with page.expect_popup() as opened:
        page.click("button:has-text('Connect my account')")
    _consent(opened.value, "Allow as Alice")
    opened.value.close()
    page.goto(f"{world.atrium.app_origin}/admin/mcp_bridge/oauthgrant/")
    expect(page.locator("#result_list")).to_contain_text("olivia")
    expect(page.locator("#result_list")).not_to_contain_text(TOKEN_PREFIX)
    page.screenshot(path=str(screenshots / f"oauth-admin-grants-{scheme}.png"))
    page.goto(f"{world.atrium.app_origin}/admin/mcp_bridge/mcpserver/{world.server}/change/")
    field = page.locator(".field-sign_in")
    expect(field).to_contain_text("member(s) connected")
    field.scroll_into_view_if_needed()
    field.screenshot(path=str(screenshots / f"oauth-admin-sign-in-{scheme}.png"))
    # A callback nobody started: refused, clearly.
    page.goto(f"{world.atrium.app_origin}/oauth/callback/?code=x&state=forged")
    expect(page.locator("[data-oauth-result]")).to_have_attribute("data-oauth-result", "failed")
    expect(page.locator(".alert")).to_contain_text("unknown")
    page.screenshot(path=str(screenshots / f"oauth-refused-{scheme}.png"))
