"""Atrium's own stdio transport (``mcp_bridge.stdio_transport``): framing, parsing, processes.

Three layers: the pure line splitter and parser; the transport against tiny scripted
processes (exact bytes on stdout); and the ``ConnectionManager`` over it against real
servers — ``examples/media/server.py`` for the 50 MiB result, and
``tests/fixtures/mcp_servers/raw_stdio.py`` for garbage, dribbled and truncated output.
"""

from __future__ import annotations

import base64
import json
import math
import os
import sys
import textwrap
import time
import tracemalloc
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.stdio import StdioServerParameters
from mcp.shared.message import SessionMessage

from mcp_bridge import spooled_media
from mcp_bridge.connections import ConnectionManager
from mcp_bridge.errors import ServerCrashed
from mcp_bridge.server_spec import ServerSpec
from mcp_bridge.stdio_transport import (
    LineSplitter,
    MalformedMessage,
    OversizedMessage,
    TruncatedMessage,
    parse_message,
    stdio_client,
)

REPO = Path(__file__).resolve().parents[2]
MEDIA_SERVER = REPO / "examples" / "media" / "server.py"
RAW_SERVER = REPO / "tests" / "fixtures" / "mcp_servers" / "raw_stdio.py"
MIB = 1024 * 1024


def drain(splitter: LineSplitter) -> list[bytes | OversizedMessage]:
    lines: list[bytes | OversizedMessage] = []
    while (line := splitter.next_line()) is not None:
        lines.append(line)
    return lines


def feed_in_chunks(splitter: LineSplitter, data: bytes, size: int) -> list[Any]:
    out: list[Any] = []
    for start in range(0, len(data), size):
        splitter.feed(data[start : start + size])
        out.extend(drain(splitter))
    return out


def notification(index: int) -> bytes:
    message = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": index}}
    return json.dumps(message).encode() + b"\n"


# ---- the line splitter ---------------------------------------------------------------------


@pytest.mark.parametrize("chunk_size", [1, 7, 4096, 1 << 20])
def test_lines_split_across_chunks(chunk_size: int) -> None:
    lines = [b"a", b'{"x": 1}', b"y" * 10_000, b"z" * 3, "é ü".encode()]
    stream = b"\n".join(lines) + b"\n"
    assert feed_in_chunks(LineSplitter(), stream, chunk_size) == lines


def test_big_line_in_small_chunks_is_linear() -> None:
    """50 MiB in 64 KiB chunks: the SDK's join-per-chunk reader takes minutes here."""
    line = b"x" * (50 * MIB)
    splitter = LineSplitter()
    started = time.perf_counter()
    out = feed_in_chunks(splitter, line + b"\n{}\n", 64 * 1024)
    elapsed = time.perf_counter() - started
    assert [len(item) for item in out] == [len(line), 2]
    assert elapsed < 2.0, f"framing 50 MiB took {elapsed:.2f} s"


def test_many_small_lines_in_one_chunk() -> None:
    stream = b"".join(notification(i) for i in range(50_000))
    splitter = LineSplitter()
    splitter.feed(stream)
    lines = drain(splitter)
    assert len(lines) == 50_000
    assert lines[-1] == notification(49_999).rstrip(b"\n")
    assert splitter.pending_bytes == 0


def test_blank_lines_are_skipped_and_crlf_is_kept_for_the_parser() -> None:
    splitter = LineSplitter()
    splitter.feed(b"\n \n\r\n{}\r\n\t\n")
    assert drain(splitter) == [b"{}\r"]  # JSON allows the trailing \r as whitespace
    assert isinstance(parse_message(b"{}\r"), MalformedMessage)  # {} is not JSON-RPC, though


def test_oversized_lines_are_dropped_and_the_stream_continues() -> None:
    splitter = LineSplitter(max_line_bytes=100)
    # Over the limit before its newline arrives: reported at once, the rest discarded.
    out = feed_in_chunks(splitter, b"a" * 250 + b"\nok\n", 60)
    assert [type(item) for item in out] == [OversizedMessage, bytes]
    assert out[1] == b"ok"
    # Over the limit within one chunk.
    splitter.feed(b"b" * 101 + b"\nfine\n")
    out = drain(splitter)
    assert isinstance(out[0], OversizedMessage) and out[1] == b"fine"
    assert "larger than 100 bytes" in str(out[0])


def test_output_ending_inside_a_line_is_reported() -> None:
    splitter = LineSplitter()
    splitter.feed(b'{"jsonrpc": "2.0"}\n{"jsonrpc": "2.0", "id": 1, "res')
    assert drain(splitter) == [b'{"jsonrpc": "2.0"}']
    truncated = splitter.finish()
    assert isinstance(truncated, TruncatedMessage) and truncated.size == 32
    assert splitter.finish() is None


# ---- parsing -----------------------------------------------------------------------------


def test_parse_message() -> None:
    request = parse_message(b'{"jsonrpc": "2.0", "id": 7, "method": "ping"}')
    assert isinstance(request, SessionMessage)
    assert isinstance(request.message, types.JSONRPCRequest) and request.message.id == 7
    response = parse_message(b'{"jsonrpc": "2.0", "id": "a", "result": {"k": [1]}}')
    assert isinstance(response, SessionMessage)
    assert isinstance(response.message, types.JSONRPCResponse)
    assert response.message.result == {"k": [1]}
    error = parse_message(b'{"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "no"}}')
    assert isinstance(error, SessionMessage) and isinstance(error.message, types.JSONRPCError)

    for garbage in (b"not json", b'{"jsonrpc": "2.0", "id": 1}', b"[1, 2]", b"\xff\xfe{}"):
        item = parse_message(garbage)
        assert isinstance(item, MalformedMessage), garbage  # a value, never raised
        assert item.size == len(garbage)
    assert "starting 'not json'" in str(parse_message(b"not json"))


# ---- the transport against scripted processes -----------------------------------------------


def script(source: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-c", textwrap.dedent(source)])


async def receive_all(read_stream: Any) -> list[Any]:
    items = []
    with anyio.fail_after(20):
        async for item in read_stream:
            items.append(item)
    return items


@pytest.mark.slow
async def test_burst_garbage_and_cut_off_output(tmp_path: Path) -> None:
    """Many lines in one write, garbage between them, and output ending inside a line."""
    params = script(
        """
        import json, sys
        out = sys.stdout.buffer
        line = lambda i: json.dumps({"jsonrpc": "2.0", "method": "n", "params": {"i": i}})
        out.write(b"garbage\\n" + line(-1).encode() + b"\\n")
        out.write("\\n".join(line(i) for i in range(20000)).encode() + b"\\n")
        out.write(b'{"jsonrpc": "2.0", "id": 1, "result": {"cut')
        out.flush()
        sys.stderr.write("bye from the script\\n")
        """
    )
    errlog_path = tmp_path / "stderr.log"
    with errlog_path.open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read_stream, _write_stream):
            items = await receive_all(read_stream)
    assert isinstance(items[0], MalformedMessage)
    messages = [item.message for item in items[1:-1]]
    assert all(isinstance(m, types.JSONRPCNotification) for m in messages)
    assert [m.params["i"] for m in messages] == list(range(-1, 20000))  # type: ignore[index]
    assert isinstance(items[-1], TruncatedMessage)
    assert "bye from the script" in errlog_path.read_text()


@pytest.mark.slow
async def test_written_messages_reach_stdin() -> None:
    """``cat`` echoes our requests back; it exits when we close its stdin."""
    params = StdioServerParameters(command="cat")
    started = time.monotonic()
    async with stdio_client(params) as (read_stream, write_stream):
        for request_id in range(3):
            request = types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="ping")
            await write_stream.send(SessionMessage(request))
            with anyio.fail_after(5):
                echoed = await read_stream.receive()
            assert isinstance(echoed, SessionMessage) and echoed.message == request
    assert time.monotonic() - started < 2  # no grace period needed: cat left on stdin EOF


@pytest.mark.slow
async def test_exit_terminates_a_process_that_ignores_stdin() -> None:
    params = script("import os, time; print(os.getpid(), flush=True); time.sleep(60)")
    async with stdio_client(params) as (read_stream, _write_stream):
        with anyio.fail_after(10):
            item = await read_stream.receive()
        assert isinstance(item, MalformedMessage)  # the pid line is not JSON-RPC
        pid = int(item.preview)
        started = time.monotonic()
    # Stdin closed, 2 s grace, then SIGTERM to its process group.
    assert time.monotonic() - started < 5
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# ---- through the connection manager ------------------------------------------------------


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[ConnectionManager]:
    async with ConnectionManager(stderr_dir=tmp_path / "stderr") as manager:
        yield manager


def raw_spec(**overrides: Any) -> ServerSpec:
    options: dict[str, Any] = {
        "key": f"raw-{uuid.uuid4().hex[:8]}",
        "name": "raw",
        "command": sys.executable,
        "args": (str(RAW_SERVER),),
        "mode": "legacy",
        "call_timeout": 20,
        "connect_timeout": 20,
    }
    options.update(overrides)
    return ServerSpec(**options)


def text_of(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result["content"])


@pytest.mark.slow
async def test_50_mib_result_over_stdio(tmp_path: Path) -> None:
    """DESIGN §9: a 50 MB video result arrives in seconds, streamed to a spool file as it
    comes: the message carries a marker, the process holds O(chunk) of the payload."""
    spec = ServerSpec(
        key=f"media-{uuid.uuid4().hex[:8]}",
        name="media",
        command=sys.executable,
        args=(str(MEDIA_SERVER),),
        call_timeout=60,
        connect_timeout=30,
    )
    spool = tmp_path / "spool"
    async with ConnectionManager(stderr_dir=tmp_path / "stderr", spool_dir=spool) as manager:
        await manager.call_tool(spec, "get_large", {"megabytes": 0.1})  # process up
        wire_size = 4 * math.ceil(50 * MIB / 3)  # base64 of 50 MiB

        started = time.perf_counter()
        result = await manager.call_tool(spec, "get_large", {"megabytes": 50})
        elapsed = time.perf_counter() - started
        literal = spooled_media.claim(result["content"][1]["resource"]["blob"])
        assert literal is not None and literal.path.parent == spool
        assert literal.length == wire_size == literal.path.stat().st_size
        assert base64.b64decode(literal.path.read_bytes()[:1024])[:4] == b"RIFF"
        assert literal.decoded_size() == 50 * MIB
        literal.discard()
        del result

        # Python-level peak of a second call: chunks, never the payload (was the payload's
        # text once, built in place through the C API).
        tracemalloc.start()
        try:
            result = await manager.call_tool(spec, "get_large", {"megabytes": 50})
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        literal = spooled_media.claim(result["content"][1]["resource"]["blob"])
        assert literal is not None
        literal.discard()
    print(f"\n50 MiB get_large over stdio: {elapsed:.2f} s, traced peak {peak / MIB:.1f} MiB")
    assert elapsed < 10, f"50 MiB over stdio took {elapsed:.1f} s"
    assert peak < 8 * MIB, f"peak {peak / MIB:.1f} MiB for {wire_size / MIB:.0f} MiB"
    assert list(spool.iterdir()) == []


@pytest.mark.slow
async def test_malformed_lines_do_not_end_the_session(manager: ConnectionManager) -> None:
    spec = raw_spec()
    assert text_of(await manager.call_tool(spec, "garbled")) == "after garbage"
    assert text_of(await manager.call_tool(spec, "echo", {"text": "still here"})) == "still here"
    assert manager.health(spec)["state"] == "connected"


@pytest.mark.slow
async def test_big_answer_dribbled_in_pieces_and_a_burst(manager: ConnectionManager) -> None:
    spec = raw_spec()
    size = 3 * MIB
    result = await manager.call_tool(
        spec, "big_in_pieces", {"size": size, "pieces": 300, "pause": 0.001}
    )
    assert text_of(result) == "x" * size
    burst = await manager.call_tool(spec, "burst", {"count": 5000})
    assert text_of(burst) == "sent 5000"


@pytest.mark.slow
async def test_exit_in_the_middle_of_a_message(manager: ConnectionManager) -> None:
    spec = raw_spec()
    await manager.call_tool(spec, "echo", {"text": "up"})
    with pytest.raises(ServerCrashed) as caught:
        await manager.call_tool(spec, "die_mid_message")
    assert "exited during tools/call 'die_mid_message'" in caught.value.details["reason"]
    # The next call starts a fresh process.
    assert text_of(await manager.call_tool(spec, "echo", {"text": "again"})) == "again"
