"""The sandbox views run in, in real Chromium (issue 12, docs/sandbox.md).

- every in-view automatic check of the MCP Apps host-conformance catalogue, run by our own
  conformance server's view (the ext-apps conformance server is not on npm), plus the
  host-vantage ones we can observe from outside: the frames' sandbox attributes, the
  proxy handshake on the host↔sandbox channel, no request of the proxy's own;
- one server's view cannot read another server's localStorage;
- views look right in both themes (screenshots, opaque frame, the proxy's color-scheme).

Host page on ``localhost:<port>``, each server's proxy on ``<label>.localhost:<port>`` (one
label per server and workspace).
"""

from __future__ import annotations

import json
import re
import secrets
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.helpers_ui import CSP_WATCH_JS, login
from tests.browser.test_views import app_frame, call_tool, goto_thread, view_row, wait_ready
from tests.live import CHROMIUM, CHROMIUM_ARGS, ROOT, LiveAtrium

pytestmark = [pytest.mark.browser, pytest.mark.slow]

THREADS = ["conformance", "nocsp", "storage", "light", "dark", "channel"]
FRAME_SANDBOX = "allow-scripts allow-same-origin allow-forms"

SEED = """
import json
from pathlib import Path
from django.contrib.auth import get_user_model
from chat import services
from bindings.services.bindings import binding_create
from bindings.services.policies import tool_policy_set
from mcp_bridge.services.servers import server_add

ROOT = Path({root!r})
NODE = ROOT / "tools" / "mcp-servers" / "node_modules" / "@modelcontextprotocol"
owner = get_user_model().objects.create_user("olivia", password={password!r}, first_name="Olivia")
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
threads = {{n: services.thread_create(workspace=workspace, title="Sandbox " + n, actor=owner).pk
            for n in {threads!r}}}
conformance = server_add(
    name="Conformance", slug="conformance", transport="stdio", command={python!r},
    args=[str(ROOT / "tests" / "fixtures" / "mcp_servers" / "conformance.py")],
    env={{"CONFORMANCE_CONNECT": {declared!r}}},
)
# A loopback origin reaches a view only when the admin names it exactly (docs/sandbox.md).
binding_create(server=conformance, workspace=workspace,
                                allowed_domains={{"connectDomains": [{declared!r}]}})
basic = server_add(
    name="Basic", slug="basic", transport="stdio", command="node",
    args=[str(NODE / "server-basic-vanillajs" / "dist" / "index.js"), "--stdio"],
)
binding = binding_create(server=basic, workspace=workspace)
tool_policy_set(binding=binding, tool_name="get-time", approval="auto")
print(json.dumps(threads))
"""


class Recorder(BaseHTTPRequestHandler):
    """A local origin the views try to reach; every request it gets is recorded."""

    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        Recorder.hits.append(f"{self.headers.get('Host')}{self.path}")
        self.send_response(200)
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


def _serve() -> tuple[ThreadingHTTPServer, str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


@dataclass
class World:
    server: LiveAtrium
    password: str
    threads: dict[str, int]
    declared: str
    undeclared: str

    def thread_url(self, name: str) -> str:
        return f"{self.server.app_origin}/w/acme/t/{self.threads[name]}/"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    declared_httpd, declared = _serve()
    undeclared_httpd, undeclared = _serve()
    server = LiveAtrium(var_dir=tmp_path_factory.mktemp("sandbox") / "var").setup()
    password = "pw-" + secrets.token_urlsafe(10)
    out = server.shell(
        SEED.format(
            root=str(ROOT),
            password=password,
            threads=THREADS,
            python=str(Path(__import__("sys").executable)),
            declared=declared,
        )
    )
    threads = json.loads(out.strip().splitlines()[-1])
    server.start()
    try:
        yield World(server, password, threads, declared, undeclared + "/")
    finally:
        server.stop()
        declared_httpd.shutdown()
        undeclared_httpd.shutdown()


# Every message the host page receives, with its origin, recorded before any page script.
CHANNEL_WATCH_JS = """
(() => {
  const seen = [];
  Object.defineProperty(window, "__hostMessages", { value: seen });
  window.addEventListener("message", (e) => {
    const d = e.data;
    seen.push({ origin: e.origin, method: d && d.method, id: d && d.id !== undefined ? d.id : null });
  }, true);
})();
"""


@pytest.fixture
def page_for(browser: Any, world: World) -> Iterator[Any]:
    contexts: list[Any] = []

    def open_page(*, color_scheme: str = "light") -> Any:
        context = browser.new_context(
            viewport={"width": 1100, "height": 900}, color_scheme=color_scheme
        )
        context.add_init_script(CSP_WATCH_JS)
        context.add_init_script(CHANNEL_WATCH_JS)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(30_000)
        login(page, world.server.app_origin, "olivia", world.password)
        return page

    yield open_page
    for context in contexts:
        context.close()


def _outcomes(app: Any) -> dict[str, dict[str, str]]:
    expect(app.locator("#done")).to_be_attached(timeout=60_000)
    items = app.locator("li[data-check]").evaluate_all(
        "els => els.map(e => ({check: e.dataset.check, outcome: e.dataset.outcome,"
        " detail: e.dataset.detail}))"
    )
    return {item["check"]: item for item in items}


# The catalogue's in-view automatic checks (examples/conformance-server/README.md).
IN_VIEW_CHECKS = {
    "security/sandbox-distinct-origin",
    "security/sandbox-permissions",
    "security/csp-construct-from-domains",
    "security/csp-allow-declared",
    "security/csp-no-loosening",
    "lifecycle/initialize-capabilities",
    "lifecycle/tool-input",
    "lifecycle/tool-input-partial-stop",
    "lifecycle/tool-result",
    "context/initialize-hostcontext",
    "tools/proxy-call",
    "visibility/app-tool-call-guard",
    "capabilities/server-passthrough",
    "dimensions/listen-size-changed",
    "display/no-undeclared-mode",
    "display/return-resulting-mode",
    "display/unavailable-returns-current",
}


def test_conformance_catalogue_in_view_checks_pass(page_for, world, screenshots):
    page = page_for()
    goto_thread(page, world, "conformance")
    Recorder.hits.clear()
    call_tool(
        page,
        "conformance.run_conformance",
        {"probe": "conformance", "undeclared": world.undeclared},
    )
    row = view_row(page, "run_conformance")
    call_id = wait_ready(page, row)
    # display/return-resulting-mode asks for full screen with no click in the frame: the
    # host asks the person first (docs/view-bridge.md §8); a person allows it.
    row.locator(".host-card[data-card=display-mode] [data-card-action=allow]").click()
    outcomes = _outcomes(app_frame(row))
    missing = IN_VIEW_CHECKS - set(outcomes)
    assert not missing, f"checks that never ran: {missing}"
    failed = {k: v["detail"] for k, v in outcomes.items() if v["outcome"] == "FAIL"}
    assert not failed, f"conformance failures: {failed}"
    assert outcomes["lifecycle/tool-input-partial"]["outcome"] == "INFO"
    # The view's origin is its own server's sandbox, not opaque and not the app's.
    origin = world.server.sandbox_origin_of("conformance")
    assert outcomes["security/sandbox-permissions"]["detail"] == origin
    # The declared (admin-named) origin was reached; the undeclared one never was.
    assert any(hit.endswith("/allow-declared") for hit in Recorder.hits), Recorder.hits
    assert not any("no-loosening" in hit for hit in Recorder.hits), Recorder.hits

    # Host vantage (security/iframe-sandboxed, sandbox-proxy-required): two nested frames,
    # both the spec's sandbox, on the server's origin.
    outer = row.locator(":scope > .view-body iframe.view-frame")
    assert outer.get_attribute("sandbox") == FRAME_SANDBOX
    assert outer.get_attribute("src").startswith(origin + "/sandbox/")
    proxy = next(f for f in page.frames if f.url.startswith(origin + "/sandbox/"))
    inner = proxy.evaluate(
        "() => { const f = document.querySelector('iframe');"
        " return {sandbox: f.getAttribute('sandbox'), srcdoc: f.srcdoc.length,"
        " scheme: getComputedStyle(document.documentElement).colorScheme}; }"
    )
    assert inner["sandbox"] == FRAME_SANDBOX and inner["srcdoc"] > 1000, inner
    row.evaluate("el => el.scrollIntoView({block: 'start'})")
    page.screenshot(path=str(screenshots / "sandbox-conformance.png"))
    assert call_id


def test_no_csp_declared_means_default_deny(page_for, world):
    page = page_for()
    goto_thread(page, world, "nocsp")
    Recorder.hits.clear()
    call_tool(page, "conformance.run_no_csp", {"mode": "nocsp", "undeclared": world.declared + "/"})
    row = view_row(page, "run_no_csp")
    wait_ready(page, row)
    outcomes = _outcomes(app_frame(row))
    check = outcomes["security/csp-default-deny"]
    assert check["outcome"] == "PASS", check
    assert Recorder.hits == []


def test_proxy_handshake_is_the_specs_and_originates_nothing(page_for, world):
    page = page_for()
    sandbox_requests: list[str] = []
    origin = world.server.sandbox_origin_of("basic")
    page.on("request", lambda r: r.url.startswith(origin) and sandbox_requests.append(r.url))
    goto_thread(page, world, "channel")
    call_tool(page, "basic.get-time", {})
    row = view_row(page, "get-time")
    wait_ready(page, row)
    messages = page.evaluate("o => window.__hostMessages.filter(m => m.origin === o)", origin)
    methods = [m["method"] for m in messages]
    # security/sandbox-proxy-ready: first, once; no other sandbox-* message reaches the host
    # (security/sandbox-no-self-requests: the proxy speaks only for the handshake).
    assert methods[0] == "ui/notifications/sandbox-proxy-ready", methods
    assert [m for m in methods if m and m.startswith("ui/notifications/sandbox-")] == [
        "ui/notifications/sandbox-proxy-ready"
    ]
    # The next message is the view's own ui/initialize, relayed (sandbox-message-forwarding).
    assert methods[1] == "ui/initialize", methods
    # The only request to the sandbox host is the proxy page itself.
    assert len(sandbox_requests) == 1 and "/sandbox/" in sandbox_requests[0], sandbox_requests


def _persistent_context_allowing_third_party_storage(tmp: Path) -> Any:
    """A regular profile with Chrome's default outside Incognito: third-party cookies (and
    so third-party storage) allowed. Debian's Chromium blocks them by default, and then a
    cross-site frame has no storage at all (docs/sandbox.md)."""
    (tmp / "Default").mkdir(parents=True)
    (tmp / "Default" / "Preferences").write_text(
        json.dumps({"profile": {"cookie_controls_mode": 0}})
    )
    return tmp


def test_one_servers_view_cannot_read_another_servers_storage(browser, world):
    with tempfile.TemporaryDirectory() as profile:
        context = browser.browser_type.launch_persistent_context(
            str(_persistent_context_allowing_third_party_storage(Path(profile))),
            executable_path=CHROMIUM,
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1100, "height": 900},
        )
        try:
            page = context.new_page()
            page.set_default_timeout(30_000)
            login(page, world.server.app_origin, "olivia", world.password)
            goto_thread(page, world, "storage")
            call_tool(page, "basic.get-time", {})
            basic_row = view_row(page, "get-time")
            wait_ready(page, basic_row)
            call_tool(
                page,
                "conformance.run_conformance",
                {"probe": "conformance", "undeclared": world.undeclared},
            )
            conf_row = view_row(page, "run_conformance")
            wait_ready(page, conf_row)

            def inner_frame(server_key: str) -> Any:
                origin = world.server.sandbox_origin_of(server_key)
                proxy = next(f for f in page.frames if f.url.startswith(origin + "/sandbox/"))
                return proxy.child_frames[0]

            basic, conf = inner_frame("basic"), inner_frame("conformance")
            # Each view has working storage of its own origin...
            assert basic.evaluate("() => window.origin") == world.server.sandbox_origin_of("basic")
            basic.evaluate("() => localStorage.setItem('secret', 'basic-only')")
            assert basic.evaluate("() => localStorage.getItem('secret')") == "basic-only"
            conf.evaluate("() => localStorage.setItem('mine', 'conformance')")
            # ...and sees nothing of another server's.
            assert conf.evaluate("() => localStorage.getItem('secret')") is None
            assert basic.evaluate("() => localStorage.getItem('mine')") is None
            # Nor can it script the other server's proxy (another site), or the host page.
            reach = conf.evaluate(
                """() => Array.from({length: window.top.frames.length}, (_, i) => {
                     const proxy = window.top.frames[i];
                     if (proxy === window.parent) return "own proxy";
                     try { return proxy.document.title; } catch (e) { return e.name; } })"""
            )
            assert sorted(reach) == ["SecurityError", "own proxy"], reach
        finally:
            context.close()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_basic_view_looks_right_in_both_themes(page_for, world, screenshots, theme):
    page = page_for(color_scheme=theme)  # the host follows the system theme by default
    goto_thread(page, world, theme)
    assert page.evaluate("() => document.documentElement.getAttribute('data-theme')") == theme
    call_tool(page, "basic.get-time", {})
    row = view_row(page, "get-time")
    wait_ready(page, row)
    time_el = app_frame(row).locator("#server-time")
    expect(time_el).not_to_have_text(re.compile(r"^(Loading|\s*)$"), timeout=20_000)
    outer = row.locator(":scope > .view-body iframe.view-frame")
    background = outer.evaluate("f => getComputedStyle(f).backgroundColor")
    surface = page.evaluate(
        "() => { const d = document.createElement('div'); d.style.background = 'var(--surface)';"
        " document.body.appendChild(d); const c = getComputedStyle(d).backgroundColor;"
        " d.remove(); return c; }"
    )
    # Opaque, in the host's theme (basic-vanillajs does not ask for prefersBorder: false).
    assert background == surface and background not in ("transparent", "rgba(0, 0, 0, 0)")
    origin = world.server.sandbox_origin_of("basic")
    proxy = next(f for f in page.frames if f.url.startswith(origin + "/sandbox/"))
    scheme = proxy.evaluate("() => getComputedStyle(document.documentElement).colorScheme")
    assert scheme == theme
    row.evaluate("el => el.scrollIntoView({block: 'center'})")
    page.screenshot(path=str(screenshots / f"sandbox-basic-vanillajs-{theme}.png"))
    # A theme switch reaches the proxy document too (through host-context-changed).
    other = "dark" if theme == "light" else "light"
    page.evaluate("t => window.AtriumTheme.set(t)", other)
    proxy.wait_for_function(
        "t => getComputedStyle(document.documentElement).colorScheme === t", arg=other
    )
    page.evaluate("() => window.AtriumTheme.set('system')")
