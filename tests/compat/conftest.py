"""The compatibility suite reuses the real-Chromium fixtures of tests/browser."""

from tests.browser.conftest import browser, screenshots  # noqa: F401 (fixtures)
