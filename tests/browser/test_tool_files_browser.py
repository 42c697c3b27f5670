"""A file of the thread passed to a tool from the tool picker, in real Chromium (issue 26
part 3): a member attaches a text file, opens the tool picker, chooses `files.file_stats`,
picks the file in its file field (name · type · size), inserts the /call and sends it; the
`examples/files` server fetches the file through Atrium's single-file link and the result
shows its exact SHA-256, with the file it read as the file chip (the authenticated URL).
Screenshots of the picker's file field, light and dark. Every page fails the test on a CSP
violation or an uncaught script error (helpers_ui)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.helpers_ui import CSP_WATCH_JS, PageWatch, login, wait_live
from tests.chat.test_media_e2e import isolated_redis_env
from tests.live import LiveAtrium

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "pw-toolfiles-0123"
NOTES = b"Launch checklist\n- freeze the branch\n- tag the release\n- write the notes\n"
SEED = """
import json, sys
from django.contrib.auth import get_user_model
from bindings.services.bindings import binding_create
from chat import services
from chat.models import Membership
from mcp_bridge.services.servers import server_add

users = get_user_model().objects
owner = users.create_user("olivia", first_name="Olivia", last_name="Owens", password={pw!r})
member = users.create_user("marco", first_name="Marco", last_name="Mele", password={pw!r})
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
Membership.objects.create(workspace=workspace, user=member, role="member")
thread = services.thread_create(workspace=workspace, title="Release", actor=owner)
server = server_add(name="Files", slug="files", transport="stdio", command=sys.executable,
                    args=[{example!r}])
binding_create(server=server, workspace=workspace)
print(json.dumps({{"thread": thread.pk}}))
"""


@dataclass
class World:
    server: LiveAtrium
    thread_url: str


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    var_dir = tmp_path_factory.mktemp("tool-files-browser") / "var"
    server = LiveAtrium(var_dir=var_dir, extra_env=isolated_redis_env(14)).setup()
    example = str(ROOT / "examples" / "files" / "server.py")
    out = server.shell(SEED.format(pw=PASSWORD, example=example))
    thread_id = json.loads(out.strip().splitlines()[-1])["thread"]
    server.start(worker=True)
    try:
        yield World(server, f"{server.app_origin}/w/acme/t/{thread_id}/")
    finally:
        server.stop()


@pytest.fixture
def page(browser: Any, world: World) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1180, "height": 820})
    context.add_init_script(CSP_WATCH_JS)
    opened = context.new_page()
    opened.set_default_timeout(30_000)
    watch = PageWatch(opened)
    login(opened, world.server.app_origin, "marco", PASSWORD)
    yield opened
    problems = watch.problems()
    context.close()
    assert not problems, "CSP violations or script errors:\n" + "\n".join(problems)


def test_a_member_passes_an_attached_file_to_a_tool_from_the_picker(page, world, screenshots):
    page.goto(world.thread_url)
    wait_live(page)

    # A file attached to a message of the thread, stored by the worker.
    with page.expect_file_chooser() as chosen:
        page.locator("#attach-btn").click()
    chosen.value.set_files([{"name": "checklist.txt", "mimeType": "text/plain", "buffer": NOTES}])
    expect(page.locator("#composer-files .upload-chip.is-done")).to_have_count(1)
    page.fill("#composer-input", "The checklist")
    page.locator("#composer-input").press("Enter")
    expect(page.locator("a.file-chip", has_text="checklist.txt")).to_be_visible(timeout=60_000)

    # The picker: file_stats asks which file goes in its `file` argument.
    page.locator("#tool-picker-btn").click()
    page.fill("#tool-picker-search", "file_stats")
    page.locator(".picker-item", has_text="files.file_stats").click()
    select = page.locator(".tool-file-form select[name=file]")
    expect(select).to_be_visible()
    option = select.locator("option", has_text="checklist.txt")
    expect(option).to_have_text(f"checklist.txt · Text · {len(NOTES)} B")
    select.select_option(label=option.inner_text())
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.locator("#tool-picker").screenshot(
            path=str(screenshots / f"tool-files-picker-{scheme}.png")
        )
    page.emulate_media(color_scheme="light")
    page.locator(".tool-file-form button[type=submit]").click()

    command = page.locator("#composer-input").input_value()
    assert re.fullmatch(r'/call files\.file_stats \{"file":\{"\$file":\d+\}.*\}', command), command
    page.locator("#composer-input").press("Enter")

    card = page.locator(".toolcall", has_text="file_stats").last
    expect(card).to_contain_text(hashlib.sha256(NOTES).hexdigest(), timeout=60_000)
    expect(card).to_contain_text("read link")
    # The file the server read, as the file itself: through the authenticated URL.
    back = card.locator("a.file-card", has_text="checklist.txt")
    expect(back).to_have_attribute("href", re.compile(r"^(blob:|/media/\d+/)"))
    # The arguments shown name the file; no single-file link is on the page.
    assert "/link/" not in page.content()
    page.locator(".toolcall").last.screenshot(path=str(screenshots / "tool-files-result-light.png"))
