"""Lifecycle: an MCP App that shows — and records — everything its host sends it.

Its view lists every notification it receives (`tool-input-partial`, `tool-input`,
`tool-result`, `tool-cancelled`, `host-context-changed`, `ui/resource-teardown`) in order,
and draws the plan it is given as the arguments arrive. Hosts (and Atrium's tests) use it to
check the MCP Apps lifecycle: a view mounted when its call starts, partial input while a
model streams the arguments, the cancellation of a call that was stopped or rejected, and
the teardown before a view goes away.

    python examples/lifecycle/server.py                      # stdio
    python examples/lifecycle/server.py --record /tmp/cancelled.jsonl
    python examples/lifecycle/server.py --http --port 8105   # MCP at :8105/mcp
    python examples/lifecycle/server.py --sse --port 8105    # SSE at :8105/sse

`--record PATH` (or `LIFECYCLE_RECORD`): every `notifications/cancelled` the server receives
for a running `slow_task` is appended to PATH as one JSON line, so a test can check that
the host really told the server.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Annotated, Any, Final

import anyio
from mcp.server.apps import Apps, ResourcePermissions
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

RECORDER_URI: Final = "ui://lifecycle/recorder"
VOICE_URI: Final = "ui://lifecycle/voice"
APP_HTML: Final = Path(__file__).with_name("app.html").read_text(encoding="utf-8")
MAX_SLOW_SECONDS: Final = 600.0
MAX_TRACKED: Final = 100
DEFAULT_HTTP_PORT: Final = 8105


def _text_result(text: str, structured: dict[str, Any]) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured
    )


def create_server(record_path: str | None = None) -> MCPServer:
    running: dict[str, tuple[str, float]] = {}  # request id → (label, started) of slow tasks

    async def record_cancellations(ctx: Any, call_next: Any) -> Any:
        """Every notifications/cancelled naming a running slow_task, appended to the record
        (the SDK then cancels the task itself)."""
        if ctx.method == "notifications/cancelled" and record_path:
            params = ctx.params or {}
            task = running.pop(str(params.get("requestId")), None)
            if task is not None:
                _record(record_path, params, task)
        return await call_next(ctx)

    apps = Apps()
    apps.add_html_resource(
        RECORDER_URI,
        APP_HTML,
        name="lifecycle-recorder",
        title="Lifecycle recorder",
        description="Shows a plan and every lifecycle notification the host sends.",
    )
    apps.add_html_resource(
        VOICE_URI,
        APP_HTML,
        name="lifecycle-voice",
        title="Voice note",
        description="The recorder, asking for the microphone (a permission prompt to answer).",
        permissions=ResourcePermissions(microphone={}),
    )
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @apps.tool(
        resource_uri=RECORDER_URI,
        visibility=["model", "app"],
        title="Show a plan",
        annotations=read_only,
    )
    def show_plan(
        title: Annotated[str, Field(description="What the plan is for")],
        steps: Annotated[list[str], Field(description="The steps, in order")],
    ) -> CallToolResult:
        """Show a short plan (a title and its steps) in an interactive view."""
        summary = f"Plan '{title}' with {len(steps)} step{'s' if len(steps) != 1 else ''}."
        return _text_result(summary, {"title": title, "steps": steps})

    @apps.tool(
        resource_uri=RECORDER_URI,
        visibility=["model", "app"],
        title="Run a slow task",
        annotations=read_only,
    )
    async def slow_task(
        ctx: Context,
        label: Annotated[str, Field(description="A name for the task")] = "slow task",
        seconds: Annotated[float, Field(ge=0, le=MAX_SLOW_SECONDS)] = 120.0,
    ) -> CallToolResult:
        """Work for a while (reporting progress every second) unless cancelled."""
        # The SDK cancels this handler before the notification reaches the middleware:
        # a cancelled task stays listed until its notification is recorded.
        while len(running) >= MAX_TRACKED:
            running.pop(next(iter(running)))
        running[str(ctx.request_id)] = (label, time.monotonic())
        elapsed = 0
        while elapsed < seconds:
            await ctx.report_progress(elapsed, seconds, f"{label}: {elapsed:.0f} s")
            await anyio.sleep(min(1.0, seconds - elapsed))
            elapsed += 1
        running.pop(str(ctx.request_id), None)
        return _text_result(f"{label} finished after {seconds:g} s.", {"label": label})

    @apps.tool(
        resource_uri=RECORDER_URI,
        visibility=["model", "app"],
        title="Make a risky change",
        annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False),
    )
    def risky_change(
        target: Annotated[str, Field(description="What to change")],
    ) -> CallToolResult:
        """A destructive change: hosts ask a person before it runs."""
        return _text_result(f"Changed {target}.", {"target": target})

    @apps.tool(
        resource_uri=VOICE_URI,
        visibility=["model", "app"],
        title="Record a voice note",
        annotations=read_only,
    )
    def voice_note(
        topic: Annotated[str, Field(description="What the note is about")] = "a note",
    ) -> CallToolResult:
        """Open the voice-note view (it asks for the microphone)."""
        return _text_result(f"Voice note about {topic}: ready to record.", {"topic": topic})

    return MCPServer(
        "lifecycle",
        title="Lifecycle recorder",
        version="1.0.0",
        instructions="show_plan shows a plan; slow_task works until cancelled.",
        extensions=[apps],
        middleware=[record_cancellations],
    )


def _record(path: str, params: Any, task: tuple[str, float]) -> None:
    label, started = task
    line = {
        "method": "notifications/cancelled",
        "tool": "slow_task",
        "requestId": str(params.get("requestId")),
        "reason": str(params.get("reason") or ""),
        "label": label,
        "afterSeconds": round(time.monotonic() - started, 3),
    }
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Lifecycle recorder MCP App server.")
    parser.add_argument("--record", default=os.environ.get("LIFECYCLE_RECORD"))
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp")
    transport.add_argument("--sse", action="store_true", help="serve the legacy SSE transport")
    parser.add_argument("--host", default="127.0.0.1", help="MCP HTTP bind address")
    parser.add_argument("--port", type=int, default=DEFAULT_HTTP_PORT, help="MCP HTTP port")
    args = parser.parse_args(argv)
    server = create_server(args.record)
    try:
        if args.http:
            server.run("streamable-http", host=args.host, port=args.port)
        elif args.sse:
            server.run("sse", host=args.host, port=args.port)
        else:
            server.run()
    except KeyboardInterrupt:
        pass  # Ctrl-C: the HTTP server has already shut down cleanly


if __name__ == "__main__":
    main()
