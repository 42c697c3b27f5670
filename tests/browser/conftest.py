"""Real Chromium (Debian's, via Playwright) against a real uvicorn-served Atrium."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live import LiveAtrium

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


FAILURES = ARTIFACTS.parent / "failures"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed browser test leaves its evidence (before its pages close): a screenshot
    and the host's state of every open page, and the live server's log tail, in
    test-artifacts/failures/<test>/. A flake that cannot be reproduced can still be read."""
    report = yield
    if report.when == "call" and report.failed and "browser" in item.funcargs:
        try:
            _record_failure(item)
        except Exception as exc:  # noqa: BLE001 (the evidence must never hide the failure)
            report.sections.append(("failure evidence", f"not recorded: {exc!r}"))
    return report


PAGE_STATE_JS = """() => ({
    url: location.href,
    connection: (document.querySelector('#conn-indicator') || {}).dataset,
    views: window.AtriumAppViews ? window.AtriumAppViews.list() : null,
    rows: Array.from(document.querySelectorAll('.view-row')).map(r => ({
        id: r.dataset.toolCallId, mounted: r.classList.contains('is-mounted'),
        frame: !!r.querySelector('iframe.view-frame'), text: r.innerText.slice(0, 200)})),
})"""


def _record_failure(item) -> None:
    folder = FAILURES / re.sub(r"[^\w.-]+", "_", item.nodeid)[-120:]
    folder.mkdir(parents=True, exist_ok=True)
    for c, context in enumerate(item.funcargs["browser"].contexts):
        for p, page in enumerate(context.pages):
            name = f"context{c}-page{p}"
            page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
            state = page.evaluate(PAGE_STATE_JS)
            (folder / f"{name}.json").write_text(json.dumps(state, indent=1, default=str))
    for value in item.funcargs.values():
        server = getattr(value, "server", value)
        if isinstance(server, LiveAtrium):
            log = server.var_dir / "server.log"
            if log.exists():
                (folder / "server-tail.log").write_text(log.read_text(errors="replace")[-20_000:])
