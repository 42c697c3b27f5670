"""Deleting a message, in real Chromium (issue 26, docs/files.md "Deleting a message"): a
member posts a message with a file (stored by the real worker); another member has the
thread open; the author deletes it from the message's hover actions, by keyboard, through
the inline confirm that names its file; it vanishes live from both pages, its file is gone
from storage and from its URL, and a reload no longer has it. A viewer is offered no Delete.
Screenshots (light and dark) of the hover action and the confirm step.

Every page fails the test on a CSP violation or an uncaught script error (helpers_ui).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from chat.media.models import MediaAsset
from tests.browser.helpers_ui import CSP_WATCH_JS, PageWatch, login, wait_live
from tests.chat import attachment_samples as samples
from tests.chat.test_media_e2e import isolated_redis_env
from tests.live import LiveAtrium

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(300)]

PASSWORD = "pw-delete-0123456"
SEED = """
import json
from django.contrib.auth import get_user_model
from chat import services
from chat.models import Membership

users = get_user_model().objects
owner = users.create_user("olivia", first_name="Olivia", last_name="Owens", password={pw!r})
member = users.create_user("marco", first_name="Marco", last_name="Mele", password={pw!r})
viewer = users.create_user("vera", first_name="Vera", last_name="Vance", password={pw!r})
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
Membership.objects.create(workspace=workspace, user=member, role="member")
Membership.objects.create(workspace=workspace, user=viewer, role="viewer")
thread = services.thread_create(workspace=workspace, title="Launch plan", actor=owner)
services.message_post(thread=thread, author=owner, text="Kick-off is on Monday.")
print(json.dumps({{"thread": thread.pk}}))
"""


@dataclass
class World:
    server: LiveAtrium
    thread_url: str


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    var_dir = tmp_path_factory.mktemp("message-delete-browser") / "var"
    server = LiveAtrium(var_dir=var_dir, extra_env=isolated_redis_env(12)).setup()
    out = server.shell(SEED.format(pw=PASSWORD))
    thread_id = json.loads(out.strip().splitlines()[-1])["thread"]
    server.start(worker=True)
    try:
        yield World(server, f"{server.app_origin}/w/acme/t/{thread_id}/")
    finally:
        server.stop()


@pytest.fixture
def open_page(browser: Any, world: World) -> Iterator[Any]:
    opened: list[tuple[Any, PageWatch]] = []

    def open_as(username: str) -> Any:
        context = browser.new_context(viewport={"width": 1180, "height": 760})
        context.add_init_script(CSP_WATCH_JS)
        page = context.new_page()
        page.set_default_timeout(20_000)
        opened.append((context, PageWatch(page)))
        login(page, world.server.app_origin, username, PASSWORD)
        page.goto(world.thread_url)
        wait_live(page)
        return page

    yield open_as
    problems = [p for _, watch in opened for p in watch.problems()]
    for context, _ in opened:
        context.close()
    assert not problems, "CSP violations or script errors:\n" + "\n".join(problems)


def shoot(page: Any, screenshots: Path, name: str) -> None:
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.screenshot(path=str(screenshots / f"{name}-{scheme}.png"))
    page.emulate_media(color_scheme="light")


def test_the_author_deletes_a_message_with_a_file_and_it_vanishes_for_everyone(
    open_page, world, screenshots
):
    marco = open_page("marco")
    with marco.expect_file_chooser() as chosen:
        marco.locator("#attach-btn").click()
    chosen.value.set_files(
        [{"name": "draft plan.png", "mimeType": "image/png", "buffer": samples.png(640, 400)}]
    )
    expect(marco.locator("#composer-files .upload-chip.is-done")).to_have_count(1)
    marco.fill("#composer-input", "Wrong thread, sorry: the draft plan")
    marco.locator("#composer-input").press("Enter")
    mine = marco.locator(".msg-entry", has_text="Wrong thread, sorry")
    expect(mine.locator("figure.media-image img")).to_have_count(1, timeout=60_000)  # stored
    message_id = int(mine.get_attribute("data-message-id"))
    asset = world.server.read(
        lambda db: (
            MediaAsset.objects.using(db).values("pk", "storage_path").get(message_id=message_id)
        )
    )
    stored = world.server.var_dir / "media" / asset["storage_path"]
    assert stored.is_file()

    # Olivia (an owner) has the thread open; so does Vera, a viewer, who is offered no Delete.
    olivia = open_page("olivia")
    theirs = olivia.locator(f'.msg-entry[data-message-id="{message_id}"]')
    expect(theirs).to_contain_text("Wrong thread, sorry")
    vera = open_page("vera")
    expect(vera.locator(f'.msg-entry[data-message-id="{message_id}"]')).to_be_visible()
    expect(vera.locator(".msg-delete")).to_have_count(0)
    # Marco may delete his own message, not Olivia's.
    kickoff = marco.locator(".msg-entry", has_text="Kick-off is on Monday")
    expect(kickoff.locator(".msg-delete")).to_have_count(0)

    # The hover action, then the keyboard: Tab reaches it, Enter opens the confirm.
    mine.locator(".msg").hover()
    delete = mine.locator(".msg-delete")
    expect(delete).to_be_visible()
    shoot(marco, screenshots, "message-delete-hover")
    delete.focus()
    marco.keyboard.press("Enter")
    confirm = mine.locator(".msg-delete-confirm")
    expect(confirm).to_contain_text("Delete this message and its file for everyone?")
    expect(confirm.get_by_role("button", name="Cancel")).to_be_focused()
    # Escape steps back (focus returns to Delete); nothing is deleted.
    marco.keyboard.press("Escape")
    expect(confirm).to_have_count(0)
    expect(delete).to_be_focused()
    marco.keyboard.press("Enter")
    expect(confirm).to_be_visible()
    marco.mouse.move(5, 5)  # the screenshot shows the confirm, not a hover
    shoot(marco, screenshots, "message-delete-confirm")
    marco.keyboard.press("Tab")  # from Cancel to the confirm's own Delete
    expect(confirm.get_by_role("button", name="Delete message and files")).to_be_focused()
    marco.keyboard.press("Enter")

    # Gone live from both pages; the file is gone from storage and from its URL.
    expect(mine).to_have_count(0)
    expect(marco.locator("#composer-input")).to_be_focused()  # focus is not lost
    expect(theirs).to_have_count(0)
    expect(olivia.locator(".msg-entry", has_text="Kick-off is on Monday")).to_be_visible()
    assert not stored.exists()
    status = olivia.evaluate("url => fetch(url).then(r => r.status)", f"/media/{asset['pk']}/")
    assert status == 404

    # A reload no longer has it.
    olivia.reload()
    wait_live(olivia)
    expect(olivia.locator(".msg-entry", has_text="Kick-off is on Monday")).to_be_visible()
    expect(olivia.locator(f'.msg-entry[data-message-id="{message_id}"]')).to_have_count(0)
    assert "Wrong thread, sorry" not in olivia.content()
