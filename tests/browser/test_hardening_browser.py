"""Issue 13 where a person sees it, in real Chromium against a real web server:

- finding 4: a view's 5 MB request is answered with a JSON-RPC error by the host bridge and
  the page stays connected (every other view and the chat with it);
- finding 8: ``requestModal`` opens only once the server allowed it, with the app's name
  in the host chrome and its own title as quoted text (screenshots, light and dark);
- finding 10: a tool's ``text/html`` binary becomes an ``application/octet-stream`` blob.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.helpers_ui import CSP_WATCH_JS, PageWatch, login
from tests.browser.test_views import app_frame, view_row, wait_ready
from tests.live import ROOT, LiveAtrium

pytestmark = [pytest.mark.browser, pytest.mark.slow]

EVIL_HTML = b"<!doctype html><script>document.title='ran on the app origin'</script>"

SEED = """
import json, sys
from django.contrib.auth import get_user_model
from chat import services
from bindings.services.bindings import binding_create
from mcp_bridge.services.servers import server_add

owner = get_user_model().objects.create_user("olivia", password={password!r}, first_name="Olivia")
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
thread = services.thread_create(workspace=workspace, title="Hardening", actor=owner)
server = server_add(
    name="Hardening", slug="hardening", transport="stdio", command=sys.executable,
    args=[{script!r}],
)
binding_create(server=server, workspace=workspace)
print(json.dumps({{"thread": thread.pk}}))
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    server = LiveAtrium(var_dir=tmp_path_factory.mktemp("hardening") / "var").setup()
    password = "pw-" + secrets.token_urlsafe(10)
    script = str(ROOT / "tests" / "fixtures" / "mcp_servers" / "hardening.py")
    out = server.shell(SEED.format(password=password, script=script))
    thread = json.loads(out.strip().splitlines()[-1])["thread"]
    server.start()
    try:
        yield {"server": server, "password": password, "thread": thread}
    finally:
        server.stop()


@pytest.fixture
def page_for(browser, world) -> Iterator[Any]:
    contexts, watches = [], []

    def open_page(color_scheme: str = "light") -> Any:
        context = browser.new_context(
            viewport={"width": 1200, "height": 820}, color_scheme=color_scheme
        )
        context.add_init_script(CSP_WATCH_JS)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(30_000)
        watches.append(PageWatch(page))
        origin = world["server"].app_origin
        login(page, origin, "olivia", world["password"])
        page.goto(f"{origin}/w/acme/t/{world['thread']}/")
        page.wait_for_selector("#conn-indicator[data-state=live]")
        return page

    yield open_page
    for context in contexts:
        context.close()


def _call(page: Any, target: str) -> None:
    box = page.locator("#composer-input")
    box.fill(f"/call {target} {{}}")
    box.press("Enter")


def _open_view(page: Any) -> tuple[Any, Any]:
    # The thread keeps the views earlier tests opened: wait for this call's own row, not
    # the last one already on the page.
    rows = page.locator("#main .view-row:not(.view-child-call)")
    before = rows.count()
    _call(page, "hardening.hardening_view")
    expect(rows).to_have_count(before + 1, timeout=45_000)
    call_id = wait_ready(page, view_row(page, "hardening_view"), timeout=45_000)
    # Pinned to this call's row in the timeline: a modal opened later is another view of
    # the same call, appended to the page, and must not be mistaken for it.
    row = page.locator(f'#main .view-row[data-tool-call-id="{call_id}"]')
    return row, app_frame(row)


def test_a_5_mb_request_gets_an_error_and_the_page_stays_connected(page_for, world):
    page = page_for()
    _, app = _open_view(page)
    app.locator("#big").click()
    out = app.locator("#out-big[data-done='1']")
    expect(out).to_have_attribute("data-code", "-32602", timeout=30_000)
    expect(out).to_contain_text("the limit is 1.0 MB")
    # The same socket still serves the chat and the view.
    expect(page.locator("#conn-indicator")).to_have_attribute("data-state", "live")
    app.locator("#ping").click()
    expect(app.locator("#out-ping[data-done='1']")).to_have_attribute("data-ok", "1")


def _modals_allowed(world: dict[str, Any]) -> int:
    out = world["server"].shell(
        "from audit.models import AuditEvent\n"
        "print(AuditEvent.objects.filter(event_type=430, decision='allowed').count())"
    )
    return int(out.strip().splitlines()[-1])


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_request_modal_names_the_app_in_host_chrome(page_for, world, screenshots, scheme):
    page = page_for(scheme)
    _, app = _open_view(page)
    before = _modals_allowed(world)
    app.locator("#modal").click()
    dialog = page.locator("dialog.view-modal[open]")
    expect(dialog).to_be_visible(timeout=30_000)
    expect(dialog.locator(".view-modal-app")).to_have_text("Hardening")
    expect(dialog.locator(".view-modal-app-title")).to_have_text("Session expired — sign in again")
    # The dialog opens only on the server's answer; that answer is audited as allowed, and
    # the view that asked gets it.
    assert _modals_allowed(world) == before + 1
    expect(app.locator("#out-modal[data-done='1']")).to_have_attribute("data-ok", "1")
    page.wait_for_function(
        "() => window.AtriumAppViews.list().some(v => v.modal && v.ready)", timeout=30_000
    )
    page.screenshot(path=str(screenshots / f"hardening-modal-{scheme}.png"))


def test_an_app_supplied_html_file_is_an_opaque_blob(page_for, world):
    # A file part whose bytes travel inline (a data: URI): rendered by the page's own
    # renderer, as a stored result's part is.
    page = page_for()
    body = base64.b64encode(EVIL_HTML).decode()
    # The host page's CSP lets no script fetch a blob: URL back: observe the Blob the
    # renderer creates instead (the real createObjectURL still runs).
    types = page.evaluate(
        """async (body) => {
            const { renderMedia } = await import("/static/chat/render/parts.js");
            const out = {};
            const create = URL.createObjectURL;
            let last = null;
            URL.createObjectURL = (blob) => { last = blob.type; return create.call(URL, blob); };
            try {
              for (const mime of ["text/html", "image/svg+xml"]) {
                last = null;
                const node = renderMedia({type: "file", mediaKind: "binary",
                  mimeType: mime, filename: "r.html", src: "data:" + mime + ";base64," + body});
                const link = node.matches("a[href^='blob:']") ? node : node.querySelector("a");
                out[mime] = link && link.href.startsWith("blob:") ? last : "no blob link";
              }
            } finally {
              URL.createObjectURL = create;
            }
            return out;
        }""",
        body,
    )
    assert types == {
        "text/html": "application/octet-stream",
        "image/svg+xml": "application/octet-stream",
    }
    assert page.title() != "ran on the app origin"
