"""Files in the conversation, in real Chromium (issue 26): a member attaches files by the
button, by dropping them on the thread and by pasting a screenshot; each shows a progress
bar (one is cancelled half-way); the message is sent once they are stored; the worker's
thumbnails (an image, a PDF's first page) appear live; the lightbox opens; another member
sees the same files and thumbnails after a reload; a viewer has no attach button and the
server refuses her upload anyway. Screenshots of each step go to the session's folder
and, light and dark, to /work/notes/shots/files-*.png when that folder exists.

Every page fails the test on a CSP violation or an uncaught script error (helpers_ui).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.helpers_ui import CSP_WATCH_JS, PageWatch, login, wait_live
from tests.chat import attachment_samples as samples
from tests.chat.test_media_e2e import isolated_redis_env
from tests.live import LiveAtrium

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(300)]

PASSWORD = "pw-attach-0123456"
NOTES_SHOTS = Path("/work/notes/shots")
SEED = """
import json
from django.contrib.auth import get_user_model
from chat import services
from chat.models import Membership

users = get_user_model().objects
owner = users.create_user("olivia", first_name="Olivia", last_name="Owens", password={pw!r})
member = users.create_user("marco", first_name="Marco", last_name="Mele", password={pw!r})
viewer = users.create_user("vera", first_name="Vera", last_name="Vance", password={pw!r})
admin = users.create_superuser("root", password={pw!r})
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
Membership.objects.create(workspace=workspace, user=member, role="member")
Membership.objects.create(workspace=workspace, user=viewer, role="viewer")
thread = services.thread_create(workspace=workspace, title="Launch plan", actor=owner)
print(json.dumps({{"thread": thread.pk}}))
"""


@dataclass
class World:
    server: LiveAtrium
    thread_url: str


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    var_dir = tmp_path_factory.mktemp("attachments-browser") / "var"
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

    def open_as(username: str, scheme: str = "light") -> Any:
        context = browser.new_context(viewport={"width": 1180, "height": 820}, color_scheme=scheme)
        context.add_init_script(CSP_WATCH_JS)
        page = context.new_page()
        page.set_default_timeout(20_000)
        opened.append((context, PageWatch(page)))
        login(page, world.server.app_origin, username, PASSWORD)
        return page

    yield open_as
    problems = [p for _, watch in opened for p in watch.problems()]
    for context, _ in opened:
        context.close()
    assert not problems, "CSP violations or script errors:\n" + "\n".join(problems)


def save_shot(page: Any, screenshots: Path, name: str, scheme: str = "light") -> None:
    page.screenshot(path=str(screenshots / f"{name}-{scheme}.png"))
    if NOTES_SHOTS.is_dir():
        page.screenshot(path=str(NOTES_SHOTS / f"{name}-{scheme}.png"))


# JS: files made in the page (bytes passed as arrays), and the events a person causes.
MAKE_TRANSFER = """
([files]) => {
  const dt = new DataTransfer();
  for (const f of files) dt.items.add(new File([new Uint8Array(f.bytes)], f.name, { type: f.type }));
  return dt;
}
"""
WATCH_PROGRESS = """
() => {
  window.__progress = [];
  new MutationObserver(() => {
    document.querySelectorAll('#composer-files [role=progressbar]').forEach(bar => {
      window.__progress.push(Number(bar.getAttribute('aria-valuenow')));
    });
  }).observe(document.getElementById('composer-files'), { subtree: true, attributes: true, childList: true });
}
"""


def drop_files(page: Any, files: list[dict[str, Any]]) -> None:
    transfer = page.evaluate_handle(MAKE_TRANSFER, [files])
    zone = page.locator("#thread-app")
    zone.dispatch_event("dragenter", {"dataTransfer": transfer})
    expect(page.locator(".drop-overlay")).to_be_visible()
    zone.dispatch_event("dragover", {"dataTransfer": transfer})
    zone.dispatch_event("drop", {"dataTransfer": transfer})
    expect(page.locator(".drop-overlay")).to_be_hidden()


def paste_files(page: Any, files: list[dict[str, Any]]) -> None:
    page.evaluate(
        """([files]) => {
          const dt = new DataTransfer();
          for (const f of files) dt.items.add(new File([new Uint8Array(f.bytes)], f.name, { type: f.type }));
          const event = new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true });
          document.getElementById('composer-input').dispatchEvent(event);
        }""",
        [files],
    )


def as_js(name: str, data: bytes, mime: str) -> dict[str, Any]:
    return {"name": name, "bytes": list(data), "type": mime}


def test_a_member_attaches_by_button_drop_and_paste_and_everyone_sees_the_files(
    open_page, world, screenshots
):
    marco = open_page("marco")
    marco.goto(world.thread_url)
    wait_live(marco)
    marco.evaluate(WATCH_PROGRESS)

    # 1. The button: a file chooser with an image and a PDF.
    with marco.expect_file_chooser() as chosen:
        marco.locator("#attach-btn").click()
    chosen.value.set_files(
        [
            {"name": "roadmap.png", "mimeType": "image/png", "buffer": samples.png(1200, 760)},
            {
                "name": "Q3 report.pdf",
                "mimeType": "application/pdf",
                "buffer": samples.pdf_with_text("Q3 report", "Revenue up 12 percent"),
            },
        ]
    )
    # 2. Drop a text file on the thread; 3. paste a screenshot into the composer.
    drop_files(marco, [as_js("notes.txt", b"Ship on Friday.\n", "text/plain")])
    paste_files(marco, [as_js("image.png", samples.png(420, 260, (22, 135, 90)), "image/png")])

    chips = marco.locator("#composer-files .upload-chip")
    expect(chips).to_have_count(4)
    expect(marco.locator("#composer-files .upload-chip.is-done")).to_have_count(4)
    names = chips.locator(".upload-name").all_inner_texts()
    assert names[:3] == ["roadmap.png", "Q3 report.pdf", "notes.txt"]
    assert re.fullmatch(r"Screenshot \d{4}-\d\d-\d\d \d\d\.\d\d\.\d\d\.png", names[3])
    progress = marco.evaluate("window.__progress")
    assert progress and max(progress) == 100  # each chip had its bar, filled to the end

    # A large file is cancelled half-way: its chip goes, and nothing is attached. The
    # page's uploads are slowed (Chromium's network emulation) so that "half-way" lasts.
    cdp = marco.context.new_cdp_session(marco)
    cdp.send("Network.enable")
    cdp.send(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": 2**20},
    )
    big = samples.png(64, 64) + bytes(24 * 1024 * 1024)
    with marco.expect_file_chooser() as chosen:
        marco.locator("#attach-btn").click()
    chosen.value.set_files(
        [{"name": "huge.bin", "mimeType": "application/octet-stream", "buffer": big}]
    )
    cancel = marco.locator("#composer-files .upload-chip.is-uploading .upload-cancel")
    expect(cancel).to_be_visible()
    marco.fill("#composer-input", "Files for the launch review")
    for scheme in ("light", "dark"):
        marco.emulate_media(color_scheme=scheme)
        save_shot(marco, screenshots, "files-composer", scheme)
    marco.wait_for_function("() => window.__progress.some(v => v > 0 && v < 100)")  # half-way
    cancel.click()
    expect(chips).to_have_count(4)
    cdp.send(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
    )

    marco.locator("#composer-input").press("Enter")
    message = marco.locator(".msg-entry", has=marco.locator(".msg-files")).last
    expect(message.locator(".msg-body")).to_contain_text("Files for the launch review")
    expect(marco.locator("#composer-files")).to_be_hidden()
    # The worker stores them: the images' and the PDF's thumbnails arrive live.
    expect(message.locator("figure.media-image img")).to_have_count(2, timeout=60_000)
    pdf_chip = message.locator("a.file-chip", has_text="Q3 report.pdf")
    expect(pdf_chip.locator("img.file-chip-thumb")).to_have_attribute(
        "src", re.compile(r"^/media/\d+/thumbnail/$"), timeout=60_000
    )
    expect(pdf_chip).to_contain_text("PDF · 1 page")
    expect(message.locator("a.file-chip", has_text="notes.txt")).to_have_attribute(
        "href", re.compile(r"^/media/\d+/\?download=1$")
    )
    seen_by_marco = files_of(message)
    for scheme in ("light", "dark"):
        marco.emulate_media(color_scheme=scheme)
        message.scroll_into_view_if_needed()
        save_shot(marco, screenshots, "files-message", scheme)

    # The lightbox shows the full image.
    message.locator("figure.media-image .media-thumb").first.click()
    lightbox = marco.locator("dialog.lightbox")
    expect(lightbox).to_be_visible()
    marco.wait_for_function(
        "img => img.complete && img.naturalWidth === 1200",
        arg=lightbox.locator("img").element_handle(),
    )
    for scheme in ("light", "dark"):
        marco.emulate_media(color_scheme=scheme)
        save_shot(marco, screenshots, "files-lightbox", scheme)
    marco.keyboard.press("Escape")

    # Another member, after a reload: the same files, the same thumbnails.
    olivia = open_page("olivia")
    olivia.goto(world.thread_url)
    wait_live(olivia)
    theirs = olivia.locator(".msg-entry", has=olivia.locator(".msg-files")).last
    expect(theirs.locator("figure.media-image img")).to_have_count(2)
    assert files_of(theirs) == seen_by_marco
    olivia.wait_for_function(
        "imgs => imgs.every(i => i.complete && i.naturalWidth > 0)",
        arg=theirs.locator("img").element_handles(),
    )
    # The download link serves the PDF itself.
    href = theirs.locator("a.file-chip", has_text="Q3 report.pdf").get_attribute("href")
    fetched = olivia.evaluate(
        "url => fetch(url).then(r => r.arrayBuffer().then(b => [r.status, r.headers.get('content-type'), b.byteLength]))",
        href,
    )
    assert fetched[0] == 200 and fetched[1] == "application/pdf" and fetched[2] > 500

    # The admin's list of files, per workspace.
    admin = open_page("root")
    admin.set_viewport_size({"width": 1500, "height": 700})
    admin.goto(f"{world.server.app_origin}/admin/chat/attachedfile/")
    expect(admin.locator("#result_list")).to_contain_text("Q3 report.pdf")
    expect(admin.locator("#result_list")).to_contain_text("marco")
    for scheme in ("light", "dark"):
        admin.emulate_media(color_scheme=scheme)
        save_shot(admin, screenshots, "files-admin", scheme)


def files_of(message: Any) -> list[tuple[str, str | None]]:
    """(name or alt, thumbnail src) of every file of a message, in order."""
    return message.evaluate(
        """m => Array.from(m.querySelectorAll('.msg-files figure, .msg-files .file-chip')).map(el => {
            const img = el.querySelector('img');
            const name = el.querySelector('.file-chip-name, figcaption');
            return [name ? name.textContent : '', img ? img.getAttribute('src') : null];
        })"""
    )


def test_a_viewer_cannot_attach(open_page, world):
    vera = open_page("vera")
    vera.goto(world.thread_url)
    wait_live(vera)
    expect(vera.locator("#composer.is-readonly")).to_be_visible()
    expect(vera.locator("#attach-btn")).to_have_count(0)
    # Dropping files does nothing either, and the server refuses her upload regardless.
    drop_zone = vera.locator("#thread-app")
    transfer = vera.evaluate_handle(MAKE_TRANSFER, [[as_js("a.txt", b"x", "text/plain")]])
    drop_zone.dispatch_event("drop", {"dataTransfer": transfer})
    expect(vera.locator(".upload-chip")).to_have_count(0)
    thread_id = int(world.thread_url.rstrip("/").rsplit("/", 1)[1])
    answer = vera.evaluate(
        """async (threadId) => {
          const token = (document.cookie.match(/csrftoken=([^;]+)/) || [])[1] || '';
          const r = await fetch('/media/uploads/' + threadId + '/', {
            method: 'POST', headers: {'Content-Type': 'application/json', 'X-CSRFToken': token},
            body: JSON.stringify({filename: 'a.txt', size: 1})});
          return [r.status, await r.json()];
        }""",
        thread_id,
    )
    assert answer[0] == 403 and "Viewers" in answer[1]["error"]["message"]
