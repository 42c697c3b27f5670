"""A hostile view in real Chromium: every escape attempt fails and the refusals are audited.

The view (tests/fixtures/mcp_servers/hostile.py) reports each attempt's outcome in its
own DOM; this test reads them, checks the host page and an undeclared web server for
side effects, and checks the audit log for the denials (DESIGN §8 invariants 1, 3, 5, 7).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import expect

from tests.browser import test_views as views
from tests.browser.test_views import (
    app_frame,
    audit,
    call_tool,
    goto_thread,
    shot,
    view_row,
    wait_ready,
)

# The views module's fixtures: one seeded server for this module too.
world = views.world
open_as = views.open_as

pytestmark = [pytest.mark.browser, pytest.mark.slow]

EXPECTED_BLOCKED = {
    "top_document",
    "parent_document",
    "document_cookie",
    "top_cookie",
    "fetch_app_origin",
    "fetch_undeclared",
    "image_undeclared",
    "websocket_app",
    "popup",
    "top_navigation",
    "tools_call_other_server",
    "tools_call_model_only",
    "legacy_tool_model_only",
    "legacy_link_javascript",
    "open_link_javascript",
    "open_link_data",
}


class Recorder(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802
        Recorder.hits.append(self.path)
        self.send_response(200)
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Content-Type", "image/png")
        self.end_headers()
        self.wfile.write(b"\x89PNG\r\n\x1a\n")

    def log_message(self, *args) -> None:
        return


@pytest.fixture
def undeclared():
    """A live web server on an origin no view declared: it must never see a request."""
    Recorder.hits = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_hostile_view_is_contained_and_audited(open_as, world, screenshots, undeclared):
    page = open_as("olivia")
    goto_thread(page, world, "hostile")
    thread_url = page.url
    call_tool(
        page, "hostile.hostile_view", {"app_origin": world.origin, "undeclared_url": undeclared}
    )
    row = view_row(page, "hostile_view")
    call_id = wait_ready(page, row)
    app = app_frame(row)
    expect(app.locator("#done")).to_be_attached(timeout=25_000)
    outcomes = {
        item["check"]: item
        for item in app.locator("li[data-check]").evaluate_all(
            "els => els.map(e => ({check: e.dataset.check, outcome: e.dataset.outcome, detail: e.dataset.detail}))"
        )
    }
    leaked = {k: v["detail"] for k, v in outcomes.items() if v["outcome"] == "LEAKED"}
    assert not leaked, f"the hostile view got through: {leaked}"
    blocked = {k for k, v in outcomes.items() if v["outcome"] == "blocked"}
    assert EXPECTED_BLOCKED.issubset(blocked), outcomes
    # The spec's frame: the view runs on the hostile server's own sandbox origin (its
    # storage, if the browser gives a third-party frame any, is that origin's).
    own = outcomes["own_storage"]
    assert own["detail"].startswith(world.server.sandbox_origin_of("hostile") + " "), own
    # The control proves the bridge itself works: its own app-visible tool answers.
    assert outcomes["control_own_tool"]["outcome"] == "allowed", outcomes["control_own_tool"]
    assert "pong" in outcomes["control_own_tool"]["detail"]
    # Policy refusals come back as JSON-RPC errors carrying the policy reason.
    assert "[tool_not_visible_to_app]" in outcomes["tools_call_model_only"]["detail"]
    assert "[scheme_not_allowed]" in outcomes["open_link_javascript"]["detail"]

    # Forged sandbox-* messages never reached the host: same document, still live.
    # No wait: the view posted them before its control call, on the same channel, and that
    # call's answer reached this document (it wrote "#done" after it).
    assert outcomes["forged_sandbox_messages"]["outcome"] == "sent"
    assert app.locator("#done").count() == 1
    state = page.evaluate(
        "id => window.AtriumAppViews.list().find(v => v.toolCallId === id)", call_id
    )
    assert state["ready"] and state["phase"] == "live", state
    # Messages from anywhere but the view's own frame are ignored (pitfall 10): a forged
    # request posted on the host window itself is never forwarded.
    # A marker posted after it arrives after it (one window's messages keep their order):
    # once the marker is in, the host's listeners have handled the forged request.
    page.evaluate(
        """() => new Promise(resolve => {
            window.addEventListener("message", function marker(event) {
                if (event.data !== "test-marker") return;
                window.removeEventListener("message", marker);
                resolve();
            });
            window.postMessage({jsonrpc: "2.0", id: "forged", method: "tools/call",
                                params: {name: "model_secret", arguments: {}}}, "*");
            window.postMessage("test-marker", "*");
        })"""
    )

    # Nothing happened outside: no request reached the undeclared origin, the host page was
    # not navigated, no popup opened.
    assert Recorder.hits == [], Recorder.hits
    assert page.url == thread_url
    assert len(page.context.pages) == 1
    row.evaluate("el => el.scrollIntoView({block: 'start'})")
    shot(page, screenshots, "hostile")

    # Every refusal is in the audit log.
    denied = audit(world, decision="denied", actor_kind="app_view")
    by_reason = {(r["action"], r["reason"], r["tool"]) for r in denied}
    assert ("app_tool_call", "tool_not_visible_to_app", "model_secret") in by_reason, by_reason
    # Two attempts from the view (JSON-RPC, and the legacy `tool` action translated by the
    # host): the forged one on the host window itself never went out.
    secret_attempts = [r for r in denied if r["tool"] == "model_secret"]
    assert len(secret_attempts) == 2, secret_attempts
    assert {r["action"] for r in secret_attempts} == {"app_tool_call", "legacy_tool"}
    assert any(a == "app_tool_call" and t == "list_items" for a, _, t in by_reason), by_reason
    links = [r for r in denied if r["action"] in ("ui_open_link", "legacy_link")]
    assert len(links) >= 3 and all(r["reason"] == "scheme_not_allowed" for r in links), links
    # The resource's bare "*" connect domain was dropped (and audited), not honoured.
    dropped = audit(world, action="csp", decision="denied")
    assert any("*" in str(r["extra"]) for r in dropped), dropped
    # The model-only tool never ran.
    ran = world.shell_json(
        "import json\nfrom chat.models import ToolCall\n"
        "print(json.dumps(list(ToolCall.objects.filter(tool_name='model_secret', status='success').values_list('id', flat=True))))"
    )
    assert ran == []
    assert call_id
