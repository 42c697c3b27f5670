"""Tool-result media in real Chromium: placeholders while no worker runs, then the stored
image (thumbnail + lightbox), a playable audio player and a video with its poster — live,
without a reload, and the same after one.

Every page fails the test on a CSP violation or an uncaught script error (helpers_ui).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.helpers_ui import CSP_WATCH_JS, PageWatch, login, shot, wait_live
from tests.chat.test_media_e2e import PASSWORD, SEED, isolated_redis_env
from tests.live import ROOT, LiveAtrium

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(240)]


@dataclass
class MediaWorld:
    server: LiveAtrium
    thread_url: str


@pytest.fixture(scope="module")
def media_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MediaWorld]:
    """A live Atrium of our own (default media limits), no worker until the test starts one."""
    var_dir = tmp_path_factory.mktemp("media-browser") / "var"
    server = LiveAtrium(var_dir=var_dir, extra_env=isolated_redis_env(13)).setup()
    media_server = str(ROOT / "examples" / "media" / "server.py")
    out = server.shell(SEED.format(password=PASSWORD, server=media_server))
    thread_id = json.loads(out.strip().splitlines()[-1])["thread"]
    server.start()
    try:
        yield MediaWorld(server, f"{server.app_origin}/w/acme/t/{thread_id}/")
    finally:
        server.stop()


@pytest.fixture
def page(browser: Any, media_world: MediaWorld) -> Iterator[Any]:
    """Olivia's page; fails the test on a CSP violation or an uncaught script error."""
    context = browser.new_context(viewport={"width": 1280, "height": 820}, color_scheme="light")
    context.add_init_script(CSP_WATCH_JS)
    page = context.new_page()
    page.set_default_timeout(15_000)
    watch = PageWatch(page)
    login(page, media_world.server.app_origin, "olivia", PASSWORD)
    yield page
    problems = watch.problems()
    context.close()
    assert not problems, "CSP violations or script errors:\n" + "\n".join(problems)


# Above the 64 KiB inline limit, so each one goes through staging and the worker.
IMAGE = '/call media.get_image {"width": 2400, "height": 1350, "format": "jpeg"}'
AUDIO = '/call media.get_audio {"seconds": 3}'
VIDEO = '/call media.get_video {"seconds": 2}'
BOMB = "/call media.get_bomb {}"
BOMB_REASON = (
    "The image is larger than 50 megapixels (50000 × 50000 pixels; decompression bomb protection)."
)


def _send(page, text: str) -> None:
    box = page.locator("#composer-input")
    box.fill(text)
    box.press("Enter")


def _card(page, tool: str):
    return page.locator(".toolcall", has=page.locator(".tc-tool", has_text=tool)).last


def test_media_results_render_live_and_after_a_reload(page, media_world, screenshots):
    page.goto(media_world.thread_url)
    wait_live(page)

    # No worker yet: the results arrive at once, their media as placeholders.
    calls = ((IMAGE, "get_image"), (AUDIO, "get_audio"), (VIDEO, "get_video"), (BOMB, "get_bomb"))
    for command, tool in calls:
        _send(page, command)
        expect(_card(page, tool).locator(".status-pill")).to_have_text("Done", timeout=30_000)
    placeholders = page.locator(".media-placeholder")
    expect(placeholders).to_have_count(4)
    shot(page, screenshots, "media-placeholders")

    media_world.server.start_worker()
    # The worker's `media` events replace the placeholders in place, no reload.
    expect(placeholders).to_have_count(0, timeout=60_000)
    _check_media(page, screenshots)
    _card(page, "get_audio").scroll_into_view_if_needed()
    page.locator("figure.media-video").last.scroll_into_view_if_needed()
    shot(page, screenshots, "media")

    page.reload()
    wait_live(page)
    _check_media(page)


def _check_media(page, screenshots=None) -> None:
    rejected = _card(page, "get_bomb").locator(".media-rejected")
    expect(rejected).to_contain_text("Image couldn't be stored")
    expect(rejected).to_contain_text(BOMB_REASON)

    image = page.locator("figure.media-image").last
    thumb = image.locator("img")
    expect(thumb).to_have_attribute("src", re.compile(r"^/media/\d+/thumbnail/$"))
    page.wait_for_function(
        "img => img.complete && img.naturalWidth === 320", arg=thumb.element_handle()
    )

    image.locator(".media-thumb").click()
    lightbox = page.locator("dialog.lightbox")
    expect(lightbox).to_be_visible()
    full = lightbox.locator("img")
    expect(full).to_have_attribute("src", re.compile(r"^/media/\d+/$"))
    page.wait_for_function(
        "img => img.complete && img.naturalWidth === 2400", arg=full.element_handle()
    )
    if screenshots is not None:
        shot(page, screenshots, "media-lightbox")
    page.keyboard.press("Escape")
    expect(lightbox).to_be_hidden()

    audio = page.locator("figure.media-audio audio").last
    expect(audio).to_have_attribute("src", re.compile(r"^/media/\d+/$"))
    page.wait_for_function(
        "a => a.readyState >= 1 && Math.abs(a.duration - 3) < 0.05", arg=audio.element_handle()
    )
    played = audio.evaluate(
        "a => { a.muted = true; return a.play().then(() => { a.pause(); return true; }); }"
    )
    assert played is True

    # Motion-JPEG AVI is what the example produces and Chromium cannot play it: the UI
    # shows the poster frame and offers the file instead of a dead player.
    unplayable = page.locator("figure.media-video.is-unplayable").last
    expect(unplayable.locator("video")).to_have_count(0)
    still = unplayable.locator("img")
    expect(still).to_have_attribute("src", re.compile(r"^/media/\d+/poster/$"))
    poster_size = still.evaluate(
        """img => new Promise((resolve, reject) => {
            const probe = new Image();
            probe.onload = () => resolve([probe.naturalWidth, probe.naturalHeight]);
            probe.onerror = reject;
            probe.src = img.src;
        })"""
    )
    assert poster_size == [320, 240]
    download = unplayable.locator("a.file-card")
    expect(download).to_have_attribute("href", re.compile(r"^/media/\d+/$"))
    status = download.evaluate(
        "a => fetch(a.href, {headers: {Range: 'bytes=0-11'}}).then(r => r.status)"
    )
    assert status == 206
