"""Consent in real Chromium with the published MCP Apps servers (issue 11, docs/consent.md).

The servers annotate nothing, so every tool rates destructive, and no standing policy is
set here: a person's own call runs (it is the consent), a view's call asks until someone
approves it once or allows the tool in the thread, and revoking makes the next call ask.
Calls are counted from the thread's own live events (``AtriumClient.on("toolcall")``),
never by waiting a fixed time.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.helpers_ui import CSP_WATCH_JS, PageWatch, login
from tests.browser.test_views import (
    HostPageWatch,
    World,
    app_frame,
    audit,
    call_tool,
    goto_thread,
    view_row,
    wait_ready,
)
from tests.live import ROOT, LiveAtrium

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SEED = """
import json
from pathlib import Path
from django.contrib.auth import get_user_model
from chat import services
from bindings.services.bindings import binding_create
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
    name: services.thread_create(workspace=workspace, title="Consent " + name, actor=owner).pk
    for name in ("basic", "sysmon")
}}
servers = {{}}
for name, slug, package in [
    ("Basic", "basic", "server-basic-vanillajs"),
    ("System monitor", "sysmon", "server-system-monitor"),
]:
    server = server_add(
        name=name, slug=slug, transport="stdio", command="node",
        args=[str(NODE / package / "dist" / "index.js"), "--stdio"],
    )
    # No standing policy: consent comes from people only.
    binding_create(server=server, workspace=workspace)
    servers[slug] = server.pk
print(json.dumps({{"threads": threads, "servers": servers}}))
"""

# Records the thread's live tool call events of app views, per tool: which calls ever
# waited for an approval, and which succeeded.
RECORDER_JS = """
() => {
  const seen = { awaiting: {}, done: {} };
  window.__consent = seen;
  window.AtriumClient.on("toolcall", (call) => {
    if (call.origin !== "app_view") return;
    const bucket = call.status === "awaiting_approval" ? seen.awaiting
      : call.status === "success" ? seen.done : null;
    if (!bucket) return;
    (bucket[call.tool] = bucket[call.tool] || {})[call.id] = true;
  });
}
"""
COUNT_JS = """
([kind, tool]) => Object.keys((window.__consent[kind] || {})[tool] || {}).length
"""
WAIT = 90_000  # ms: a generous bound for a busy 2-core machine; every wait is on a condition


@pytest.fixture(scope="module")
def consent_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    node_modules = ROOT / "tools" / "mcp-servers" / "node_modules"
    if not node_modules.is_dir():
        pytest.skip("run tools/install-mcp-servers.sh")
    var_dir = tmp_path_factory.mktemp("consent") / "var"
    server = LiveAtrium(var_dir=var_dir).setup()
    password = "pw-" + secrets.token_urlsafe(10)
    out = server.shell(SEED.format(password=password, root=str(ROOT)))
    seeded = json.loads(out.strip().splitlines()[-1])
    server.start()
    try:
        yield World(server, password, seeded["threads"], seeded["servers"])
    finally:
        server.stop()


@pytest.fixture
def open_as(browser: Any, consent_world: World) -> Iterator[Any]:
    contexts: list[Any] = []
    watches: list[PageWatch] = []

    def open_page(username: str, *, color_scheme: str = "light") -> Any:
        context = browser.new_context(
            viewport={"width": 1280, "height": 900}, color_scheme=color_scheme
        )
        context.add_init_script(CSP_WATCH_JS)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(30_000)
        watches.append(HostPageWatch(page, consent_world.origin))
        login(page, consent_world.origin, username, consent_world.password)
        return page

    yield open_page
    problems = [p for watch in watches for p in watch.problems()]
    for context in contexts:
        context.close()
    assert not problems, "CSP violations or script errors on the host page:\n" + "\n".join(problems)


def record_calls(page: Any) -> None:
    page.evaluate(RECORDER_JS)


def count(page: Any, kind: str, tool: str) -> int:
    return page.evaluate(COUNT_JS, [kind, tool])


def wait_count(page: Any, kind: str, tool: str, at_least: int) -> None:
    page.wait_for_function(
        "([kind, tool, n]) => Object.keys((window.__consent[kind] || {})[tool] || {}).length >= n",
        arg=[kind, tool, at_least],
        timeout=WAIT,
    )


def pending_cards(page: Any) -> Any:
    return page.locator(".approval.approval-pending")


def themed_shot(page: Any, target: Any, directory: Any, name: str) -> None:
    """Screenshots of `target` in the light and the dark theme."""
    for theme in ("light", "dark"):
        page.locator("html").evaluate("(el, t) => el.setAttribute('data-theme', t)", theme)
        target.screenshot(path=str(directory / f"consent-{name}-{theme}.png"))
    page.locator("html").evaluate("el => el.setAttribute('data-theme', 'light')")


# ---- basic-vanillajs: own call runs; the view asks once, then is allowed in the thread ----------


def test_basic_own_call_runs_and_the_view_asks_once(open_as, consent_world, screenshots):
    page = open_as("olivia")
    goto_thread(page, consent_world, "basic")
    record_calls(page)
    member = open_as("marco")
    goto_thread(member, consent_world, "basic")
    viewer = open_as("vera")
    goto_thread(viewer, consent_world, "basic")

    # A person's own call of an unannotated ("destructive") tool runs: no card.
    call_tool(page, "basic.get-time")
    row = view_row(page, "get-time")
    wait_ready(page, row)
    app = app_frame(row)
    expect(app.locator("#server-time")).not_to_have_text(re.compile(r"^(Loading|\s*)$"))
    expect(page.locator(".approval")).to_have_count(0)
    user_rows = audit(consent_world, tool_name="get-time", action="user_tool_call")
    assert [(r["decision"], r["reason"]) for r in user_rows] == [("approved", "user_initiated")]

    # The view's own call asks, once. Olivia clicks in her own window, in front (as in
    # tests/browser/test_views.py's widget-state test).
    page.bring_to_front()
    app.locator("#get-time-btn").click()
    card = pending_cards(page)
    expect(card).to_have_count(1, timeout=WAIT)
    expect(card.locator("[data-action=approve]")).to_have_text("Approve once")
    expect(card.locator("[data-action=allow_thread]")).to_contain_text("get-time")
    expect(card.locator("[data-action=allow_workspace]")).to_contain_text("Basic")
    # A member may allow in the thread, not for the workspace; a viewer only reads.
    expect(pending_cards(member).locator("[data-action=allow_thread]")).to_be_visible()
    expect(pending_cards(member).locator("[data-action=allow_workspace]")).to_have_count(0)
    expect(pending_cards(viewer)).to_contain_text("Only owners and members can approve")
    expect(pending_cards(viewer).locator("button")).to_have_count(0)
    card.scroll_into_view_if_needed()
    themed_shot(page, card, screenshots, "approval-card")

    card.locator("[data-action=allow_thread]").click()
    wait_count(page, "done", "get-time", 1)
    expect(pending_cards(page)).to_have_count(0)
    # Every member sees what is allowed here, live.
    for who in (page, member):
        panel = who.locator("#allowances")
        expect(panel).to_be_visible()
        expect(panel).to_contain_text("get-time")
    expect(member.locator("#allowances .allowance-revoke")).to_have_count(1)
    expect(viewer.locator("#allowances .allowance-revoke")).to_have_count(0)

    # Five more clicks run with no card.
    for n in range(2, 7):
        app.locator("#get-time-btn").click()
        wait_count(page, "done", "get-time", n)
    assert count(page, "awaiting", "get-time") == 1
    expect(pending_cards(page)).to_have_count(0)
    decisions = [
        (r["decision"], r["reason"])
        for r in audit(consent_world, tool_name="get-time", action="app_tool_call")
    ]
    assert (
        decisions
        == [("pending", "approval_required"), ("approved", "approved")]
        + [("approved", "allowance")] * 5
    ), decisions
    created = audit(consent_world, tool_name="get-time", event_type=520)
    assert [(r["decision"], r["reason"]) for r in created] == [("allowed", "allowed_in_thread")]

    panel = page.locator("#allowances")
    panel.locator("summary").click()
    expect(panel.locator(".allowance")).to_contain_text("Allowed by Olivia Park")
    themed_shot(page, panel, screenshots, "allowed-panel")
    themed_shot(page, page.locator("#thread-app"), screenshots, "thread")


# ---- system-monitor: one Allow in this thread, then it polls; reload; revoke ----------------


def _start_polling(app: Any) -> None:
    expect(app.locator("#info-hostname")).not_to_have_text("--", timeout=WAIT)
    toggle = app.locator("#poll-toggle-btn")
    if "start" in toggle.inner_text().lower():
        toggle.click()


def test_system_monitor_polls_after_one_allow_until_revoked(open_as, consent_world):
    tool = "poll-system-stats"
    page = open_as("olivia")
    goto_thread(page, consent_world, "sysmon")
    record_calls(page)
    call_tool(page, "sysmon.get-system-info")
    row = view_row(page, "get-system-info")
    wait_ready(page, row)
    _start_polling(app_frame(row))

    # The first poll asks (later polls pile up behind it while nobody answers).
    card = pending_cards(page).first
    expect(card).to_be_visible(timeout=WAIT)
    card.locator("[data-action=allow_thread]").click()
    # Every poll that was waiting is settled by the allowance: no card is left.
    expect(pending_cards(page)).to_have_count(0, timeout=WAIT)
    wait_count(page, "done", tool, 1)  # the approved poll's answer
    asked = count(page, "awaiting", tool)
    done = count(page, "done", tool)
    wait_count(page, "done", tool, done + 3)  # more polls (one every 2 s)…
    assert count(page, "awaiting", tool) == asked  # …and not one asked
    expect(pending_cards(page)).to_have_count(0)

    # A reload does not ask again.
    page.reload()
    page.wait_for_selector("#conn-indicator[data-state=live]")
    record_calls(page)
    row = view_row(page, "get-system-info")
    wait_ready(page, row)
    _start_polling(app_frame(row))
    wait_count(page, "done", tool, 2)
    assert count(page, "awaiting", tool) == 0
    expect(pending_cards(page)).to_have_count(0)

    # Revoke: the very next poll asks.
    panel = page.locator("#allowances")
    panel.locator("summary").click()
    panel.get_by_role("button", name=f"Revoke {tool}").click()
    expect(panel).to_be_hidden(timeout=WAIT)
    wait_count(page, "awaiting", tool, 1)
    expect(pending_cards(page).first).to_be_visible(timeout=WAIT)
    revoked = audit(consent_world, tool_name=tool, event_type=521)
    assert [(r["decision"], r["reason"]) for r in revoked] == [("allowed", "revoked")]
    polls = audit(consent_world, tool_name=tool, action="app_tool_call")
    reasons = [r["reason"] for r in polls]
    assert reasons.count("allowance") >= 5, reasons
    # After the revocation, no poll ran on the allowance.
    after = reasons[len(reasons) - 1 - reasons[::-1].index("allowance") + 1 :]
    assert after and set(after) == {"approval_required"}, reasons
    app_frame(view_row(page, "get-system-info")).locator("#poll-toggle-btn").click()
