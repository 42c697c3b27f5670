"""A server's questions in real Chromium (issue 25 part 1, docs/mcp-client.md).

The `asks` example (``examples/asks``) asks through the 2026 protocol (its questions travel
in the call's result) and `@modelcontextprotocol/server-everything` through the 2025 one (a
request on the connection): both reach the same card. The person the call runs for answers;
another member sees whom it waits for; a reload keeps the pending card; a web page opens in
a new tab only by the person's click.
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
from tests.browser.test_views import HostPageWatch, World, audit, call_tool, goto_thread
from tests.live import ROOT, LiveAtrium

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WAIT = 60_000  # ms: a bound for a busy machine; every wait is on a condition

SEED = """
import json, sys
from pathlib import Path
from django.contrib.auth import get_user_model
from chat import services
from bindings.services.bindings import binding_create
from mcp_bridge.services.servers import server_add

PASSWORD = {password!r}
ROOT = Path({root!r})
NODE = ROOT / "tools" / "mcp-servers" / "node_modules" / "@modelcontextprotocol"
U = get_user_model()

def person(username, first, last):
    return U.objects.create_user(username, password=PASSWORD, first_name=first, last_name=last)

owner = person("olivia", "Olivia", "Park")
member = person("marco", "Marco", "Rossi")
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
services.membership_set(workspace=workspace, user=member, role="member")
threads = {{
    name: services.thread_create(workspace=workspace, title="Asks " + name, actor=owner).pk
    for name in ("form", "reload", "url", "everything")
}}
servers = {{}}
for name, slug, command, args in [
    ("Asks", "asks", sys.executable, [str(ROOT / "examples" / "asks" / "server.py")]),
    ("Everything", "everything", "node",
     [str(NODE / "server-everything" / "dist" / "index.js"), "stdio"]),
]:
    server = server_add(name=name, slug=slug, transport="stdio", command=command, args=args)
    binding_create(server=server, workspace=workspace)
    servers[slug] = server.pk
print(json.dumps({{"threads": threads, "servers": servers}}))
"""

PAGE = "<!doctype html><title>Asks</title><h1>Connect your Asks account</h1>"


@pytest.fixture(scope="module")
def asks_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    if not (ROOT / "tools" / "mcp-servers" / "node_modules").is_dir():
        pytest.skip("run tools/install-mcp-servers.sh")
    var_dir = tmp_path_factory.mktemp("asks") / "var"
    server = LiveAtrium(var_dir=var_dir).setup()
    password = "pw-" + secrets.token_urlsafe(10)
    seeded = json.loads(
        server.shell(SEED.format(password=password, root=str(ROOT))).strip().splitlines()[-1]
    )
    server.start()
    try:
        yield World(server, password, seeded["threads"], seeded["servers"])
    finally:
        server.stop()


@pytest.fixture
def open_as(browser: Any, asks_world: World) -> Iterator[Any]:
    contexts: list[Any] = []
    watches: list[PageWatch] = []

    def open_page(username: str) -> Any:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.add_init_script(CSP_WATCH_JS)
        # The pages servers send people to: served here, nothing leaves the machine.
        context.route(
            re.compile(r"^https://example\.com/"),
            lambda route: route.fulfill(status=200, content_type="text/html", body=PAGE),
        )
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(30_000)
        watches.append(HostPageWatch(page, asks_world.origin))
        login(page, asks_world.origin, username, asks_world.password)
        return page

    yield open_page
    problems = [p for watch in watches for p in watch.problems()]
    for context in contexts:
        context.close()
    assert not problems, "CSP violations or script errors on the host page:\n" + "\n".join(problems)


def pending_card(page: Any, kind: str = "elicitation_form") -> Any:
    return page.locator(f".srq[data-kind={kind}][data-status=pending]").last


def shots(page: Any, target: Any, directory: Any, name: str) -> None:
    for theme in ("light", "dark"):
        page.locator("html").evaluate("(el, t) => el.setAttribute('data-theme', t)", theme)
        target.screenshot(path=str(directory / f"elicitation-{name}-{theme}.png"))
    page.locator("html").evaluate("el => el.setAttribute('data-theme', 'light')")


def test_a_form_is_answered_by_its_person_while_another_member_waits(
    open_as, asks_world, screenshots
):
    olivia = open_as("olivia")
    marco = open_as("marco")
    goto_thread(olivia, asks_world, "form")
    goto_thread(marco, asks_world, "form")
    call_tool(olivia, "asks.ask_name")

    card = pending_card(olivia)
    expect(card).to_be_visible(timeout=WAIT)
    expect(card.locator(".approval-head")).to_have_text("Asks asks you")
    # Defaults pre-filled (SEP-1034), titles shown for the enum.
    expect(card.locator("input[name=age]")).to_have_value("30")
    expect(card.locator("select[name=role] option:checked")).to_have_text("Developer")
    others = pending_card(marco)
    expect(others.locator(".srq-waiting")).to_have_text(
        "Waiting for Olivia Park to answer Asks’s question", timeout=WAIT
    )
    expect(others.locator("form")).to_have_count(0)
    others.scroll_into_view_if_needed()
    shots(marco, others, screenshots, "waiting")

    card.locator("input[name=name]").fill("Ana")
    card.locator("input[name=email]").fill("not-an-email")
    card.locator("select[name=role]").select_option("pm")
    card.locator("input[name=newsletter]").check()
    card.scroll_into_view_if_needed()
    shots(olivia, card, screenshots, "form")
    card.get_by_role("button", name="Accept").click()
    # Checked on the server: the field says what is wrong, the call still waits.
    expect(card.locator(".field-error")).to_have_text("Email is not an email address")
    card.locator("input[name=email]").fill("ana@example.com")
    card.get_by_role("button", name="Accept").click()

    done = olivia.locator(".toolcall.status-success").last
    expect(done).to_contain_text(
        "Hello Ana <ana@example.com>, 30, product manager, with the newsletter.", timeout=WAIT
    )
    answered = olivia.locator(".srq[data-status=accepted]").last
    expect(answered).to_contain_text("Answered by Olivia Park")
    expect(marco.locator(".srq[data-status=accepted]").last).to_contain_text(
        "fields: age, email, name, newsletter, role", timeout=WAIT
    )
    rows = audit(asks_world, event_type=901)
    assert rows and rows[-1]["extra"]["fields"] == ["age", "email", "name", "newsletter", "role"]
    assert "ana@example.com" not in json.dumps(rows)


def test_a_reload_keeps_the_pending_card_and_decline_tells_the_server(open_as, asks_world):
    olivia = open_as("olivia")
    goto_thread(olivia, asks_world, "reload")
    call_tool(olivia, "asks.ask_name")
    expect(pending_card(olivia)).to_be_visible(timeout=WAIT)
    olivia.reload()
    olivia.wait_for_selector("#conn-indicator[data-state=live]")
    card = pending_card(olivia)
    expect(card.locator("input[name=name]")).to_be_visible()
    card.get_by_role("button", name="Decline").click()
    expect(olivia.locator(".toolcall.status-success").last).to_contain_text(
        "No answer: the person chose decline.", timeout=WAIT
    )
    expect(olivia.locator(".srq[data-status=declined]")).to_contain_text("Declined by Olivia Park")


def test_a_web_page_opens_in_a_new_tab_only_by_a_click_then_finishes(
    open_as, asks_world, screenshots
):
    olivia = open_as("olivia")
    goto_thread(olivia, asks_world, "url")
    call_tool(olivia, "asks.ask_url")
    card = pending_card(olivia, "elicitation_url")
    expect(card).to_be_visible(timeout=WAIT)
    expect(card.locator(".srq-domain strong")).to_have_text("example.com")
    expect(card.locator(".srq-url")).to_have_text(
        re.compile(r"^https://example\.com/asks/connect\?session=asks-connect-\d+$")
    )
    link = card.locator("a.srq-open")
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    # Never in a frame, never opened by itself.
    assert olivia.locator("iframe[src*='example.com']").count() == 0
    assert len(olivia.context.pages) == 1
    card.scroll_into_view_if_needed()
    shots(olivia, card, screenshots, "url")
    with olivia.context.expect_page() as tab:
        link.click()
    page = tab.value
    page.wait_for_load_state()
    assert page.url.startswith("https://example.com/asks/connect?session=asks-connect-")
    expect(page.locator("h1")).to_have_text("Connect your Asks account")
    page.close()
    card.get_by_role("button", name="I’ve finished").click()
    expect(olivia.locator(".toolcall.status-success").last).to_contain_text(
        "Connected: the page is finished.", timeout=WAIT
    )
    expect(olivia.locator(".srq[data-kind=elicitation_url]").last).to_contain_text("Finished")


def test_server_everythings_form_is_answered(open_as, asks_world):
    olivia = open_as("olivia")
    goto_thread(olivia, asks_world, "everything")
    call_tool(olivia, "everything.trigger-elicitation-request")
    card = pending_card(olivia)
    expect(card).to_be_visible(timeout=WAIT)
    expect(card.locator("input[name=integer]")).to_have_value("42")
    expect(card.locator("select[name=legacyTitledEnum] option:checked")).to_have_text("Cats")
    card.locator("input[name=name]").fill("Ana Lima")
    card.get_by_role("button", name="Accept").click()
    done = olivia.locator(".toolcall.status-success").last
    expect(done).to_contain_text("User provided the requested information", timeout=WAIT)
    expect(done).to_contain_text("- Name: Ana Lima")
    expect(done).to_contain_text("- Favorite Integer: 42")
