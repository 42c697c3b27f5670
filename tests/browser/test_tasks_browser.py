"""A tool call run as an MCP task, in real Chromium against a live Atrium, a real Celery
worker and the published ``@modelcontextprotocol/server-everything`` (its
``simulate-research-query`` is task-only): the card says the call works and why, the same
after a reload, and its Cancel reaches the server (whose confirmation the card shows).

Every page fails the test on a CSP violation or an uncaught script error (helpers_ui).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.helpers_ui import CSP_WATCH_JS, PageWatch, login, shot, wait_live
from tests.chat.test_media_e2e import isolated_redis_env
from tests.fixtures.third_party import NODE_MODULES, SERVERS, SKIP_REASON, node_binary
from tests.live import LiveAtrium

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(240),
    pytest.mark.skipif(not (NODE_MODULES / "@modelcontextprotocol").exists(), reason=SKIP_REASON),
]

PASSWORD = "pw-tasks-browser-0123"
SEED = """
import json
from django.contrib.auth import get_user_model
from bindings.services.bindings import binding_create
from chat import services
from mcp_bridge.services.servers import server_add

owner = get_user_model().objects.create_user("olivia", password={password!r})
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
thread = services.thread_create(workspace=workspace, title="Research", actor=owner)
server = server_add(
    name="Everything", slug="everything", transport="stdio", command={node!r}, args={args!r}
)
binding_create(server=server, workspace=workspace)
print(json.dumps({{"thread": thread.pk}}))
"""
CALL = '/call everything.simulate-research-query {"topic": "tides"}'


@dataclass
class TasksWorld:
    server: LiveAtrium
    thread_url: str


@pytest.fixture(scope="module")
def tasks_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TasksWorld]:
    """A live Atrium of our own; no worker until the test starts one."""
    var_dir = tmp_path_factory.mktemp("tasks-browser") / "var"
    server = LiveAtrium(var_dir=var_dir, extra_env=isolated_redis_env(11)).setup()
    everything = SERVERS["everything"]
    args = [str(everything.entry), *everything.stdio_args]
    out = server.shell(SEED.format(password=PASSWORD, node=node_binary(), args=args))
    thread_id = json.loads(out.strip().splitlines()[-1])["thread"]
    server.start()
    try:
        yield TasksWorld(server, f"{server.app_origin}/w/acme/t/{thread_id}/")
    finally:
        server.stop()


@pytest.fixture
def page(browser: Any, tasks_world: TasksWorld) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 760}, color_scheme="light")
    context.add_init_script(CSP_WATCH_JS)
    page = context.new_page()
    page.set_default_timeout(15_000)
    watch = PageWatch(page)
    login(page, tasks_world.server.app_origin, "olivia", PASSWORD)
    yield page
    problems = watch.problems()
    context.close()
    assert not problems, "CSP violations or script errors:\n" + "\n".join(problems)


def _card(page):
    return page.locator(".toolcall", has=page.locator(".tc-tool", has_text="simulate")).last


def test_a_task_shows_its_status_survives_a_reload_and_is_cancelled(page, tasks_world, screenshots):
    page.goto(tasks_world.thread_url)
    wait_live(page)
    box = page.locator("#composer-input")
    box.fill(CALL)
    box.press("Enter")

    # No worker yet: the web process handed the call over and holds nothing of it.
    card = _card(page)
    expect(card.locator(".status-pill")).to_have_text("Working…", timeout=30_000)
    expect(card.locator(".tc-task")).to_have_text("Server task · Starting…")
    page.reload()
    wait_live(page)
    card = _card(page)
    expect(card.locator(".status-pill")).to_have_text("Working…")
    expect(card.locator(".tc-task")).to_have_attribute("data-task-status", "submitted")

    # The worker starts the task; the server's own status message reaches the card live.
    tasks_world.server.start_worker()
    task_line = card.locator(".tc-task[data-task-status=working]")
    expect(task_line).to_contain_text("Server task · Working…", timeout=60_000)
    expect(task_line).to_contain_text("...")  # "Gathering sources..." and the next stages
    shot(page, screenshots, "task-working-light")

    card.locator(".tc-cancel").click()
    expect(card.locator(".status-pill")).to_have_text("Cancelled")
    expect(card.locator(".tc-task")).to_have_text(
        "Server task · Cancel confirmed by the server · Client cancelled task execution.",
        timeout=20_000,
    )

    page.emulate_media(color_scheme="dark")
    page.reload()
    wait_live(page)
    card = _card(page)
    expect(card.locator(".status-pill")).to_have_text("Cancelled")
    expect(card.locator(".tc-task")).to_have_attribute("data-task-status", "cancelled")
    card.scroll_into_view_if_needed()
    shot(page, screenshots, "task-cancelled-dark")
