"""A stdio client transport for MCP that stays linear in message size.

Drop-in for the SDK's ``mcp.client.stdio.stdio_client`` (same arguments, same streams of
``SessionMessage | Exception``, same shutdown sequence). Why we have our own: the SDK's
reader decodes stdout as text and re-joins its whole pending buffer with every 64 KiB chunk
(``(buffer + chunk).split("\\n")``), which is quadratic in the size of one message (a 50 MiB
tool result: minutes of CPU; worth reporting upstream). This one:

* reads raw bytes, finds newlines by scanning each chunk once, and joins the chunks of a
  line once when it is complete;
* with a ``spool_dir``, streams a very long string literal of a long line (a base64 media
  payload) into a spool file *while it arrives* (``LiteralExtractor``), a marker standing
  in the message where it was: the process holds O(chunk) of a 50 MiB video result, never
  the payload. A media field of a tool result stays in its file for the host's
  normalization to claim (``mcp_bridge.spooled_media``); any other long literal is read
  back as text. No C API tricks: plain files and ``bytes``;
* follows a large message with a no-op, so the SDK's read loop does not keep it alive
  until the server next speaks (``_release_item``);
* parses each line once, from bytes (no decoded text copy), into Python objects and then
  validates those;
* delivers lines one at a time into an unbuffered stream, so nothing is read ahead while
  the session is busy (the SDK's back-pressure);
* turns a line that is not JSON-RPC into a ``MalformedMessage`` item (the session logs it and
  carries on), a line over ``max_message_bytes`` into ``OversizedMessage`` (dropped, so a
  runaway server cannot exhaust our memory), and a partial line at end of output into
  ``TruncatedMessage`` before the stream ends (the session then sees the connection close);
* sends the child's stderr to ``errlog`` and, on exit, stops it the way the SDK does: close
  stdin, wait, SIGTERM the process group, SIGKILL it.

POSIX only: on Windows (Job Objects) or a non-UTF-8 encoding it defers to the SDK transport.
"""

from __future__ import annotations

import logging
import secrets
import sys
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.lowlevel
from anyio.abc import ByteReceiveStream, ByteSendStream, Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.client.stdio import stdio_client as sdk_stdio_client
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCResponse, jsonrpc_message_adapter
from pydantic import ValidationError
from pydantic_core import from_json

from .spooled_media import SpooledLiteral, SpoolWriter, claim, register

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "LineSplitter",
    "LiteralExtractor",
    "MalformedMessage",
    "OversizedMessage",
    "SpilledLine",
    "TruncatedMessage",
    "parse_message",
    "stdio_client",
]

logger = logging.getLogger(__name__)

# Above what the normalizer accepts anyway (256 MiB of decoded media is ~342 MiB of base64).
DEFAULT_MAX_MESSAGE_BYTES = 512 * 1024 * 1024
# asyncio's pipe reader hands out at most ~128 KiB per read whatever we ask; asking for more
# costs nothing and helps if that ever changes.
_READ_CHUNK_BYTES = 1024 * 1024
# The SDK's shutdown timings (mcp.client.stdio), for the same behaviour on exit.
PROCESS_TERMINATION_TIMEOUT = 2.0
FORCE_KILL_TIMEOUT = 2.0
_KILL_REAP_TIMEOUT = 2.0
_WRITER_FLUSH_TIMEOUT = 0.5
_EXIT_POLL_INTERVAL = 0.01
_PREVIEW_BYTES = 80
# A line longer than this is scanned for string literals as it arrives (shorter lines, i.e.
# nearly all of them, are only split on newlines)...
SCAN_LINES_OVER_BYTES = 256 * 1024
# ...and a string literal of such a line that is still open at the end of a read and has
# reached this size is spooled to a file from then on, its bytes dropped chunk by chunk.
SPILL_LITERALS_OVER_BYTES = 64 * 1024
# After delivering a message this large, a no-op follows (see ``_release_item``).
RELEASE_AFTER_BYTES = 1024 * 1024
_QUOTE = b'"'
_BACKSLASH = b"\\"

ReadItem = SessionMessage | Exception


class MalformedMessage(ValueError):
    """A line on the server's stdout that is not a JSON-RPC message (delivered, not raised)."""

    def __init__(self, size: int, preview: str, problem: str) -> None:
        super().__init__(
            f"The server wrote a line that is not a JSON-RPC message "
            f"({size} bytes, starting {preview!r}): {problem}"
        )
        self.size = size
        self.preview = preview


class OversizedMessage(ValueError):
    """A message longer than the transport's limit; it was dropped unread."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"The server wrote a message larger than {limit} bytes; it was dropped.")
        self.limit = limit


class TruncatedMessage(ValueError):
    """The server's output ended in the middle of a message (usually: the process died)."""

    def __init__(self, size: int) -> None:
        super().__init__(f"The server's output ended inside a message ({size} bytes unread).")
        self.size = size


class SpilledLine:
    """A complete line whose long string literals went to spool files as they arrived.

    ``skeleton`` is the line's JSON with each of those literals replaced by a line marker
    (``prefix`` + its index in ``values``). ``prefix`` carries 128 random bits, so no string
    a server writes can pass for one. :meth:`resolve` turns the parsed skeleton into the
    message the host works with: a literal in a tool result's media field (``content[i].data``
    of an image or audio block, ``content[i].resource.blob``) stays in its file behind a
    registered marker (``mcp_bridge.spooled_media``) for the host's normalization to claim;
    any other literal is read back as text (rare: long texts are not base64 media).
    """

    __slots__ = ("prefix", "size", "skeleton", "values")

    def __init__(
        self, skeleton: bytes, prefix: str, values: list[SpooledLiteral], size: int
    ) -> None:
        self.skeleton = skeleton
        self.prefix = prefix
        self.values: list[SpooledLiteral | None] = list(values)
        self.size = size  # of the line as it was written

    def __len__(self) -> int:
        return self.size

    def resolve(self, tree: Any) -> tuple[Any, list[str]]:
        """The message tree with media literals behind registered markers (returned too, so
        a caller that drops the message can release them) and other literals as text."""
        registered = []
        for holder, key in tool_result_media_fields(tree):
            literal = self._take(holder[key])
            if literal is not None:
                holder[key] = register(literal)
                registered.append(holder[key])
        return self._restore_text(tree), registered

    def discard(self) -> None:
        """Remove the files of literals nobody took."""
        for literal in self.values:
            if literal is not None:
                literal.discard()
        self.values = []

    def _restore_text(self, tree: Any) -> Any:
        if isinstance(tree, str):
            return self._text(tree)
        stack = [tree]
        while stack:
            node = stack.pop()
            if isinstance(node, list):
                for index, item in enumerate(node):
                    if isinstance(item, str):
                        if item.startswith(self.prefix):
                            node[index] = self._text(item)
                    elif isinstance(item, list | dict):
                        stack.append(item)
            elif isinstance(node, dict):
                renamed = []
                for key, item in node.items():
                    if isinstance(item, str):
                        if item.startswith(self.prefix):
                            node[key] = self._text(item)  # same keys: safe while iterating
                    elif isinstance(item, list | dict):
                        stack.append(item)
                    if key.startswith(self.prefix):
                        renamed.append(key)
                for key in renamed:
                    node[self._text(key)] = node.pop(key)
        return tree

    def _take(self, marker: Any) -> SpooledLiteral | None:
        if not isinstance(marker, str) or not marker.startswith(self.prefix):
            return None
        index = marker[len(self.prefix) :]
        if not index.isdigit() or int(index) >= len(self.values):
            return None
        literal, self.values[int(index)] = self.values[int(index)], None
        return literal

    def _text(self, marker: str) -> str:
        literal = self._take(marker)
        if literal is None:
            return marker
        try:
            return literal.read_text()
        finally:
            literal.discard()


def tool_result_media_fields(tree: Any) -> list[tuple[dict[str, Any], str]]:
    """Where a tool result carries base64 media: (holder, key) pairs."""
    result = tree.get("result") if isinstance(tree, dict) else None
    content = result.get("content") if isinstance(result, dict) else None
    if not isinstance(content, list):
        return []
    fields = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") in ("image", "audio") and "data" in block:
            fields.append((block, "data"))
        resource = block.get("resource")
        if block.get("type") == "resource" and isinstance(resource, dict) and "blob" in resource:
            fields.append((resource, "blob"))
    return fields


class LiteralExtractor:
    """Builds one long line, streaming its long string literals into spool files.

    Fed the line's bytes in order (any chunking), it keeps everything but those literals as
    bytes (the *skeleton*) and writes each long literal's content to a file of its own
    (``SpoolWriter``) as it comes, so the bytes of each chunk are released at once and the
    process holds O(chunk) of it. ``finish`` returns the plain ``bytes`` line when nothing
    was taken out, else a ``SpilledLine``.

    Linear and mostly C-speed: a chunk with no backslash is classified by counting quotes
    (``bytes.count``/``rfind``); only chunks with backslashes are walked literal by literal.
    Only literals that are ASCII without escape sequences are taken out (base64 payloads);
    one that turns out otherwise is read back as bytes and left to the JSON parser. Not
    validated here: control characters inside a taken-out literal (JSON forbids them raw;
    base64 decoding rejects them).
    """

    def __init__(self, spool_dir: Path, literal_threshold: int = SPILL_LITERALS_OVER_BYTES) -> None:
        self.spool_dir = spool_dir
        self.literal_threshold = literal_threshold
        self.prefix = f"atrium-spill-{secrets.token_hex(16)}-"
        self._skeleton: list[bytes] = []
        self._values: list[SpooledLiteral] = []
        self._size = 0
        self._in_string = False
        self._escape = False  # the last byte fed was an unpaired backslash inside a string
        self._plain = True  # the open literal may still be taken out
        self._literal: list[bytes] = []  # the open literal's content as bytes...
        self._literal_bytes = 0
        self._spool: SpoolWriter | None = None  # ...or in a spool file, once it is long

    def feed(self, data: bytes) -> None:
        self._size += len(data)
        if data:
            self._feed(data)

    def finish(self) -> bytes | SpilledLine:
        """The complete line (call once, after its last byte)."""
        if self._in_string:  # invalid JSON, left for the parser to explain
            self._keep_as_bytes()
            self._skeleton.extend(self._literal)
        skeleton = b"".join(self._skeleton)
        self._skeleton, self._literal = [], []
        if not self._values:
            return skeleton
        values, self._values = self._values, []
        return SpilledLine(skeleton, self.prefix, values, self._size)

    def close(self) -> None:
        """Drop everything (a line abandoned half way)."""
        if self._spool is not None:
            self._spool.abort()
            self._spool = None
        for literal in self._values:
            literal.discard()
        self._skeleton, self._literal, self._values = [], [], []

    # ---- scanning

    def _feed(self, data: bytes) -> None:
        size = len(data)
        pos = self._continue_literal(data, 0) if self._in_string else 0
        if pos >= size:
            return
        if data.find(_BACKSLASH, pos) < 0:
            # Outside a string and no escapes: every quote delimits a string, so the parity
            # of their count says whether a literal is still open at the end of the chunk.
            if data.count(_QUOTE, pos) % 2 == 0:
                self._skeleton.append(data[pos:] if pos else data)
                return
            opening = data.rfind(_QUOTE)
            self._skeleton.append(data[pos : opening + 1])
            self._in_string = True
            self._continue_literal(data, opening + 1)
            return
        while pos < size:
            opening = data.find(_QUOTE, pos)
            if opening < 0:
                self._skeleton.append(data[pos:])
                return
            self._skeleton.append(data[pos : opening + 1])
            self._in_string = True
            pos = self._continue_literal(data, opening + 1)

    def _continue_literal(self, data: bytes, pos: int) -> int:
        """Consume the open literal's content from ``pos``; the index after its closing
        quote, or ``len(data)`` if it is still open."""
        size = len(data)
        if self._escape and pos < size:
            self._add(data, pos, pos + 1)  # the escaped character
            pos += 1
            self._escape = False
        while True:
            closing = data.find(_QUOTE, pos)
            end = closing if closing >= 0 else size
            backslash = data.find(_BACKSLASH, pos, end)
            if backslash < 0:
                self._add(data, pos, end)
                if closing < 0:
                    self._maybe_take_out()
                    return size
                self._close_literal()
                return closing + 1
            self._keep_as_bytes()
            if backslash + 1 >= size:  # the escaped character comes with the next chunk
                self._add(data, pos, size)
                self._escape = True
                return size
            self._add(data, pos, backslash + 2)
            pos = backslash + 2

    def _add(self, data: bytes, start: int, end: int) -> None:
        if start >= end:
            return
        piece = data if start == 0 and end == len(data) else data[start:end]
        if self._spool is not None:
            if piece.isascii():
                self._spool.write(piece)
                return
            self._keep_as_bytes()
        self._literal.append(piece)
        self._literal_bytes += len(piece)

    def _maybe_take_out(self) -> None:
        """The open literal reached the end of a chunk: spool it from now on if it is long
        (and so far ASCII without escapes)."""
        if self._spool is not None or not self._plain:
            return
        if self._literal_bytes < self.literal_threshold:
            return
        if not all(piece.isascii() for piece in self._literal):
            self._plain = False
            return
        try:
            self._spool = SpoolWriter(self.spool_dir)
            for piece in self._literal:
                self._spool.write(piece)
        except OSError:
            logger.warning("cannot spool a long literal to %s", self.spool_dir, exc_info=True)
            if self._spool is not None:
                self._spool.abort()
                self._spool = None
            self._plain = False
            return
        self._literal, self._literal_bytes = [], 0

    def _keep_as_bytes(self) -> None:
        """The open literal stays bytes, for the JSON parser (escapes, non-ASCII)."""
        self._plain = False
        if self._spool is not None:
            held = self._spool.read_back()
            self._spool = None
            self._literal, self._literal_bytes = [held, *self._literal], len(held)

    def _close_literal(self) -> None:
        if self._spool is not None:
            marker = f"{self.prefix}{len(self._values)}"
            self._values.append(self._spool.finish())
            self._spool = None
            self._skeleton.append(marker.encode("ascii") + _QUOTE)
        else:
            self._skeleton.extend(self._literal)
            self._skeleton.append(_QUOTE)
        self._literal, self._literal_bytes = [], 0
        self._in_string, self._escape, self._plain = False, False, True


class LineSplitter:
    """Newline framing of a byte stream, linear in the total input.

    ``feed`` takes a chunk; ``next_line`` returns the next complete line (without its
    newline) as ``bytes`` (or, for a long line with long string literals, a ``SpilledLine``),
    an ``OversizedMessage`` for a line over the limit, or ``None`` when it needs more input.
    Each chunk is scanned for newlines once. The pieces of an unfinished line are kept as
    they arrived and joined once, into an immutable ``bytes`` of the exact size, when its
    newline comes: the parser borrows ``bytes`` but copies a ``bytearray``, so a big line
    costs one copy here and none there. With a ``spool_dir``, a line that grows past
    ``scan_over`` bytes goes through a ``LiteralExtractor`` from then on instead, so that a
    huge string payload goes to a file as it arrives and is never held. Blank lines are
    skipped.
    """

    def __init__(
        self,
        max_line_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        *,
        scan_over: int = SCAN_LINES_OVER_BYTES,
        literal_threshold: int = SPILL_LITERALS_OVER_BYTES,
        spool_dir: Path | None = None,
    ) -> None:
        if max_line_bytes <= 0:
            raise ValueError("max_line_bytes must be positive")
        self.max_line_bytes = max_line_bytes
        self.spool_dir = spool_dir
        self.scan_over = scan_over
        self.literal_threshold = literal_threshold
        self._pieces: list[bytes] = []  # the unfinished line so far
        self._pending = 0  # its length
        self._extractor: LiteralExtractor | None = None  # a long line: scanned as it comes
        self._discarding = False  # inside an oversized line: drop input up to its newline
        self._ready: deque[LineItem] = deque()

    @property
    def pending_bytes(self) -> int:
        """Bytes of an unfinished line received so far."""
        return self._pending

    def feed(self, chunk: bytes) -> None:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._complete(chunk[start:end])
            start = end + 1
        if start < len(chunk):
            self._hold(chunk[start:] if start else chunk)

    def next_line(self) -> LineItem | None:
        return self._ready.popleft() if self._ready else None

    def finish(self) -> TruncatedMessage | None:
        """End of input: an unfinished last line is reported, never parsed."""
        pending, discarding = self._pending, self._discarding
        self._reset()
        if pending and not discarding:
            return TruncatedMessage(pending)
        return None

    def _hold(self, piece: bytes) -> None:
        if self._discarding:
            return
        self._pending += len(piece)
        if self._pending > self.max_line_bytes:
            self._reset()
            self._discarding = True  # drop the rest of the line as it arrives
            self._ready.append(OversizedMessage(self.max_line_bytes))
        elif self._extractor is not None:
            self._extractor.feed(piece)
        else:
            self._pieces.append(piece)
            if self.spool_dir is not None and self._pending > self.scan_over:
                self._extractor = LiteralExtractor(self.spool_dir, self.literal_threshold)
                for held in self._pieces:
                    self._extractor.feed(held)
                self._pieces = []

    def _complete(self, tail: bytes) -> None:
        if self._discarding:  # the end of an oversized line, already reported
            self._reset()
            return
        if self._pending + len(tail) > self.max_line_bytes:
            self._reset()
            self._ready.append(OversizedMessage(self.max_line_bytes))
            return
        line: LineItem
        if self._extractor is not None:
            extractor = self._extractor
            extractor.feed(tail)
            self._extractor = None  # handed over: not closed by the reset
            self._reset()
            line = extractor.finish()
            if not isinstance(line, bytes):
                self._ready.append(line)
                return
        elif self._pieces:
            self._pieces.append(tail)
            line = b"".join(self._pieces)
        else:
            line = tail
        self._reset()
        if line and not line.isspace():  # isspace stops at the first non-space byte
            self._ready.append(line)

    def _reset(self) -> None:
        self._pieces = []
        self._pending = 0
        if self._extractor is not None:
            self._extractor.close()  # a no-op once it has handed its line over
        self._extractor = None
        self._discarding = False


LineItem = bytes | SpilledLine | OversizedMessage


def parse_message(line: bytes | bytearray | SpilledLine) -> ReadItem:
    """One stdout line → a ``SessionMessage``, or a ``MalformedMessage`` to deliver as a value.

    Parsed once to Python objects, then validated: ``validate_json`` on the JSON-RPC union
    builds an intermediate JSON tree and tries each member (several copies of a large
    payload, see bench/README.md); ``from_json`` makes each string once, and validating
    the resulting dict reuses those strings. A ``SpilledLine``'s media literals stay in their
    spool files behind registered markers (``SpilledLine.resolve``); a line that does not
    make a message releases them.
    """
    source = line.skeleton if isinstance(line, SpilledLine) else line
    registered: list[str] = []
    try:
        tree = from_json(source)
        if isinstance(line, SpilledLine):
            tree, registered = line.resolve(tree)
        message = jsonrpc_message_adapter.validate_python(tree, by_name=False)
    except ValidationError:
        problem = "valid JSON, but not a JSON-RPC request, notification, response or error"
    except ValueError as exc:  # from_json: not JSON, or not UTF-8
        problem = f"invalid JSON ({exc})"
    else:
        return SessionMessage(message)
    finally:
        if isinstance(line, SpilledLine):
            line.discard()  # literals the message does not reference (e.g. duplicate keys)
    for marker in registered:
        literal = claim(marker)
        if literal is not None:
            literal.discard()
    preview = bytes(source[:_PREVIEW_BYTES]).decode("utf-8", "replace")
    return MalformedMessage(len(line), preview, problem)


@asynccontextmanager
async def stdio_client(
    server: StdioServerParameters,
    errlog: IO[Any] = sys.stderr,
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    spool_dir: Path | None = None,
) -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[ReadItem], MemoryObjectSendStream[SessionMessage]]
]:
    """Spawn ``server`` and exchange newline-delimited JSON-RPC with it over stdin/stdout.

    ``spool_dir``: where long literals of long lines go as they arrive (``None``: lines are
    held whole, as bytes). Raises ``OSError`` if the process cannot be started.
    """
    if sys.platform == "win32" or server.encoding.lower().replace("-", "") != "utf8":
        async with sdk_stdio_client(server, errlog=errlog) as sdk_streams:  # type: ignore[arg-type]
            yield sdk_streams  # type: ignore[misc]
        return

    process = await anyio.open_process(
        [server.command, *server.args],
        env=get_default_environment() | (server.env or {}),
        stderr=errlog,
        cwd=server.cwd,
        start_new_session=True,  # its own process group, so shutdown reaches its children
    )
    # No awaits until the task group is entered: a cancellation in the gap would leak the
    # live process.
    to_session, read_stream = anyio.create_memory_object_stream[ReadItem](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()
    shutting_down = False

    async def stdout_reader() -> None:
        assert process.stdout is not None
        try:
            async with to_session:
                try:
                    await _pump_lines(process.stdout, to_session, max_message_bytes, spool_dir)
                finally:
                    await _drain(process.stdout)
        except anyio.ClosedResourceError:
            pass  # our own shutdown closed the pipe under the read
        except (anyio.BrokenResourceError, ConnectionError):
            if not shutting_down:
                logger.exception("Reading from the MCP server's stdout failed mid-session")

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for session_message in from_session:
                    text = session_message.message.model_dump_json(
                        by_alias=True, exclude_unset=True
                    )
                    await process.stdin.send((text + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server may still run: end the read side so the session sees the
            # connection close instead of waiting forever for answers.
            await to_session.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        # Unblock the reader into its drain first: a server stuck writing stdout cannot read
        # stdin, and draining is what lets it see stdin close and exit.
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(_WRITER_FLUSH_TIMEOUT):
            await writer_done.wait()
        await _stop_process(process)
        for stream in (read_stream, write_stream, to_session, from_session):
            await stream.aclose()
        await anyio.lowlevel.checkpoint()  # let the unblocked tasks leave through their excepts

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            shutting_down = True
            # Must finish even when the caller is cancelled, or the process would leak; every
            # wait inside is bounded.
            with anyio.CancelScope(shield=True):
                await shutdown()
            tg.cancel_scope.cancel()  # a kill survivor holding our pipes cannot stall us
    await anyio.lowlevel.cancel_shielded_checkpoint()


async def _pump_lines(
    stdout: ByteReceiveStream,
    sink: MemoryObjectSendStream[ReadItem],
    max_message_bytes: int,
    spool_dir: Path | None,
) -> None:
    """Read stdout to its end, delivering each line as a parsed message or an error item."""
    splitter = LineSplitter(max_message_bytes, spool_dir=spool_dir)
    try:
        await _pump_split_lines(stdout, sink, splitter)
    finally:
        splitter.finish()  # a line cut off (cancelled, closed): its spool files go


async def _pump_split_lines(
    stdout: ByteReceiveStream, sink: MemoryObjectSendStream[ReadItem], splitter: LineSplitter
) -> None:
    while True:
        try:
            chunk = await stdout.receive(_READ_CHUNK_BYTES)
        except anyio.EndOfStream:
            truncated = splitter.finish()
            if truncated is not None:
                logger.debug("MCP server stdout: %s", truncated)
                await _deliver(sink, truncated)
            return
        splitter.feed(chunk)
        del chunk  # a long line's bytes are dropped as soon as they are taken in
        while (line := splitter.next_line()) is not None:
            size = 0 if isinstance(line, Exception) else len(line)
            item = line if isinstance(line, Exception) else parse_message(line)
            # Hold neither the raw line while the session is busy, nor the message once it
            # has been handed over: one copy of a big payload at a time.
            del line
            if isinstance(item, Exception):  # the session logs it too, at its own level
                logger.debug("MCP server stdout: %s", item)
            delivered = await _deliver(sink, item)
            del item
            if delivered and size > RELEASE_AFTER_BYTES:
                delivered = await _deliver(sink, _release_item())
            if not delivered:
                return


def _release_item() -> SessionMessage:
    """A message the session drops unseen: a response to no request it made.

    The SDK's read loop (``JSONRPCDispatcher.run``: ``async for item in read_stream``) keeps
    the last message it received referenced until the next one arrives — for a 50 MB result,
    67 MB pinned until that server next says anything, and two such results alive at once
    when it answers the next call with another. Sent right after a large message, this is
    received as soon as the loop has dispatched that one (the stream is unbuffered), which
    unpins it; the dispatcher only logs "dropping response for unknown/late request id" at
    debug level. The id is a string; the session numbers its requests.
    """
    return SessionMessage(JSONRPCResponse(jsonrpc="2.0", id="atrium-stdio-release", result={}))


async def _deliver(sink: MemoryObjectSendStream[ReadItem], item: ReadItem) -> bool:
    """Send one item to the session; False once the session has gone away."""
    try:
        await sink.send(item)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        return False
    return True


async def _drain(stdout: ByteReceiveStream) -> None:
    """Discard the rest of stdout (shielded) so a server flushing output can still exit."""
    with (
        anyio.CancelScope(shield=True),
        suppress(
            anyio.EndOfStream,
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
            ConnectionError,
            OSError,
        ),
    ):
        while True:
            await stdout.receive(_READ_CHUNK_BYTES)


async def _stop_process(process: Process) -> None:
    """Close stdin, wait out the grace period, then SIGTERM/SIGKILL the process group."""
    assert process.stdin is not None and process.stdout is not None
    await _close_quietly(process.stdin)
    if not await _exited_within(process, PROCESS_TERMINATION_TIMEOUT):
        await terminate_posix_process_tree(process, FORCE_KILL_TIMEOUT)
        if not await _exited_within(process, _KILL_REAP_TIMEOUT):
            logger.warning("MCP server process %d survived SIGKILL; abandoning it", process.pid)
    await _close_quietly(process.stdout)
    # The asyncio subprocess transport stays open (and warns at GC) while a surviving child
    # holds a pipe; nothing public closes it without waiting for those pipes.
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        with suppress(PermissionError):
            close()


async def _close_quietly(stream: ByteSendStream | ByteReceiveStream) -> None:
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.aclose()


async def _exited_within(process: Process, timeout: float) -> bool:
    """Poll ``returncode`` (``process.wait()`` would also wait for pipes a child inherited)."""
    deadline = anyio.current_time() + timeout
    while process.returncode is None:
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(_EXIT_POLL_INTERVAL)
    return True
