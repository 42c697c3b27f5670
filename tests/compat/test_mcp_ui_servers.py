"""Legacy MCP-UI servers in Atrium: the apps people built before MCP Apps.

Two third-party stacks, pinned, set up the way an operator would (`manage.py mcp import
mcp.json --bind acme`, then `mcp bind … --auto` for the tools a person starts):

- **MCP-UI's TypeScript server demo** (MCP-UI-Org/mcp-ui `examples/typescript-server-demo` at
  6e8ac9c) on `@mcp-ui/server` 5.16.1 (tools/mcp-servers/mcp-ui-demo/server.mjs): raw HTML,
  remote-dom (`framework=react`), the remote-dom demo's script (`framework=webcomponents`,
  with `tool` and `notify` actions), and an external URL;
- **a Python `mcp-ui-server` 1.0.0 server** written like MCP-UI's `python-server-demo`
  (tests/fixtures/mcp_ui/python_server.py, in its own venv with `mcp` 1.27.2:
  tools/install-compat-venvs.sh): raw HTML, remote-dom, and a page sending every UI action
  kind (tool, prompt, link, notify, intent) built with the SDK's helpers.

The same checks as the official suite (test_official_servers.py): it mounts; it renders, not
flat, in the light and dark theme; one interaction goes through the host (an audited request
of the view); a reload brings it back; no CSP violation; and the number of consent cards a
person must click (approval and host cards) is what the table in docs/compat.md says.
The `echo` tool the views call is left to ask (not `--auto`): its approval is a card.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.helpers_ui import login
from tests.compat.test_official_servers import (
    Violations,
    app_frame,
    not_blank,
    outer_frame,
    view_row,
    view_screenshot,
)
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

TS_DEMO = ROOT / "tools" / "mcp-servers" / "mcp-ui-demo" / "server.mjs"
MCP_UI_NODE = ROOT / "tools" / "mcp-servers" / "node_modules" / "@mcp-ui" / "server"
PY_VENV = ROOT / ".tools" / "venvs" / "mcp-ui-server" / "bin" / "python"
PY_DEMO = ROOT / "tests" / "fixtures" / "mcp_ui" / "python_server.py"
SDK_LEGACY = ROOT / "tests" / "fixtures" / "mcp_servers" / "apps_sdk_legacy.py"
THREADS = ("ts", "py", "sdk")


@dataclass
class World:
    server: LiveAtrium
    password: str
    threads: dict[str, int]
    database: Path

    def thread_url(self, name: str) -> str:
        return f"{self.server.app_origin}/w/acme/t/{self.threads[name]}/"

    def audit_rows(self, since: int = 0) -> list[dict[str, Any]]:
        import sqlite3

        with sqlite3.connect(f"file:{self.database}?mode=ro", uri=True) as db:
            db.row_factory = sqlite3.Row
            rows = db.execute(
                "SELECT id, action, decision, reason, tool_name, actor_kind "
                "FROM bindings_auditevent WHERE id > ? ORDER BY id",
                (since,),
            ).fetchall()
        return [dict(row) for row in rows]

    def last_audit_id(self) -> int:
        rows = self.audit_rows()
        return rows[-1]["id"] if rows else 0

    def wait_audit(self, since: int, action: str, tool: str = "") -> dict[str, Any]:
        seen: list[dict[str, Any]] = []

        def found() -> dict[str, Any] | None:
            seen[:] = [r for r in self.audit_rows(since) if r["actor_kind"] == "app_view"]
            for row in seen:
                if row["action"] == action and (not tool or row["tool_name"] == tool):
                    return row
            return None

        try:
            return poll(found, timeout=30, interval=0.2, reason=f"audit {action} {tool}")
        except WaitTimeout as exc:
            rows = [(r["action"], r["tool_name"], r["decision"]) for r in seen]
            raise AssertionError(f"{exc}; the view's rows: {rows}") from exc


SEED = """
import json
from django.contrib.auth import get_user_model
from chat import services
owner = get_user_model().objects.create_user("olivia", password={password!r})
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
print(json.dumps({{n: services.thread_create(workspace=workspace, title=n, actor=owner).pk
                  for n in {names!r}}}))
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    if not MCP_UI_NODE.is_dir():
        pytest.skip("run tools/install-mcp-servers.sh (make test does)")
    if not PY_VENV.exists():
        pytest.skip("run tools/install-compat-venvs.sh (make test does)")
    var_dir = tmp_path_factory.mktemp("mcp-ui") / "var"
    server = LiveAtrium(var_dir=var_dir).setup()
    password = "pw-" + secrets.token_urlsafe(10)
    threads = json.loads(
        server.shell(SEED.format(password=password, names=list(THREADS))).strip().splitlines()[-1]
    )
    config = {
        "mcpServers": {
            "mcp-ui-ts": {"command": "node", "args": [str(TS_DEMO)]},
            "mcp-ui-py": {"command": str(PY_VENV), "args": [str(PY_DEMO)]},
            "apps-sdk-legacy": {"command": sys.executable, "args": [str(SDK_LEGACY)]},
        }
    }
    (var_dir / "mcp.json").write_text(json.dumps(config))
    imported = server.manage("mcp", "import", str(var_dir / "mcp.json"), "--bind", "acme")
    assert imported.count("Added '") == 3, imported
    # The tools a person starts run without asking; `echo`, which the views call, asks.
    binds = [
        ["bind", "mcp-ui-ts", "--workspace", "acme"]
        + [
            a
            for t in (
                "showRawHtml",
                "showRemoteDom",
                "showRemoteDomWebComponents",
                "showExternalUrl",
            )
            for a in ("--auto", t)
        ],
        ["bind", "mcp-ui-py", "--workspace", "acme"]
        + [
            a
            for t in ("show_raw_html", "show_remote_dom", "show_action_html")
            for a in ("--auto", t)
        ],
    ]
    server.shell(
        "from django.core.management import call_command\n"
        f"for args in {binds!r}:\n    call_command('mcp', *args)\n"
    )
    server.start()
    try:
        yield World(server, password, threads, var_dir / "atrium.sqlite3")
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


# ---- the checks ---------------------------------------------------------------------------------


class Consent:
    """The consent cards a person clicks (approval cards and the view's host cards)."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.clicked: list[str] = []

    def approve(self) -> None:
        button = self.page.locator('button[data-action="approve"]:visible').last
        expect(button).to_be_enabled(timeout=20_000)
        button.click()
        self.clicked.append("approval")

    def host_card(self, row: Any, kind: str, button: str) -> None:
        card = row.locator(f'.host-card[data-card="{kind}"]')
        expect(card).to_be_visible(timeout=20_000)
        click = card.get_by_role("button", name=button)
        expect(click).to_be_enabled(timeout=5_000)  # cards arm after half a second
        click.click()
        expect(card).to_have_count(0)
        self.clicked.append(kind)


@dataclass(frozen=True)
class Spec:
    id: str
    thread: str
    server: str
    tool: str
    rendered: Callable[[Any], None]
    # The interaction (app frame, page, world, consent, row); None: judged on rendering.
    interact: Callable[[Any, Any, World, Consent, Any], None] | None = None
    cards: int = 0
    legacy_ready: bool = True  # the view says ui-lifecycle-iframe-ready
    screenshots: bool = True
    internet: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def text_in(selector: str, text: str) -> Callable[[Any], None]:
    def check(app: Any) -> None:
        expect(app.locator(selector).first).to_have_text(text, timeout=30_000)

    return check


def webcomponents_interaction(
    app: Any, page: Any, world: World, consent: Consent, row: Any
) -> None:
    toggle = app.locator("ui-button").first
    toggle.click()  # works in the view alone: the script changes its own elements
    expect(toggle).to_have_attribute("label", "☀️ Switch to Light Mode")
    app.locator("ui-input input").fill("Grace")
    since = world.last_audit_id()
    app.locator("ui-button", has_text="Echo via tool").click()
    assert world.wait_audit(since, "legacy_tool", "echo")["decision"] == "pending"
    consent.approve()
    # The approved call ran: its card joined the view's group of calls, done.
    done = page.locator(
        '.view-calls .toolcall[data-status="success"]',
        has=page.locator(".tc-tool", has_text="echo"),
    )
    expect(done).to_have_count(1, timeout=20_000)
    app.locator("ui-button", has_text="Notify").click()
    assert world.wait_audit(since, "legacy_notify")["decision"] == "allowed"


def every_action(app: Any, page: Any, world: World, consent: Consent, row: Any) -> None:
    since = world.last_audit_id()
    app.locator("#send-tool").click()
    consent.approve()
    expect(app.locator("#log-tool")).to_have_text("tool: done", timeout=20_000)
    app.locator("#send-prompt").click()  # no model here: posted at once, labelled with the app
    expect(app.locator("#log-prompt")).to_have_text("prompt: done", timeout=20_000)
    expect(page.locator("#timeline")).to_contain_text("Summarise the action page, please.")
    app.locator("#send-intent").click()
    expect(app.locator("#log-intent")).to_have_text("intent: done", timeout=20_000)
    expect(page.locator("#timeline")).to_contain_text("Intent: view_profile")
    app.locator("#send-link").click()
    consent.host_card(row, "link", "Dismiss")
    expect(app.locator("#log-link")).to_contain_text("link: error", timeout=20_000)
    app.locator("#send-notify").click()
    expect(app.locator("#log-notify")).to_have_text("notify: done", timeout=20_000)
    # A notification is fire-and-forget: the view logs "done" when it is sent, and the
    # server audits it when it arrives (no answer comes back to wait on).
    world.wait_audit(since, "legacy_notify")
    for action, tool, decision in (
        ("legacy_tool", "echo", "pending"),  # then approved: the card above
        ("legacy_prompt", "", "allowed"),
        ("legacy_intent", "", "allowed"),
        ("legacy_link", "", "allowed"),
        ("legacy_notify", "", "allowed"),
    ):
        rows = [
            r
            for r in world.audit_rows(since)
            if r["action"] == action and (not tool or r["tool_name"] == tool)
        ]
        assert any(r["decision"] == decision for r in rows), (action, rows)


REMOTE_TEXT = "This is a remote DOM element from the server."

SPECS = [
    Spec(
        "ts-raw-html",
        "ts",
        "mcp-ui-ts",
        "showRawHtml",
        text_in("h1", "Hello from Raw HTML"),
        legacy_ready=False,
    ),
    Spec(
        "ts-remote-dom-react", "ts", "mcp-ui-ts", "showRemoteDom", text_in("ui-text", REMOTE_TEXT)
    ),
    Spec(
        "ts-remote-dom-webcomponents",
        "ts",
        "mcp-ui-ts",
        "showRemoteDomWebComponents",
        text_in("ui-text", "Logo Toggle Demo"),
        interact=webcomponents_interaction,
        cards=1,
    ),
    Spec(
        "ts-external-url",
        "ts",
        "mcp-ui-ts",
        "showExternalUrl",
        lambda app: None,
        legacy_ready=False,
        screenshots=False,
        internet="example.com needs the internet: judged on the frame the host builds (the "
        "proxy's inner frame loads https://example.com), the reload and CSP.",
    ),
    Spec(
        "py-raw-html",
        "py",
        "mcp-ui-py",
        "show_raw_html",
        text_in("h1", "Hello from Raw HTML"),
        legacy_ready=False,
    ),
    Spec("py-remote-dom", "py", "mcp-ui-py", "show_remote_dom", text_in("ui-text", REMOTE_TEXT)),
    Spec(
        "py-every-action",
        "py",
        "mcp-ui-py",
        "show_action_html",
        text_in("h2", "UI action demo"),
        interact=every_action,
        cards=2,
    ),
]


def wait_legacy_ready(page: Any, call_id: int) -> None:
    page.wait_for_function(
        "id => (window.AtriumAppViews.list().find(v => v.toolCallId === id) || {}).ready === true",
        arg=call_id,
        timeout=30_000,
    )
    state = page.evaluate(
        "id => window.AtriumAppViews.list().find(v => v.toolCallId === id)", call_id
    )
    assert state["protocol"] == "legacy", state


@pytest.mark.timeout(240)
@pytest.mark.parametrize("spec", SPECS, ids=[s.id for s in SPECS])
def test_mcp_ui_server(spec: Spec, world: World, context: Any, screenshots: Path) -> None:
    page = context.new_page()
    page.set_default_timeout(30_000)
    violations = Violations(page)
    consent = Consent(page)
    try:
        page.goto(world.thread_url(spec.thread))
        page.wait_for_selector("#conn-indicator[data-state=live]")
        box = page.locator("#composer-input")
        box.fill(f"/call {spec.server}.{spec.tool} {{}}")
        box.press("Enter")

        # 1. Mounted (and, for views that say so, ready).
        row = view_row(page, spec.tool)
        expect(outer_frame(row)).to_be_attached(timeout=30_000)
        call_id = int(row.get_attribute("data-tool-call-id"))
        if spec.legacy_ready:
            wait_legacy_ready(page, call_id)
        app = app_frame(row)

        # 2. Rendered, visibly, in both themes.
        spec.rendered(app)
        if spec.internet:
            inner = outer_frame(row).content_frame.locator("iframe")
            expect(inner).to_have_attribute("src", "https://example.com/")
        if spec.screenshots:
            for theme in ("light", "dark"):
                page.evaluate("theme => window.AtriumTheme.set(theme)", theme)
                if spec.legacy_ready and spec.id.startswith(("ts-remote", "py-remote")):
                    # The remote-dom renderer follows the host's theme (render data).
                    expect(app.locator("html")).to_have_attribute("data-theme", theme)
                png = view_screenshot(page, row, screenshots / f"compat-{spec.id}-{theme}.png")
                visible, detail = not_blank(png)
                assert visible, f"{spec.id} looks blank in the {theme} theme: {detail}"
            page.evaluate("() => window.AtriumTheme.set('light')")

        # 3. One interaction through the host, and the consent cards it took.
        if spec.interact is not None:
            spec.interact(app, page, world, consent, row)
        assert len(consent.clicked) == spec.cards, consent.clicked

        # 4. A reload brings it back from the stored result.
        page.reload()
        page.wait_for_selector("#conn-indicator[data-state=live]")
        restored = page.locator(f'.view-row[data-tool-call-id="{call_id}"]')
        expect(outer_frame(restored)).to_be_attached(timeout=30_000)
        if spec.legacy_ready:
            wait_legacy_ready(page, call_id)
        spec.rendered(app_frame(restored))

        # 5. No CSP violation.
        unexpected = violations.unexpected({})
        assert not unexpected, "CSP violations:\n" + "\n".join(unexpected)
    finally:
        page.close()


@pytest.mark.timeout(240)
def test_apps_sdk_legacy_globals_and_open_in_app(
    world: World, context: Any, screenshots: Path
) -> None:
    """A widget of the Apps SDK's first releases: `window.webplus` / `window.oai` are
    `window.openai`, and `setOpenInAppUrl` puts an "Open in <app>" link in the host bar —
    https only (a `javascript:` page is refused and audited), decided like openExternal."""
    page = context.new_page()
    page.set_default_timeout(30_000)
    violations = Violations(page)
    try:
        page.goto(world.thread_url("sdk"))
        page.wait_for_selector("#conn-indicator[data-state=live]")
        box = page.locator("#composer-input")
        box.fill("/call apps-sdk-legacy.show_item {}")
        box.press("Enter")
        row = view_row(page, "show_item")
        expect(outer_frame(row)).to_be_attached(timeout=30_000)
        app = app_frame(row)
        expect(app.locator("#title")).to_have_text("Item Lamp", timeout=30_000)
        expect(app.locator("#aliases")).to_have_text("webplus=true oai=true")

        since = world.last_audit_id()
        app.locator("#open-in-app").click()
        expect(app.locator("#status")).to_have_text("linked https://app.example.com/items/42")
        link = row.locator(".view-open-in-app").first  # the header's (and the stage bar's)
        expect(link).to_be_visible()
        expect(link).to_have_attribute("href", "https://app.example.com/items/42")
        expect(link).to_have_text("Open in apps-sdk-legacy")
        expect(link).to_have_attribute("rel", "noopener noreferrer")
        allowed = world.wait_audit(since, "apps_sdk_open_external")
        assert allowed["decision"] == "allowed", allowed

        since = world.last_audit_id()
        app.locator("#bad-page").click()
        expect(app.locator("#status")).to_contain_text("refused")
        refused = world.wait_audit(since, "apps_sdk_open_external")
        assert (refused["decision"], refused["reason"]) == ("denied", "scheme_not_allowed")
        expect(link).to_have_attribute("href", "https://app.example.com/items/42")
        for theme in ("light", "dark"):
            page.evaluate("theme => window.AtriumTheme.set(theme)", theme)
            # The host bar too: the "Open in <app>" link is host chrome, not the app's.
            row.screenshot(path=str(screenshots / f"compat-apps-sdk-open-in-app-{theme}.png"))
        page.evaluate("() => window.AtriumTheme.set('light')")
        unexpected = violations.unexpected({})
        assert not unexpected, "CSP violations:\n" + "\n".join(unexpected)
    finally:
        page.close()
