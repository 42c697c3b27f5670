"""From `/call` to the view's `ready`, in real Chromium (issue 12, docs/sandbox.md).

basic-vanillajs (`@modelcontextprotocol/server-basic-vanillajs`, stdio) with a warm
server: each sample opens a fresh thread page (not timed), types `/call basic.get-time {}`
and measures, in the page's own clock, from the Enter key to the moment the new view has
finished its handshake (`ui/notifications/initialized`: AtriumAppViews reports `ready`).
That covers the tool call, the view's mount, the sandbox proxy page on the server's own
origin, the document fetch and the app's start-up. The predicate is checked every frame
(~16 ms resolution).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from tests.live import CHROMIUM, CHROMIUM_ARGS, ROOT

from .harness import BenchAtrium, Seeded

SERVER_JS = (
    ROOT
    / "tools/mcp-servers/node_modules/@modelcontextprotocol/server-basic-vanillajs"
    / "dist/index.js"
)
WARMUP = 2

NEW_VIEW_READY = """seen => {
  const view = window.AtriumAppViews.list().find(v => !seen.includes(v.toolCallId) && v.ready);
  if (!view) return false;
  window.__viewReadyAt = window.__viewReadyAt || performance.now();
  return true;
}"""


def server_spec() -> dict[str, Any]:
    return {"transport": "stdio", "command": "node", "args": [str(SERVER_JS), "--stdio"]}


def auto_approve(server: BenchAtrium) -> None:
    server.shell(
        "from bindings.models import AppBinding\n"
        "from bindings.services.policies import tool_policy_set\n"
        "b = AppBinding.objects.get(server__slug='basic')\n"
        "tool_policy_set(binding=b, tool_name='get-time', approval='auto')\n"
    )


def _sample(page: Any, url: str) -> float:
    page.goto(url)
    page.wait_for_selector("#conn-indicator[data-state=live]")
    seen = page.evaluate("() => window.AtriumAppViews.list().map(v => v.toolCallId)")
    box = page.locator("#composer-input")
    box.fill("/call basic.get-time {}")
    page.evaluate("() => { window.__viewReadyAt = 0; window.__callAt = performance.now(); }")
    box.press("Enter")
    page.wait_for_function(NEW_VIEW_READY, arg=seen, polling="raf", timeout=60_000)
    return page.evaluate("() => window.__viewReadyAt - window.__callAt")


def run(server: BenchAtrium, seeded: Seeded, *, samples: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    auto_approve(server)
    urls = [f"{server.app_origin}/w/{seeded.workspace}/t/{t}/" for t in seeded.threads]
    timings: list[float] = []
    started = time.monotonic()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.add_cookies(
                [{"name": "sessionid", "value": seeded.cookies[0], "url": server.app_origin}]
            )
            page = context.new_page()
            page.set_default_timeout(60_000)
            for n, url in enumerate(urls[: WARMUP + samples]):
                elapsed = _sample(page, url)
                if n >= WARMUP:  # the first calls start the server and warm the caches
                    timings.append(elapsed)
        finally:
            browser.close()
    ordered = sorted(timings)
    return {
        "samples": len(timings),
        "warmup": WARMUP,
        "ready_ms": {
            "p50": statistics.median(ordered),
            "p90": ordered[max(0, round(0.9 * len(ordered)) - 1)],
            "min": ordered[0],
            "max": ordered[-1],
        },
        "wall_s": time.monotonic() - started,
    }
