"""Long lines of the stdio transport: long string literals streamed into spool files while
they arrive (``LiteralExtractor``), so a 50 MB base64 payload is never held in memory.

Equivalence first (whatever the chunking, the parsed message is what a JSON parser makes
of the whole line, media fields behind markers only the host can claim), then the spool
files' life (claimed once, removed when the line fails), then memory (peak RSS of this
process, Linux), then the no-op that unpins the SDK's last message.
"""

from __future__ import annotations

import base64
import gc
import json
import os
import random
import sys
import tempfile
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

from mcp_bridge import spooled_media, stdio_transport
from mcp_bridge.normalize import normalize_tool_result
from mcp_bridge.stdio_transport import (
    LineSplitter,
    LiteralExtractor,
    MalformedMessage,
    SpilledLine,
    parse_message,
    stdio_client,
)
from tests.live import memory_kib, reset_peak_memory

MIB = 1024 * 1024
# One directory for the module (hypothesis runs many examples per test function).
SPOOL = Path(tempfile.mkdtemp(prefix="atrium-spool-test-"))


def split(line: bytes, chunk: int, **options: Any) -> list[Any]:
    options.setdefault("spool_dir", SPOOL)
    splitter = LineSplitter(**options)
    out = []
    data = line + b"\n"
    for start in range(0, len(data), chunk):
        splitter.feed(data[start : start + chunk])
        while (item := splitter.next_line()) is not None:
            out.append(item)
    return out


def parsed(item: bytes | SpilledLine) -> Any:
    """The tree the host works with, media markers claimed and read back."""
    if not isinstance(item, SpilledLine):
        return from_json(item)
    tree, registered = item.resolve(from_json(item.skeleton))
    item.discard()
    for holder, key in stdio_transport.tool_result_media_fields(tree):
        if holder[key] in registered:
            literal = spooled_media.claim(holder[key])
            holder[key] = literal.read_text()
            literal.discard()
    return tree


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
    options = {"scan_over": scan_over, "literal_threshold": literal_threshold}
    (item,) = split(raw, chunk, **options)
    assert parsed(item) == json.loads(raw) == message
    (item,) = split(raw, chunk, **options)  # parsing takes the spool files over
    result = parse_message(item)
    assert isinstance(result, SessionMessage)
    assert result.message.result == {"value": value}


def test_long_base64_literals_go_to_spool_files_behind_markers() -> None:
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
    before = set(SPOOL.iterdir())
    (item,) = split(line, 65536)
    assert isinstance(item, SpilledLine)
    assert len(item.values) == 3 and len(item) == len(line)
    assert len(item.skeleton) < 1000  # the payloads are not in it
    assert len(set(SPOOL.iterdir()) - before) == 3
    result = parse_message(item)
    assert isinstance(result, SessionMessage)
    content = result.message.result["content"]
    # Not a media field: read back as text, its file gone.
    assert result.message.result["structuredContent"] == {payload[:200_000]: "a long key"}
    assert content[0]["text"] == 'a "quoted" \\ text'
    image, blob = content[1]["data"], content[2]["resource"]["blob"]
    assert spooled_media.is_marker(image) and spooled_media.is_marker(blob)
    assert len(set(SPOOL.iterdir()) - before) == 2
    literal = spooled_media.claim(image)
    assert literal is not None and literal.read_text() == payload
    assert literal.decoded_size() == 300_000
    assert spooled_media.claim(image) is None  # once
    literal.discard()
    other = spooled_media.claim(blob)
    assert other is not None and other.read_text() == payload[::-1]
    other.discard()
    assert set(SPOOL.iterdir()) == before


def test_only_the_host_resolves_markers_and_a_forged_one_is_invalid_base64() -> None:
    """A server that writes a marker (say, one that leaked to it) names no file: the marker
    is resolved through this process's registry, once, and a forged one is just text."""
    payload = base64.b64encode(os.urandom(300_000)).decode()
    first = parse_message(
        split(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "result": {
                        "content": [{"type": "audio", "mimeType": "audio/wav", "data": payload}]
                    },
                }
            ).encode(),
            4096,
        )[0]
    )
    marker = first.message.result["content"][0]["data"]
    literal = spooled_media.claim(marker)
    assert literal is not None
    literal.discard()
    staged: list[Any] = []
    for forged in (marker, spooled_media.MARKER_PREFIX + "0" * 32, str(literal.path)):
        result = normalize_tool_result(
            {"content": [{"type": "audio", "mimeType": "audio/wav", "data": forged}]},
            stage=lambda payload: staged.append(payload) or {"status": "staged"},
            claim_spooled=spooled_media.claim,
        )
        assert not staged
        assert [part["code"] for part in result.parts] == ["invalid_base64"]


def test_a_spooled_payload_is_staged_as_its_file_and_a_small_one_decoded() -> None:
    big = base64.b64encode(b"RIFF" + os.urandom(2 * MIB)).decode()
    small = base64.b64encode(b"\x89PNG\r\n\x1a\n" + os.urandom(100_000)).decode()
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "content": [
                {"type": "audio", "mimeType": "audio/wav", "data": big},
                {"type": "image", "mimeType": "image/png", "data": small},
            ]
        },
    }
    (item,) = split(json.dumps(message).encode(), 65536)
    raw = parse_message(item).message.result
    staged: list[Any] = []
    result = normalize_tool_result(
        raw,
        stage=lambda payload: staged.append(payload) or {"status": "staged"},
        inline_limit=64,
        defer_decode_over=MIB,
        claim_spooled=spooled_media.claim,
    )
    assert [p.size for p in staged] == [2 * MIB + 4, 100_008]
    assert staged[0].spooled is not None and staged[0].data is None
    assert staged[0].spooled.path.read_text() == big
    assert staged[1].spooled is None and staged[1].data == base64.b64decode(small)
    assert [part.get("asset") for part in result.parts] == [{"status": "staged"}] * 2
    staged[0].spooled.discard()


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "image", "data": "'
        + b"QUJD" * 100_000
        + b'"}], "extra": }',  # invalid JSON after the literal
        b'{"jsonrpc": "2.0", "result": {"content": [{"type": "image", "data": "'
        + b"QUJD" * 100_000
        + b'"}]}}',  # no id: not JSON-RPC
    ],
)
def test_a_line_that_is_no_message_leaves_no_spool_file(line: bytes) -> None:
    before = set(SPOOL.iterdir())
    (item,) = split(line, 4096)
    assert isinstance(item, SpilledLine)
    assert isinstance(parse_message(item), MalformedMessage)
    assert set(SPOOL.iterdir()) == before


def test_an_oversized_or_cut_off_line_leaves_no_spool_file() -> None:
    before = set(SPOOL.iterdir())
    splitter = LineSplitter(max_line_bytes=MIB, spool_dir=SPOOL)
    splitter.feed(b'{"a": "' + b"x" * (MIB // 2))
    assert len(set(SPOOL.iterdir()) - before) == 1
    splitter.feed(b"x" * MIB)  # over the limit: dropped
    assert set(SPOOL.iterdir()) == before
    splitter.feed(b'"}\n{"b": "' + b"y" * (MIB // 2))
    assert len(set(SPOOL.iterdir()) - before) == 1
    assert splitter.finish() is not None  # truncated
    assert set(SPOOL.iterdir()) == before


def test_without_a_spool_directory_long_lines_are_held_whole() -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"t": "x" * 400_000}}).encode()
    (item,) = split(line, 4096, spool_dir=None)
    assert item == line


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


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="Linux /proc only")
def test_a_50_mib_payload_line_is_never_held() -> None:
    """Fed in pipe-sized chunks that are dropped as they are consumed, as the reader does:
    the payload goes to its spool file as it arrives, so the peak stays at a few chunks (it
    was the payload's text once, and before that bytes and text)."""
    decoded = 50 * MIB
    head = b'{"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "image", "data": "'
    tail = b'", "mimeType": "image/png"}]}}\n'
    block = base64.b64encode(os.urandom(96 * 1024))  # 128 KiB of base64 per chunk
    count = decoded // (96 * 1024)
    gc.collect()
    before = memory_kib(os.getpid())["VmRSS"] * 1024
    reset_peak_memory(os.getpid())
    splitter = LineSplitter(spool_dir=SPOOL)
    splitter.feed(head)
    for index in range(count):
        splitter.feed(block[:-1] + bytes([65 + index % 26]))  # a fresh bytes each time
    splitter.feed(tail)
    item = splitter.next_line()
    message = parse_message(item)
    del item
    peak = memory_kib(os.getpid())["VmHWM"] * 1024 - before
    assert isinstance(message, SessionMessage)
    literal = spooled_media.claim(message.message.result["content"][0]["data"])
    assert literal is not None
    try:
        assert literal.length == count * len(block) == literal.path.stat().st_size
    finally:
        literal.discard()
    assert peak < 8 * MIB, f"peak {peak / MIB:.1f} MiB for {literal.length / MIB:.0f} MiB of text"


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
    extractor = LiteralExtractor(SPOOL, literal_threshold=1000)
    for piece in (b'{"a": "', b"short", b'", "b": [1, 2]}'):
        extractor.feed(piece)
    assert extractor.finish() == b'{"a": "short", "b": [1, 2]}'


@pytest.mark.parametrize(
    ("text", "size"),
    [
        (b"QUJD", 3),
        (b"QUI=", 2),
        (b"QQ==", 1),
        (b"QU JD", 3),  # spaces are skipped, as base64 decoding skips them
        (b"QQ= =", 1),
        (b"QUJ", None),  # not a multiple of 4
        (b"QQ=A", None),  # padding before data (deeper inside: the decoder rejects it)
    ],
)
def test_a_spooled_literal_knows_its_decoded_size(tmp_path: Path, text: bytes, size: Any) -> None:
    writer = spooled_media.SpoolWriter(tmp_path)
    for byte in text:  # one byte at a time: the tail and the space count span writes
        writer.write(bytes([byte]))
    literal = writer.finish()
    assert literal.decoded_size() == size
    assert literal.read_text() == text.decode()
    assert (literal.path.stat().st_mode & 0o777) == 0o600
