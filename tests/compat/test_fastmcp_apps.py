"""A FastMCP-apps server (`fastmcp[apps]` 4.1.6 + Prefab UI 0.21.1) in Atrium.

tools/mcp-servers/fastmcp-apps/server.py is written the way fastmcp's own `examples/apps/`
are: a `FastMCPApp` whose `@app.ui()` entry tool returns a Prefab view (bar chart, sortable
table, form) and an `@app.tool()` backend tool the form calls through the host (app-only:
`_meta.ui.visibility == ["app"]`). fastmcp synthesizes the renderer resource and its CSP;
the renderer is prefab-ui's bundled single-file HTML (`PREFAB_BUNDLED_RENDERER=1`, ~7 MB,
no CDN), so the suite runs offline. The server runs in its own venv
(tools/compat-venvs/fastmcp-apps.txt, installed by tools/install-compat-venvs.sh).

Set up as an operator would (`mcp import mcp.json --bind acme`, `mcp bind --auto` for the
entry tool a person starts); the backend tool is left to ask. The same checks as the rest of
the suite (test_official_servers.py, test_mcp_ui_servers.py): mounts and handshakes; renders,
not flat, in both themes; one interaction through the host (the form's submit calls the
app-only tool: one consent card, "Allow Harbour in this thread", then the next submit runs
without asking); a reload brings the view back; no CSP violation.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
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

VENV_PYTHON = ROOT / ".tools" / "venvs" / "fastmcp-apps" / "bin" / "python"
SERVER = ROOT / "tools" / "mcp-servers" / "fastmcp-apps" / "server.py"
SLUG = "fastmcp-apps"
ENTRY = "harbour_dashboard"
BACKEND = "record_shipment"


@dataclass
class World:
    server: LiveAtrium
    password: str
    thread: int
    database: Path

    @property
    def thread_url(self) -> str:
        return f"{self.server.app_origin}/w/acme/t/{self.thread}/"

    def audit_rows(self, since: int = 0) -> list[dict[str, Any]]:
        with sqlite3.connect(f"file:{self.database}?mode=ro", uri=True) as db:
            db.row_factory = sqlite3.Row
            rows = db.execute(
                "SELECT id, action, decision, reason, tool_name, actor_kind, extra "
                "FROM bindings_auditevent WHERE id > ? ORDER BY id",
                (since,),
            ).fetchall()
        return [dict(row) for row in rows]

    def last_audit_id(self) -> int:
        rows = self.audit_rows()
        return rows[-1]["id"] if rows else 0

    def view_calls(self, since: int, tool: str) -> list[dict[str, Any]]:
        return [
            r
            for r in self.audit_rows(since)
            if r["actor_kind"] == "app_view" and r["action"] == "app_tool_call"
            if r["tool_name"] == tool
        ]


SEED = """
import json
from django.contrib.auth import get_user_model
from chat import services
owner = get_user_model().objects.create_user("olivia", password={password!r})
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
thread = services.thread_create(workspace=workspace, title="Harbour", actor=owner)
print(json.dumps(thread.pk))
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    if not VENV_PYTHON.exists():
        pytest.skip("run tools/install-compat-venvs.sh (make test does)")
    var_dir = tmp_path_factory.mktemp("fastmcp-apps") / "var"
    server = LiveAtrium(var_dir=var_dir).setup()
    password = "pw-" + secrets.token_urlsafe(10)
    thread = json.loads(server.shell(SEED.format(password=password)).strip().splitlines()[-1])
    # The desktop mcpServers entry an operator would import. The server sets
    # PREFAB_BUNDLED_RENDERER itself; stated here too, as an operator would.
    config = {
        "mcpServers": {
            SLUG: {
                "command": str(VENV_PYTHON),
                "args": [str(SERVER)],
                "env": {"PREFAB_BUNDLED_RENDERER": "1", "FASTMCP_CHECK_FOR_UPDATES": "off"},
            }
        }
    }
    (var_dir / "mcp.json").write_text(json.dumps(config))
    imported = server.manage("mcp", "import", str(var_dir / "mcp.json"), "--bind", "acme")
    assert imported.count("Added '") == 1, imported
    # The entry tool a person starts runs without asking; the backend tool asks.
    bound = server.manage("mcp", "bind", SLUG, "--workspace", "acme", "--auto", ENTRY)
    assert "runs without asking" in bound, bound
    server.start()
    try:
        yield World(server, password, thread, var_dir / "atrium.sqlite3")
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


def table_cell(app: Any, region: str, column: int) -> Any:
    """The table's cell of ``region`` in ``column`` (0: region, 1: sea, 2: rail)."""
    row = app.locator("table tbody tr", has=app.locator("td", has_text=region))
    return row.locator("td").nth(column)


def wait_rendered(app: Any) -> None:
    expect(app.get_by_text("Harbour shipments")).to_be_visible(timeout=60_000)
    # The chart (recharts draws an SVG bar per region and series) and the table.
    expect(app.locator("svg .recharts-bar-rectangle").first).to_be_visible(timeout=30_000)
    expect(table_cell(app, "North", 0)).to_have_text("North")


def text_lightness(cell: Any) -> float:
    """The mean of the RGB channels of a cell's text colour (0 black … 255 white)."""
    # Any CSS colour (Prefab's are lab()/oklch()) painted on a pixel reads back as sRGB.
    channels = cell.evaluate(
        """el => { const c = document.createElement("canvas"); c.width = c.height = 1;
          const g = c.getContext("2d"); g.fillStyle = getComputedStyle(el).color;
          g.fillRect(0, 0, 1, 1); return Array.from(g.getImageData(0, 0, 1, 1).data.slice(0, 3)); }"""
    )
    return sum(channels) / 3


def wait_theme(cell: Any, theme: str) -> None:
    """Prefab follows the host's theme (hostContext.theme); its colours change with a
    transition, so wait until the table's text has the theme's colour."""
    wanted = (lambda v: v > 150) if theme == "dark" else (lambda v: v < 100)
    try:
        poll(lambda: wanted(text_lightness(cell)), timeout=10, interval=0.1, reason=theme)
    except WaitTimeout as exc:
        raise AssertionError(f"{exc}: text lightness {text_lightness(cell)}") from exc


def submit_units(app: Any, units: str, *, key: bool = False) -> None:
    box = app.locator('input[name="units"]')
    box.fill(units)
    if key:  # the app's toast may cover the button: Enter submits the form as well
        box.press("Enter")
    else:
        app.get_by_role("button", name="Record").click()


@pytest.mark.timeout(180)
def test_fastmcp_app_renders_submits_through_the_host_and_reloads(
    world: World, context: Any, screenshots: Path
) -> None:
    page = context.new_page()
    page.set_default_timeout(30_000)
    violations = Violations(page)
    cards: list[str] = []
    try:
        page.goto(world.thread_url)
        page.wait_for_selector("#conn-indicator[data-state=live]")
        box = page.locator("#composer-input")
        box.fill(f"/call {SLUG}.{ENTRY} {{}}")
        box.press("Enter")

        # 1. Mounted, handshake complete (the 7 MB bundled renderer is the view's document).
        row = view_row(page, ENTRY)
        call_id = wait_mounted(page, row)
        wait_handshake(page, call_id)
        app = app_frame(row)

        # 2. Rendered, visibly, in both themes: Prefab follows the host's theme.
        wait_rendered(app)
        sea = table_cell(app, "North", 1)
        before = int(sea.inner_text())
        for theme in ("light", "dark"):
            page.evaluate("theme => window.AtriumTheme.set(theme)", theme)
            wait_theme(sea, theme)
            png = view_screenshot(page, row, screenshots / f"compat-fastmcp-apps-{theme}.png")
            visible, detail = not_blank(png)
            assert visible, f"the FastMCP app looks blank in the {theme} theme: {detail}"
        page.evaluate("() => window.AtriumTheme.set('light')")

        # 3. The form's submit calls the app-only tool through the host: one consent card,
        # for the app in this thread; the number box's "7" reaches the integer parameter.
        since = world.last_audit_id()
        submit_units(app, "7")
        allow = page.locator('button[data-action="allow_app"]:visible').last
        expect(allow).to_be_enabled(timeout=20_000)
        expect(allow).to_have_text("Allow fastmcp-apps in this thread")
        allow.click()
        cards.append("allow_app")
        expect(sea).to_have_text(str(before + 7), timeout=20_000)
        expect(app.get_by_text("Shipment recorded").first).to_be_visible()
        # The next submit runs without asking (the app is allowed in this thread).
        submit_units(app, "3", key=True)
        expect(sea).to_have_text(str(before + 10), timeout=20_000)
        expect(page.locator('button[data-action="allow_app"]:visible')).to_have_count(0)
        # Audited: asked once, approved with the app's allowance, then run on it.
        try:
            calls = poll(
                lambda: (
                    (r := world.view_calls(since, BACKEND))
                    and any(c["reason"] == "allowance" for c in r)
                    and r
                ),
                timeout=20,
                interval=0.2,
                reason="the view's second call run on the allowance",
            )
        except WaitTimeout as exc:
            raise AssertionError(f"{exc}: {world.view_calls(since, BACKEND)}") from exc
        decided = [(c["decision"], c["reason"]) for c in calls]
        assert decided[0] == ("pending", "approval_required"), decided
        assert ("approved", "allowance") in decided[1:], decided
        assert cards == ["allow_app"], cards

        # 4. A reload brings the view back from the stored result.
        page.reload()
        page.wait_for_selector("#conn-indicator[data-state=live]")
        restored = page.locator(f'.view-row[data-tool-call-id="{call_id}"]')
        wait_mounted(page, restored)
        wait_handshake(page, call_id)
        wait_rendered(app_frame(restored))

        # 5. No CSP violation.
        unexpected = violations.unexpected({})
        assert not unexpected, "CSP violations:\n" + "\n".join(unexpected)
    finally:
        page.close()
