"""Real Chromium (Debian's, via Playwright) against a real daphne-served Atrium."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live import CHROMIUM, CHROMIUM_ARGS, LiveAtrium

ARTIFACTS = Path(__file__).resolve().parent.parent.parent / "test-artifacts" / "screenshots"

PRODUCTION = os.environ.get("ATRIUM_PROFILE") == "production"


def pytest_collection_modifyitems(config, items) -> None:
    """The browser suite tests what a person sees and does, the same on either profile:
    it runs once, in the embedded pass of CI (`.ci/run`), which keeps both passes within
    CI's time. What differs per profile (PostgreSQL, Redis) is tested below the browser."""
    if not PRODUCTION:
        return
    skip = pytest.mark.skip(reason="browser suite: runs once, in the embedded profile's pass")
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(skip)


# Module scope, not session: Playwright's sync API keeps an asyncio loop running in the
# main thread while it is open, which would break every async test collected after it.
@pytest.fixture(scope="module")
def browser() -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def live_atrium(tmp_path: Path) -> Iterator[LiveAtrium]:
    server = LiveAtrium(var_dir=tmp_path / "var").setup()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


def login(page, server: LiveAtrium, username: str, password: str) -> None:
    page.goto(f"{server.app_origin}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_load_state("networkidle")
