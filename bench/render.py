"""Server render of a 500-message thread with 100 views (DESIGN §9).

Seeds 500 Markdown messages and 100 finished board tool calls with a view, then GETs the
thread page over loopback (session cookie) repeatedly: the server time is the request's
wall time (loopback HTTP adds well under a millisecond). Structural checks: the page holds
no <iframe> (app views mount lazily from static/chat/app_views/lazy_open.js, which watches the viewport with
an IntersectionObserver) and no view HTML (documents are fetched by content hash).
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from .harness import ROOT, BenchAtrium, Seeded, summary

SEED_THREAD = r"""
import json, sys
from pathlib import Path
from django.contrib.auth import get_user_model
from chat.models import Message, Thread, ToolCall
from mcp_bridge.services.ui_resources import ui_resource_store
from mcp_bridge.models import McpServer
from mcp_bridge.normalize import build_sanitized_tool_result, normalize_tool_result

spec = json.loads(sys.stdin.read())
thread = Thread.objects.get(pk=spec["thread"])
server = McpServer.objects.get(slug="board")
owner = get_user_model().objects.get(username="bench-owner")
html = Path(spec["html"]).read_text()
resource = ui_resource_store(
    server=server, uri="ui://board/app",
    read_result={"contents": [{"uri": "ui://board/app", "mimeType": "text/html;profile=mcp-app", "text": html}]},
)
board = {"title": "Team board", "version": 7, "total": 9, "columns": [
    {"id": c, "title": c.title(), "items": [
        {"id": f"ATR-{c[:2]}{i}", "title": f"Task {i} in {c}", "column": c, "tag": "ui" if i % 2 else None,
         "created_at": "2026-11-01T10:00:00Z"} for i in range(3)]}
    for c in ("todo", "doing", "done")]}
raw = {"content": [{"type": "text", "text": "Team board: 9 items (version 7)."}],
       "structuredContent": board, "_meta": {"board/version": 7}}
messages = []
for n in range(spec["messages"]):
    messages.append(Message(thread=thread, role="user" if n % 3 else "assistant", author=owner,
        text=f"Message **{n}**: a _short_ note with `code`, a [link](https://example.com/{n}) and a list:\n\n- one\n- two\n"))
Message.objects.bulk_create(messages)
calls = []
for n in range(spec["views"]):
    sanitized = build_sanitized_tool_result(normalize_tool_result(raw), tool_name="list_items",
        tool_call_id=str(n), server="board")
    calls.append(ToolCall(thread=thread, server=server, tool_name="list_items", arguments={},
        status="success", origin="user", requested_by=owner, result=sanitized, ui_resource=resource))
ToolCall.objects.bulk_create(calls)
print("OK")
"""


def run(server: BenchAtrium, seeded: Seeded, *, requests: int = 20) -> dict[str, Any]:
    thread = seeded.threads[-1]
    html = ROOT / "examples" / "board" / "app.html"
    server.manage(
        "shell",
        "-c",
        SEED_THREAD,
        input=json.dumps({"thread": thread, "messages": 500, "views": 100, "html": str(html)}),
    )
    url = f"http://127.0.0.1:{server.port}/w/{seeded.workspace}/t/{thread}/"
    timings: list[float] = []
    cold = 0.0
    with httpx.Client(
        headers={"Host": f"localhost:{server.port}"},
        cookies={"sessionid": seeded.cookies[0]},
        timeout=30,
    ) as client:
        page = ""
        for n in range(requests + 3):
            started = time.perf_counter()
            response = client.get(url)
            elapsed = (time.perf_counter() - started) * 1000
            response.raise_for_status()
            page = response.text
            if n == 0:
                cold = elapsed  # first render after the seed: nothing cached yet
            if n >= 3:
                timings.append(elapsed)
    lazy_open_js = (ROOT / "static" / "chat" / "app_views" / "lazy_open.js").read_text()
    return {
        "messages": 500,
        "views": 100,
        "render_ms": summary(timings),
        "cold_render_ms": cold,
        "page_bytes": len(page.encode()),
        "iframes_in_page": page.lower().count("<iframe"),
        "view_html_in_page": "<!doctype html" in page.lower().split("thread-snapshot", 1)[-1],
        "lazy_mount": "IntersectionObserver" in lazy_open_js,
    }
