"""One server's views in two workspaces run on two origins, in real Chromium (F12,
docs/sandbox.md "One origin per server and workspace").

Storage (localStorage, IndexedDB, cookies) belongs to an origin. With one origin per server,
a server bound in two workspaces would hand workspace A's view data to the same server's
view in workspace B, in the same browser. The same person here owns both workspaces: the
browser is shared, only the workspace differs.
"""

from __future__ import annotations

import json
import secrets
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.browser.helpers_ui import login
from tests.browser.test_sandbox import _persistent_context_allowing_third_party_storage
from tests.browser.test_views import call_tool, view_row, wait_ready
from tests.live import CHROMIUM, CHROMIUM_ARGS, ROOT, LiveAtrium

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SEED = """
import json
from pathlib import Path
from django.contrib.auth import get_user_model
from chat import services
from bindings.services.bindings import binding_create
from bindings.services.policies import tool_policy_set
from mcp_bridge.services.servers import server_add

NODE = Path({root!r}) / "tools" / "mcp-servers" / "node_modules" / "@modelcontextprotocol"
owner = get_user_model().objects.create_user("olivia", password={password!r}, first_name="Olivia")
basic = server_add(
    name="Basic", slug="basic", transport="stdio", command="node",
    args=[str(NODE / "server-basic-vanillajs" / "dist" / "index.js"), "--stdio"],
)
threads = {{}}
for slug, name in (("acme", "Acme"), ("globex", "Globex")):
    workspace = services.workspace_create(name=name, owner=owner, slug=slug)
    binding = binding_create(server=basic, workspace=workspace)
    tool_policy_set(binding=binding, tool_name="get-time", approval="auto")
    for n in ("one", "two"):
        threads[slug + "/" + n] = services.thread_create(
            workspace=workspace, title=name + " " + n, actor=owner
        ).pk
print(json.dumps(threads))
"""


@dataclass
class World:
    server: LiveAtrium
    password: str
    threads: dict[str, int]

    def thread_url(self, name: str) -> str:
        workspace = name.split("/")[0]
        return f"{self.server.app_origin}/w/{workspace}/t/{self.threads[name]}/"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    server = LiveAtrium(var_dir=tmp_path_factory.mktemp("origins") / "var").setup()
    password = "pw-" + secrets.token_urlsafe(10)
    out = server.shell(SEED.format(root=str(ROOT), password=password))
    threads = json.loads(out.strip().splitlines()[-1])
    server.start()
    try:
        yield World(server, password, threads)
    finally:
        server.stop()


def _open_basic_view(page: Any, world: World, thread: str) -> Any:
    """The app document (the proxy's inner frame) of a fresh basic view in ``thread``."""
    page.goto(world.thread_url(thread))
    page.wait_for_selector("#conn-indicator[data-state=live]")
    call_tool(page, "basic.get-time", {})
    row = view_row(page, "get-time")
    wait_ready(page, row)
    src = row.locator(":scope > .view-body iframe.view-frame").get_attribute("src")
    proxy = next(f for f in page.frames if f.url.split("?")[0] == src.split("?")[0])
    return proxy.child_frames[0]


def test_a_servers_views_in_two_workspaces_do_not_share_storage(browser, world, screenshots):
    # Storage needs third-party storage allowed (Chrome's default outside Incognito);
    # Debian's headless Chromium blocks it otherwise, and then there is nothing to share.
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

            acme = _open_basic_view(page, world, "acme/one")
            acme_origin = acme.evaluate("() => window.origin")
            assert acme_origin == world.server.sandbox_origin_of("basic", "acme")
            acme.evaluate("() => localStorage.setItem('secret', 'acme-only')")

            # The control: the same server's next view in the same workspace (another
            # thread, another page load) shares that storage, so it is real and persists.
            again = _open_basic_view(page, world, "acme/two")
            assert again.evaluate("() => window.origin") == acme_origin
            assert again.evaluate("() => localStorage.getItem('secret')") == "acme-only"

            # The same server in another workspace: another origin, none of acme's storage.
            globex = _open_basic_view(page, world, "globex/one")
            assert globex.evaluate("() => localStorage.getItem('secret')") is None
            globex_origin = globex.evaluate("() => window.origin")
            assert globex_origin == world.server.sandbox_origin_of("basic", "globex")
            assert globex_origin != acme_origin
            page.screenshot(path=str(screenshots / "sandbox-origins-globex.png"))
        finally:
            context.close()
