"""Issue 23, F2, where a person sees it: real Chromium against a real web server.

A superuser refreshes the catalogue of a server one of whose tools has an input schema
past the complexity cap: the tool list marks it not callable, the filter finds it, and
its page says why (screenshots, light and dark).
"""

from __future__ import annotations

import json
import secrets
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.helpers_ui import CSP_WATCH_JS, PageWatch, login
from tests.conftest import ROOT_DIR
from tests.live import LiveAtrium

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SEED = """
import json
from django.contrib.auth import get_user_model
from mcp_bridge.services.servers import server_add

get_user_model().objects.create_user("olivia", password={password!r}, is_staff=True,
                                     is_superuser=True)
server = server_add(name="Schema bombs", slug="bombs", transport="stdio",
                             command={python!r}, args=[{script!r}])
print(json.dumps({{"mcp_server": server.pk}}))
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    server = LiveAtrium(var_dir=tmp_path_factory.mktemp("schema-bounds") / "var").setup()
    password = "pw-" + secrets.token_urlsafe(10)
    script = str(ROOT_DIR / "tests" / "fixtures" / "mcp_servers" / "schema_bombs.py")
    seed = SEED.format(password=password, python=sys.executable, script=script)
    out = json.loads(server.shell(seed).strip().splitlines()[-1])
    server.start()
    try:
        yield {"server": server, "password": password, **out}
    finally:
        server.stop()


@pytest.fixture
def admin_page(browser, world) -> Iterator[Any]:
    contexts, watches = [], []

    def open_page(path: str, color_scheme: str = "light") -> Any:
        context = browser.new_context(
            viewport={"width": 1280, "height": 800}, color_scheme=color_scheme
        )
        context.add_init_script(CSP_WATCH_JS)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(30_000)
        watches.append(PageWatch(page))
        origin = world["server"].app_origin
        login(page, origin, "olivia", world["password"])
        page.goto(f"{origin}{path}")
        return page

    yield open_page
    problems = [p for w in watches for p in w.problems()]
    for context in contexts:
        context.close()
    assert not problems, problems


def test_the_admin_sees_which_tool_cannot_be_called_and_why(admin_page, world, screenshots):
    page = admin_page("/admin/mcp_bridge/mcpserver/")
    page.check(f"input[name=_selected_action][value='{world['mcp_server']}']")
    page.select_option("select[name=action]", "refresh_catalogue")
    with page.expect_navigation():
        page.click("button[name=index]")
    expect(page.locator("ul.messagelist")).to_contain_text("Schema bombs: 3 tools (3 added")
    expect(page.locator("ul.messagelist")).to_contain_text("1 with problems")

    for scheme in ("light", "dark"):
        listing = admin_page(
            f"/admin/mcp_bridge/tool/?server__id__exact={world['mcp_server']}", scheme
        )
        deep = listing.locator("#result_list tr", has_text="deep_choice")
        expect(deep.locator("td.field-is_callable img")).to_have_attribute("alt", "False")
        plain = listing.locator("#result_list tr", has_text="plain_echo")
        expect(plain.locator("td.field-is_callable img")).to_have_attribute("alt", "True")
        listing.screenshot(path=str(screenshots / f"schema-refused-tool-list-{scheme}.png"))

        listing.click("#changelist-filter a:has-text('No (input schema refused)')")
        expect(listing.locator("#result_list tbody tr")).to_have_count(1)
        with listing.expect_navigation():
            listing.click("#result_list a:has-text('deep_choice')")
        status = listing.locator(".field-callable_status .readonly")
        expect(status).to_contain_text("No — the tool's input schema is too complex to check:")
        expect(status).to_contain_text("its $refs expand to more than 50,000 subschemas")
        listing.screenshot(path=str(screenshots / f"schema-refused-tool-{scheme}.png"))
