"""`@modelcontextprotocol/server-everything`'s sampling and URL-elicitation tools in real
Chromium, through the whole path (issue 25; docs/mcp-client.md).

Sampling: the server asks the workspace's model (a local fake OpenAI-compatible server) —
nothing reaches it before the person approves once; a second request asks again. URL
elicitation: the card names the page's domain, the page opens in a new tab on a click.
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
from tests.chat.fake_llm import FakeLLM, openai_text
from tests.live import ROOT, LiveAtrium

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WAIT = 60_000  # ms: a bound for a busy machine; every wait is on a condition

SEED = """
import json
from pathlib import Path
from django.contrib.auth import get_user_model
from chat import services
from bindings.services.bindings import binding_create
from mcp_bridge.services.servers import server_add

NODE = Path({root!r}) / "tools" / "mcp-servers" / "node_modules" / "@modelcontextprotocol"
U = get_user_model()
owner = U.objects.create_user("olivia", password={password!r}, first_name="Olivia", last_name="Park")
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
workspace.provider = "openai"
workspace.model = "fake-model"
workspace.provider_base_url = {llm_url!r}
workspace.provider_api_key = "sk-test-everything"
workspace.save()
threads = {{
    name: services.thread_create(workspace=workspace, title="Everything " + name, actor=owner).pk
    for name in ("sampling", "url")
}}
server = server_add(
    name="Everything", slug="everything", transport="stdio", command="node",
    args=[str(NODE / "server-everything" / "dist" / "index.js"), "stdio"],
)
binding_create(server=server, workspace=workspace)
print(json.dumps({{"threads": threads, "servers": {{"everything": server.pk}}}}))
"""


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    fake = FakeLLM("openai").start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM) -> Iterator[World]:
    if not (ROOT / "tools" / "mcp-servers" / "node_modules").is_dir():
        pytest.skip("run tools/install-mcp-servers.sh")
    server = LiveAtrium(var_dir=tmp_path_factory.mktemp("everything") / "var").setup()
    password = "pw-" + secrets.token_urlsafe(10)
    seeded = json.loads(
        server.shell(SEED.format(password=password, root=str(ROOT), llm_url=llm.base_url))
        .strip()
        .splitlines()[-1]
    )
    server.start()
    try:
        yield World(server, password, seeded["threads"], seeded["servers"])
    finally:
        server.stop()


@pytest.fixture
def page(browser: Any, world: World) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(CSP_WATCH_JS)
    context.route(  # the page the server sends people to: served here, nothing leaves
        re.compile(r"^https://example\.com/"),
        lambda route: route.fulfill(status=200, content_type="text/html", body="<h1>Done</h1>"),
    )
    opened = context.new_page()
    opened.set_default_timeout(30_000)
    watch: PageWatch = HostPageWatch(opened, world.origin)
    login(opened, world.origin, "olivia", world.password)
    yield opened
    problems = watch.problems()
    context.close()
    assert not problems, "CSP violations or script errors on the host page:\n" + "\n".join(problems)


def pending(page: Any, kind: str) -> Any:
    return page.locator(f".srq[data-kind={kind}][data-status=pending]").last


def test_a_sampling_request_is_approved_once_and_answered_by_the_model(
    page: Any, world: World, llm: FakeLLM
) -> None:
    goto_thread(page, world, "sampling")
    llm.push(openai_text("Forty-two."))
    call_tool(page, "everything.trigger-sampling-request", {"prompt": "The answer?"})
    card = pending(page, "sampling")
    expect(card).to_be_visible(timeout=WAIT)
    # The card shows what the model would be asked, and nothing was sent yet.
    expect(card).to_contain_text("The answer?")
    expect(card).to_contain_text("You are a helpful test server.")
    assert not llm.bodies()
    card.get_by_role("button", name="Approve once").click()
    done = page.locator(".toolcall.status-success").last
    expect(done).to_contain_text("Forty-two.", timeout=WAIT)
    sent = llm.bodies()[-1]
    assert "The answer?" in sent and "_meta" not in sent
    ran = audit(world, event_type=920)  # SAMPLING_RAN, with token counts
    assert ran and "input_tokens" in json.dumps(ran[-1]["extra"])

    # Approved once: the next request asks again.
    call_tool(page, "everything.trigger-sampling-request", {"prompt": "Again?"})
    again = pending(page, "sampling")
    expect(again).to_contain_text("Again?", timeout=WAIT)
    again.get_by_role("button", name="Reject").click()
    expect(page.locator(".srq[data-kind=sampling][data-status=declined]").last).to_be_visible(
        timeout=WAIT
    )
    assert len(llm.bodies()) == 1


def test_a_url_elicitation_opens_its_page_in_a_new_tab_on_a_click(page: Any, world: World):
    goto_thread(page, world, "url")
    call_tool(
        page,
        "everything.trigger-url-elicitation",
        {"url": "https://example.com/verify", "message": "Verify your account"},
    )
    card = pending(page, "elicitation_url")
    expect(card).to_be_visible(timeout=WAIT)
    expect(card.locator(".srq-domain strong")).to_have_text("example.com")
    link = card.locator("a.srq-open")
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", re.compile(r"noopener"))
    with page.context.expect_page() as tab:
        link.click()
    expect(tab.value.locator("h1")).to_have_text("Done")
    assert page.locator("iframe[src^='https://example.com']").count() == 0
    tab.value.close()
