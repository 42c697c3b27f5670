"""Local test servers for the agent loop.

- :class:`FakeLLM` — a real HTTP server on 127.0.0.1 (``http.server`` in a thread) that
  speaks OpenAI Chat Completions or Anthropic Messages streaming SSE with scripted
  responses, and records every request (path, headers, JSON body).
- ``python tests/chat/fake_llm.py mcp`` — a tiny MCP App server ("sentinel") whose tool
  descriptor ``_meta``, result ``_meta``, embedded-resource ``_meta`` and UI resource
  ``_meta`` carry unique sentinel strings: none of them may ever reach a model provider.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOOL_META_SENTINEL = "SENTINEL-TOOL-META-7f3a"
RESULT_META_SENTINEL = "SENTINEL-RESULT-META-91c2"
EMBEDDED_META_SENTINEL = "SENTINEL-EMBEDDED-META-4d5e"
RESOURCE_META_SENTINEL = "SENTINEL-RESOURCE-META-b8e0"
ALL_SENTINELS = (
    TOOL_META_SENTINEL,
    RESULT_META_SENTINEL,
    EMBEDDED_META_SENTINEL,
    RESOURCE_META_SENTINEL,
)
PEEK_TEXT = "peek: the answer is forty-two"
GATE_TIMEOUT = 120.0  # seconds a gated stream waits for its test at most


# ------------------------------------------------------------------------------ responses


@dataclass
class SSE:
    """A streamed 200 answer: each frame is written and flushed, ``delay`` s apart.

    A frame is a dict (sent as ``data: <json>``), an ``(event, dict)`` pair (sent with an
    ``event:`` line), a str (written verbatim — for malformed streams), or a
    ``threading.Event``: a gate the stream waits at until the test sets it (so a test can
    pace a stream on what it has observed, not on the clock).
    """

    frames: list[Any]
    delay: float = 0.0
    delays: dict[int, float] = field(default_factory=dict)  # frame index → pause before it


@dataclass
class Reply:
    """A whole (non-streamed) answer, e.g. an HTTP error."""

    status: int
    body: Any
    content_type: str = "application/json"


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    raw: str


class FakeLLM:
    def __init__(self, kind: str = "openai") -> None:
        self.kind = kind
        self.requests: list[Recorded] = []
        self.script: deque[SSE | Reply] = deque()
        self.lock = threading.Lock()
        self.in_flight = 0  # requests being answered right now…
        self.max_in_flight = 0  # …and the most at once (concurrent model turns)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                with fake.lock:
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    self._answer()
                finally:
                    with fake.lock:
                        fake.in_flight -= 1

            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length).decode("utf-8")
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {}
                with fake.lock:
                    fake.requests.append(
                        Recorded(
                            self.path, {k.lower(): v for k, v in self.headers.items()}, body, raw
                        )
                    )
                    response = fake.script.popleft() if fake.script else None
                if response is None:
                    response = Reply(500, {"error": {"message": "no scripted response left"}})
                if isinstance(response, Reply):
                    payload = (
                        response.body
                        if isinstance(response.body, str)
                        else json.dumps(response.body)
                    )
                    data = payload.encode()
                    self.send_response(response.status)
                    self.send_header("content-type", response.content_type)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.end_headers()
                try:
                    for index, frame in enumerate(response.frames):
                        if isinstance(frame, threading.Event):
                            frame.wait(GATE_TIMEOUT)
                            continue
                        pause = response.delays.get(index, response.delay)
                        if pause:
                            time.sleep(pause)
                        self.wfile.write(_frame(frame).encode())
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def base_url(self) -> str:
        root = f"http://127.0.0.1:{self.port}"
        return f"{root}/v1" if self.kind == "openai" else root

    def push(self, *responses: SSE | Reply) -> None:
        with self.lock:
            self.script.extend(responses)

    def bodies(self) -> list[str]:
        return [r.raw for r in self.requests]

    def start(self) -> FakeLLM:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _frame(frame: Any) -> str:
    if isinstance(frame, str):
        return frame
    if isinstance(frame, tuple):
        event, data = frame
        return f"event: {event}\ndata: {json.dumps(data)}\n\n"
    return f"data: {json.dumps(frame)}\n\n"


# ------------------------------------------------------------------- OpenAI chunk builders


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


USAGE_CHUNK = {
    "id": "chatcmpl-fake",
    "object": "chat.completion.chunk",
    "choices": [],
    "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
}


def openai_text(*pieces: str, delay: float = 0.0, delays: dict[int, float] | None = None) -> SSE:
    frames: list[Any] = [_chunk({"role": "assistant", "content": ""})]
    frames += [_chunk({"content": piece}) for piece in pieces]
    frames += [_chunk({}, "stop"), USAGE_CHUNK, "data: [DONE]\n\n"]
    return SSE(frames, delay=delay, delays=delays or {})


def openai_tool_calls(
    *calls: tuple[str, str, list[Any]], text: tuple[str, ...] = (), delay: float = 0.0
) -> SSE:
    """Tool calls ``(id, name, argument fragments)``; fragments may split anywhere, and a
    ``threading.Event`` among them is a gate (see :class:`SSE`)."""
    frames: list[Any] = [_chunk({"role": "assistant", "content": None})]
    frames += [_chunk({"content": piece}) for piece in text]
    for index, (call_id, name, fragments) in enumerate(calls):
        frames.append(
            _chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        frames += [
            fragment
            if isinstance(fragment, threading.Event)
            else _chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
            for fragment in fragments
        ]
    frames += [_chunk({}, "tool_calls"), USAGE_CHUNK, "data: [DONE]\n\n"]
    return SSE(frames, delay=delay)


# ---------------------------------------------------------------- Anthropic event builders


def _message_start() -> tuple[str, dict[str, Any]]:
    return (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": "fake-claude",
                "stop_reason": None,
                "usage": {"input_tokens": 12, "output_tokens": 1},
            },
        },
    )


def anthropic_text(*pieces: str, delay: float = 0.0) -> SSE:
    frames: list[Any] = [
        _message_start(),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    frames += [
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": piece},
            },
        )
        for piece in pieces
    ]
    frames += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 9},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return SSE(frames, delay=delay)


def anthropic_tool_use(
    call_id: str, name: str, fragments: list[str], text: str = "", delay: float = 0.0
) -> SSE:
    frames: list[Any] = [_message_start()]
    index = 0
    if text:
        frames += [
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": text},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ]
        index = 1
    frames.append(
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
            },
        )
    )
    frames += [
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": fragment},
            },
        )
        for fragment in fragments
    ]
    frames += [
        ("content_block_stop", {"type": "content_block_stop", "index": index}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use"},
                "usage": {"output_tokens": 20},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return SSE(frames, delay=delay)


# ------------------------------------------------------------- the sentinel MCP App server


def run_sentinel_mcp_server() -> None:  # pragma: no cover - runs in a subprocess
    from mcp.server.apps import APP_MIME_TYPE
    from mcp.server.mcpserver import MCPServer
    from mcp.types import (
        CallToolResult,
        EmbeddedResource,
        TextContent,
        TextResourceContents,
        ToolAnnotations,
    )

    # The SDK resolves the tool's (postponed) annotations in this module's globals.
    globals()["CallToolResult"] = CallToolResult
    view_uri = "ui://sentinel/view"
    mcp = MCPServer("sentinel", instructions="Test server: sentinels in every _meta.")

    @mcp.resource(
        view_uri,
        name="sentinel-view",
        mime_type=APP_MIME_TYPE,
        meta={"ui": {"prefersBorder": True}, "sentinel/resource": RESOURCE_META_SENTINEL},
    )
    def view() -> str:
        return "<!doctype html><html><body><p>sentinel view</p></body></html>"

    @mcp.tool(
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        meta={
            "ui": {"resourceUri": view_uri, "visibility": ["model", "app"]},
            "sentinel/tool": TOOL_META_SENTINEL,
        },
    )
    def peek() -> CallToolResult:
        """Peek at the answer."""
        return CallToolResult(
            content=[
                TextContent(type="text", text=PEEK_TEXT),
                EmbeddedResource(
                    type="resource",
                    resource=TextResourceContents(
                        uri="note://sentinel/detail",
                        mime_type="text/plain",
                        text="detail text for everyone",
                        _meta={"sentinel/embedded": EMBEDDED_META_SENTINEL},
                    ),
                ),
            ],
            structured_content={"answer": 42},
            _meta={"sentinel/result": RESULT_META_SENTINEL},
        )

    mcp.run()


if __name__ == "__main__":  # pragma: no cover
    if sys.argv[1:] == ["mcp"]:
        run_sentinel_mcp_server()
    else:
        raise SystemExit("usage: fake_llm.py mcp")
