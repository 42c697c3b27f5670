"""Long lines of the stdio transport: string literals taken out as text while they arrive
(``LiteralExtractor``), so a 50 MB base64 payload is held once, never as bytes and text.

Equivalence first (whatever the chunking, the parsed message is what a JSON parser makes
of the whole line), then memory (peak RSS of this process, Linux), then the no-op that
unpins the SDK's last message.
"""

from __future__ import annotations

import base64
import gc
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client.stdio import StdioServerParameters
from mcp.shared.message import SessionMessage
from pydantic_core import from_json

from mcp_bridge import stdio_transport
from mcp_bridge.stdio_transport import (
    LineSplitter,
    LiteralExtractor,
    MalformedMessage,
    SpilledLine,
    parse_message,
    stdio_client,
)

MIB = 1024 * 1024


def split(line: bytes, chunk: int, **options: Any) -> list[Any]:
    splitter = LineSplitter(**options)
    out = []
    data = line + b"\n"
    for start in range(0, len(data), chunk):
        splitter.feed(data[start : start + chunk])
        while (item := splitter.next_line()) is not None:
            out.append(item)
    return out


def parsed(item: bytes | SpilledLine) -> Any:
    if isinstance(item, SpilledLine):
        return item.restore(from_json(item.skeleton))
    return from_json(item)


# ---- equivalence ------------------------------------------------------------------------

strings = st.one_of(
    st.text(
        alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=", max_size=300
    ),
    st.text(max_size=80),  # anything: quotes, backslashes, control characters, non-ASCII
    st.builds(lambda n, c: c * n, st.integers(0, 400), st.sampled_from(['"', "\\", "é", "x"])),
)
values = st.recursive(
    st.none() | st.booleans() | st.integers() | strings,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(strings, children, max_size=5)
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    value=values,
    ensure_ascii=st.booleans(),
    escape_slashes=st.booleans(),
    chunk=st.sampled_from([1, 2, 3, 7, 64, 4096]),
    scan_over=st.sampled_from([0, 16, 1 << 20]),
    literal_threshold=st.sampled_from([1, 5, 64]),
)
def test_any_chunking_parses_to_what_the_whole_line_parses_to(
    value: Any,
    ensure_ascii: bool,
    escape_slashes: bool,
    chunk: int,
    scan_over: int,
    literal_threshold: int,
) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"value": value}}
    raw = json.dumps(message, ensure_ascii=ensure_ascii).encode()
    if escape_slashes:  # what PHP and some Java encoders do: legal JSON
        raw = raw.replace(b"/", b"\\/")
    (item,) = split(raw, chunk, scan_over=scan_over, literal_threshold=literal_threshold)
    assert parsed(item) == json.loads(raw) == message
    result = parse_message(item)
    assert isinstance(result, SessionMessage)
    assert result.message.result == {"value": value}


def test_long_base64_literals_are_taken_out_and_put_back() -> None:
    payload = base64.b64encode(os.urandom(300_000)).decode()
    message = {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {
            "content": [
                {"type": "text", "text": 'a "quoted" \\ text'},
                {"type": "image", "mimeType": "image/png", "data": payload},
                {"type": "resource", "resource": {"uri": "x:y", "blob": payload[::-1]}},
            ],
            "structuredContent": {payload[:200_000]: "a long key"},
        },
    }
    line = json.dumps(message).encode()
    (item,) = split(line, 65536)
    assert isinstance(item, SpilledLine)
    assert len(item.values) == 3 and len(item) == len(line)
    assert len(item.skeleton) < 1000  # the payloads are not in it
    result = parse_message(item)
    assert isinstance(result, SessionMessage)
    assert result.message.result == message["result"]
    data = result.message.result["content"][1]["data"]
    assert data == payload and type(data) is str and data.isascii()


def test_a_marker_a_server_writes_is_just_text() -> None:
    """Markers carry 128 random bits; another line's marker means nothing here."""
    big = "A" * 400_000
    first = split(json.dumps({"a": big, "b": "x"}).encode(), 4096)[0]
    forged = json.dumps({"a": big, "b": first.prefix + "0"}).encode()
    (item,) = split(forged, 4096)
    assert parsed(item) == {"a": big, "b": first.prefix + "0"}


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc": "2.0", "id": 1, "result": {"a": "' + b"x" * 300_000,  # ends inside
        b'{"jsonrpc": "2.0", "id": 1, "result": {"a": "' + b"x" * 300_000 + b'" "b"}}',
        b'{"jsonrpc": "2.0", "id": 1, "result": {"a": "' + b"x" * 300_000 + b"\\",
        b'{"jsonrpc": "2.0", "id": 1, "result": {"a": "' + b"x" * 300_000 + b'\xff"}}',
    ],
)
def test_broken_long_lines_are_malformed_messages(line: bytes) -> None:
    (item,) = split(line, 4096)
    result = parse_message(item)
    assert isinstance(result, MalformedMessage)
    assert result.size == len(line)
    assert "invalid JSON" in str(result)


def test_non_ascii_and_escaped_literals_stay_bytes_for_the_parser() -> None:
    text = "é" * 100_000 + "\n" + "x" * 100_000
    (item,) = split(json.dumps({"t": text}, ensure_ascii=False).encode(), 4096)
    assert parsed(item) == {"t": text}
    (item,) = split(json.dumps({"t": "x" * 100_000 + "é"}, ensure_ascii=False).encode(), 4096)
    assert parsed(item) == {"t": "x" * 100_000 + "é"}


def test_random_chunk_boundaries_against_a_long_mixed_line() -> None:
    rng = random.Random(7)
    pieces = []
    for index in range(40):
        kind = index % 4
        if kind == 0:
            pieces.append(base64.b64encode(rng.randbytes(rng.randrange(1, 200_000))).decode())
        elif kind == 1:
            pieces.append('q"\\' * rng.randrange(0, 5000))
        elif kind == 2:
            pieces.append("ü€" * rng.randrange(0, 3000))
        else:
            pieces.append(rng.randrange(10**9))
    line = json.dumps({"jsonrpc": "2.0", "id": 9, "result": {"p": pieces}}).encode()
    for _ in range(10):
        splitter = LineSplitter(scan_over=1024, literal_threshold=1024)
        position, data = 0, line + b"\n"
        out: list[Any] = []
        while position < len(data):
            step = rng.choice([1, 3, 100, 4096, 65536, 300_000])
            splitter.feed(data[position : position + step])
            position += step
            while (item := splitter.next_line()) is not None:
                out.append(item)
        assert len(out) == 1 and parsed(out[0]) == {
            "jsonrpc": "2.0",
            "id": 9,
            "result": {"p": pieces},
        }


# ---- memory ------------------------------------------------------------------------------


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="Linux /proc only")
def test_a_50_mib_payload_line_is_held_once() -> None:
    """Fed in pipe-sized chunks that are dropped as they are consumed, as the reader does:
    the peak is the payload's text once (the old framing held bytes, then bytes and text)."""
    decoded = 50 * MIB
    head = b'{"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "image", "data": "'
    tail = b'", "mimeType": "image/png"}]}}\n'
    block = base64.b64encode(os.urandom(96 * 1024))  # 128 KiB of base64 per chunk
    count = decoded // (96 * 1024)
    gc.collect()
    before = _status("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    splitter = LineSplitter()
    splitter.feed(head)
    for index in range(count):
        splitter.feed(block[:-1] + bytes([65 + index % 26]))  # a fresh bytes each time
    splitter.feed(tail)
    item = splitter.next_line()
    message = parse_message(item)
    del item
    peak = _status("VmHWM") - before
    assert isinstance(message, SessionMessage)
    data = message.message.result["content"][0]["data"]
    assert len(data) == count * len(block)
    wire = len(data)
    assert peak < wire + 12 * MIB, f"peak {peak / MIB:.0f} MiB for {wire / MIB:.0f} MiB of text"


# ---- the session's last message ---------------------------------------------------------


@pytest.mark.slow
async def test_a_large_message_is_followed_by_a_response_to_no_request(tmp_path: Path) -> None:
    """The SDK's read loop keeps its last item until the next one: a no-op follows a large
    message so that a 50 MB result is not pinned until the server next speaks."""
    size = stdio_transport.RELEASE_AFTER_BYTES + 10
    source = (
        "import json, sys\n"
        f"text = 'x' * {size}\n"
        "for i, t in enumerate([text, 'small']):\n"
        "    m = {'jsonrpc': '2.0', 'method': 'n', 'params': {'t': t}}\n"
        "    sys.stdout.write(json.dumps(m) + '\\n')\n"
        "sys.stdout.flush()\n"
    )
    params = StdioServerParameters(command=sys.executable, args=["-c", source])
    items = []
    async with stdio_client(params) as (read_stream, _write_stream):
        with anyio.fail_after(20):
            async for item in read_stream:
                items.append(item)
    kinds = [type(item.message).__name__ for item in items]
    assert kinds == ["JSONRPCNotification", "JSONRPCResponse", "JSONRPCNotification"]
    release = items[1].message
    assert isinstance(release, types.JSONRPCResponse)
    assert release.id == "atrium-stdio-release" and release.result == {}
    assert items[0].message.params["t"] == "x" * size
    assert items[2].message.params["t"] == "small"


def test_extractor_output_is_bytes_when_nothing_was_long() -> None:
    extractor = LiteralExtractor(literal_threshold=1000)
    for piece in (b'{"a": "', b"short", b'", "b": [1, 2]}'):
        extractor.feed(piece)
    assert extractor.finish() == b'{"a": "short", "b": [1, 2]}'
