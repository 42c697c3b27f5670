"""`@modelcontextprotocol/server-lazy-auth` 2.0.3 in Atrium: sign-in on demand from a view.

The official example of lazy OAuth (tools/mcp-servers, pinned): the server lists its tools
and answers public ones to anyone; its view's "Auth me" button calls the protected
`get_secret` with `callServerTool`, which the server answers `401` + `WWW-Authenticate`
(resource metadata at `/auth/prm`). Its authorization server is built in (same origin):
HS256 JWTs, an "Approve" page, no dynamic registration — it takes client ID metadata
documents, so Atrium's client id is its document's https URL
(`ATRIUM_OAUTH_CLIENT_METADATA_URL`; the mock does not fetch it).

Set up as an operator would: `mcp add lazy-auth --url … --auth oauth_member`, then
`mcp bind --auto` for the tools the view calls. In real Chromium against one real web server:

1. the view mounts, handshakes and renders (both themes, not flat);
2. "Auth me" → the call ends `authorization_required` → the Connect card shows beside the
   view while the view's request stays unanswered;
3. Connect → Atrium's page → the provider's Approve → "Connected" → the host sends the
   view's request again and the view shows the secret;
4. refresh: access tokens live 2 s (`ACCESS_TOKEN_TTL_SECONDS`); once the stored token is
   due (read from the grant's row), the next "Auth me" refreshes it silently (the grant's
   `refreshed_at` and the server's log say so) and succeeds with no card;
5. the session ends at the provider ("Revoke token", the server's own protected tool,
   which revokes access and refresh tokens): the next "Auth me" asks the member again,
   inline, with a new Connect card beside the view; signing in again answers the view;
6. a reload brings the view back; no CSP violation.

Consent cards: one Connect card per sign-in (two here); nothing else asks in Atrium.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.helpers_ui import login
from tests.compat.test_official_servers import (
    Violations,
    app_frame,
    not_blank,
    view_row,
    view_screenshot,
    wait_handshake,
    wait_mounted,
)
from tests.fixtures.http_servers import free_port, serve
from tests.live import ROOT, LiveAtrium
from tests.waiting import WaitTimeout, poll

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("ATRIUM_PROFILE") == "production" or bool(os.environ.get("DATABASE_URL")),
        reason="profile-independent: the compatibility suite runs once, on the embedded pass",
    ),
]

LAZY_AUTH = (
    ROOT / "tools/mcp-servers/node_modules/@modelcontextprotocol/server-lazy-auth/dist/index.js"
)
SLUG = "lazy-auth"
ACCESS_TTL = 2  # seconds; Atrium counts a token due min(5 s, half its lifetime) early
SECRET = "the-answer-is-42"
WAIT = 20_000  # ms: a server round trip on a busy 2-core machine


@dataclass
class World:
    server: LiveAtrium
    password: str
    thread: int
    database: Path
    log: Path

    @property
    def thread_url(self) -> str:
        return f"{self.server.app_origin}/w/acme/t/{self.thread}/"

    def grant(self) -> dict[str, Any] | None:
        with sqlite3.connect(f"file:{self.database}?mode=ro", uri=True) as db:
            db.row_factory = sqlite3.Row
            row = db.execute(
                "SELECT g.id, g.expires_at, g.refreshed_at FROM mcp_bridge_oauthgrant g "
                "JOIN mcp_bridge_mcpserver s ON s.id = g.server_id WHERE s.slug = ?",
                (SLUG,),
            ).fetchone()
        return dict(row) if row else None

    def refreshes(self) -> int:
        """Refreshes the provider granted (its log: `[auth] refreshed access token`)."""
        return self.log.read_text(errors="replace").count("[auth] refreshed access token")


SEED = """
import json
from django.contrib.auth import get_user_model
from chat import services
owner = get_user_model().objects.create_user("olivia", password={password!r})
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
thread = services.thread_create(workspace=workspace, title="Lazy auth", actor=owner)
print(json.dumps(thread.pk))
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    if not LAZY_AUTH.exists():
        pytest.skip("run tools/install-mcp-servers.sh (make test does)")
    var = tmp_path_factory.mktemp("lazy-auth")
    port = free_port()
    log = var / "lazy-auth.log"
    env = {
        "PORT": str(port),
        "JWT_SECRET": "atrium-compat-" + secrets.token_hex(16),
        "ACCESS_TOKEN_TTL_SECONDS": str(ACCESS_TTL),
    }
    with serve(["node", str(LAZY_AUTH)], port=port, env=env, probe_path=None, log_path=log):
        # The provider takes client ID metadata documents only (no registration): Atrium's
        # document must have an https URL, which a test server on http has not.
        metadata_url = "https://atrium.example/oauth/client-metadata.json"
        server = LiveAtrium(
            var_dir=var / "var", extra_env={"ATRIUM_OAUTH_CLIENT_METADATA_URL": metadata_url}
        ).setup()
        password = "pw-" + secrets.token_urlsafe(10)
        thread = json.loads(server.shell(SEED.format(password=password)).strip().splitlines()[-1])
        url = f"http://127.0.0.1:{port}/mcp"
        added = server.manage("mcp", "add", SLUG, "--url", url, "--auth", "oauth_member")
        assert SLUG in added, added
        # The catalogue is read without a sign-in (the server lists its tools to anyone).
        autos = ("show_auth_button", "get_secret", "revoke_auth_token")
        bound = server.manage(
            "mcp", "bind", SLUG, "--workspace", "acme", *(a for t in autos for a in ("--auto", t))
        )
        assert "runs without asking" in bound, bound
        server.start()
        try:
            yield World(server, password, thread, var / "var" / "atrium.sqlite3", log)
        finally:
            server.stop()


@pytest.fixture(scope="module")
def context(browser: Any, world: World) -> Iterator[Any]:
    context = browser.new_context(
        viewport={"width": 1280, "height": 1000}, color_scheme="light", device_scale_factor=1
    )
    page = context.new_page()
    page.set_default_timeout(30_000)
    login(page, world.server.app_origin, "olivia", world.password)
    page.close()
    yield context
    context.close()


def connect_card(row: Any) -> Any:
    """The Connect card of the view's refused call: beside the view, out of its group."""
    return row.locator(":scope > .view-calls > .view-calls-attention .callout-connect")


def sign_in(page: Any, card: Any, screenshots: Path | None = None) -> None:
    """Connect (a new tab) → Atrium's page → the provider's Approve → "Connected"."""
    with page.expect_popup() as opened:
        card.get_by_role("button", name=f"Connect {SLUG}").click()
    popup = opened.value
    popup.wait_for_load_state()
    popup.locator("#oauth-continue").click()
    expect(popup.locator("h2")).to_contain_text("Mock Authorization", timeout=WAIT)
    if screenshots is not None:
        popup.screenshot(path=str(screenshots / "compat-lazy-auth-provider.png"))
    popup.get_by_role("button", name="Approve").click()
    expect(popup.locator("[data-oauth-result]")).to_have_attribute(
        "data-oauth-result", "connected", timeout=WAIT
    )
    # The result page has told the conversation's tabs (a tab closed before its script ran
    # told nobody, and the view's request was never sent again: CI, session 15).
    expect(popup.locator("body")).to_have_attribute("data-oauth-announced", "true", timeout=WAIT)
    popup.close()


def wait_due(world: World) -> None:
    """Until the stored access token is due for a refresh (a condition on the grant's row:
    expires_at minus Atrium's margin, half the 2 s lifetime, has passed)."""

    def due() -> bool:
        grant = world.grant()
        assert grant and grant["expires_at"], grant
        expires = datetime.fromisoformat(grant["expires_at"]).replace(tzinfo=UTC)
        return datetime.now(UTC) >= expires - timedelta(seconds=ACCESS_TTL / 2)

    poll(due, timeout=ACCESS_TTL + 5, interval=0.1, reason="the stored token is due")


@pytest.mark.timeout(180)
def test_view_protected_call_signs_in_inline_refreshes_and_asks_again(
    world: World, context: Any, screenshots: Path
) -> None:
    page = context.new_page()
    page.set_default_timeout(30_000)
    violations = Violations(page)
    connect_cards = 0
    try:
        page.goto(world.thread_url)
        page.wait_for_selector("#conn-indicator[data-state=live]")
        box = page.locator("#composer-input")
        box.fill(f"/call {SLUG}.show_auth_button {{}}")
        box.press("Enter")

        # 1. Mounted, handshake complete, rendered in both themes (no sign-in needed).
        row = view_row(page, "show_auth_button")
        call_id = wait_mounted(page, row)
        wait_handshake(page, call_id)
        app = app_frame(row)
        expect(app.locator("h3")).to_have_text("Public App")
        for theme in ("light", "dark"):
            page.evaluate("theme => window.AtriumTheme.set(theme)", theme)
            png = view_screenshot(page, row, screenshots / f"compat-lazy-auth-{theme}.png")
            visible, detail = not_blank(png)
            assert visible, f"lazy-auth looks blank in the {theme} theme: {detail}"
        page.evaluate("() => window.AtriumTheme.set('light')")
        assert world.grant() is None

        # 2. The view's protected call: 401 → the Connect card beside the view; the
        # view's request waits (its button stays disabled, no output yet).
        button = app.locator("#auth-btn")
        # A key press, not a click: the row moves while the view's calls come and go, and
        # a click computed before the move can miss the button.
        button.press("Enter")
        card = connect_card(row)
        expect(card).to_contain_text(f"Connect {SLUG} to continue", timeout=WAIT)
        expect(app.locator("#output")).to_be_empty()
        expect(button).to_be_disabled()
        card.scroll_into_view_if_needed()
        row.screenshot(path=str(screenshots / "compat-lazy-auth-connect-card-light.png"))

        # 3. Sign in: the host sends the view's request again; the view gets the secret.
        sign_in(page, card, screenshots)
        connect_cards += 1
        output = app.locator("#output .result")
        expect(output).to_contain_text(SECRET, timeout=WAIT)
        expect(app.locator("#output .error")).to_have_count(0)
        expect(card).to_have_count(0, timeout=WAIT)  # answered: it joined the view's group of calls
        first = output.inner_text()

        # 4. Refresh: once the 2 s token is due, the next call refreshes it silently.
        refreshes = world.refreshes()
        wait_due(world)
        button.press("Enter")
        expect(output).not_to_have_text(first, timeout=WAIT)  # a new secret (issuedAt) arrived
        expect(output).to_contain_text(SECRET, timeout=WAIT)
        expect(connect_card(row)).to_have_count(0)
        poll(lambda: world.refreshes() > refreshes, timeout=10, interval=0.1, reason="refresh")
        assert world.grant()["refreshed_at"], world.grant()

        # 5. The session ends at the provider: the next protected call asks again, inline.
        app.locator("#revoke-btn").press("Enter")
        expect(app.locator("#output .result")).to_contain_text("Session revoked", timeout=WAIT)
        button.press("Enter")
        card = connect_card(row)
        expect(card).to_contain_text(f"Connect {SLUG} to continue", timeout=WAIT)
        try:
            poll(lambda: world.grant() is None, timeout=10, interval=0.1, reason="grant gone")
        except WaitTimeout as exc:
            raise AssertionError(f"{exc}: {world.grant()}") from exc
        sign_in(page, card)
        connect_cards += 1
        expect(output).to_contain_text(SECRET, timeout=WAIT)
        assert connect_cards == 2

        # 6. A reload brings the view back from the stored result.
        page.reload()
        page.wait_for_selector("#conn-indicator[data-state=live]")
        restored = page.locator(f'.view-row[data-tool-call-id="{call_id}"]')
        wait_mounted(page, restored)
        wait_handshake(page, call_id)
        expect(app_frame(restored).locator("#auth-btn")).to_be_visible()

        unexpected = violations.unexpected({})
        assert not unexpected, "CSP violations:\n" + "\n".join(unexpected)
    finally:
        page.close()
