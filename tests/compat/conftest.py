"""The compatibility suite reuses the real-Chromium fixtures of tests/browser."""

from tests.browser.conftest import screenshots  # noqa: F401 (fixture; `browser` is in tests/conftest.py)
