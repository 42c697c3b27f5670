"""A stdio client transport for MCP that stays linear in message size.

Drop-in for the SDK's ``mcp.client.stdio.stdio_client`` (same arguments, same streams of
``SessionMessage | Exception``, same shutdown sequence). Why we have our own: the SDK's
reader decodes stdout as text and re-joins its whole pending buffer with every 64 KiB chunk
(``(buffer + chunk).split("\\n")``), which is quadratic in the size of one message — a 50 MiB
tool result took minutes of CPU. This one:

* reads raw bytes, finds newlines by scanning each chunk once, and joins the chunks of a
  line once when it is complete;
* parses each line once, from bytes (no decoded text copy), into Python objects and then
  validates those, so a big string payload exists once as bytes and once as ``str``;
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
import sys
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import IO, Any

import anyio
import anyio.lowlevel
from anyio.abc import ByteReceiveStream, ByteSendStream, Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.client.stdio import stdio_client as sdk_stdio_client
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage
from mcp_types import jsonrpc_message_adapter
from pydantic import ValidationError
from pydantic_core import from_json

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "LineSplitter",
    "MalformedMessage",
    "OversizedMessage",
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


class LineSplitter:
    """Newline framing of a byte stream, linear in the total input.

    ``feed`` takes a chunk; ``next_line`` returns the next complete line (without its
    newline), an ``OversizedMessage`` for a line over the limit, or ``None`` when it needs
    more input. Each chunk is scanned for newlines once. The pieces of an unfinished line are
    kept as they arrived and joined once, into an immutable ``bytes`` of the exact size,
    when its newline comes: the parser borrows ``bytes`` but copies a ``bytearray``, so a big
    line costs one copy here and none there. Blank lines are skipped.
    """

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        if max_line_bytes <= 0:
            raise ValueError("max_line_bytes must be positive")
        self.max_line_bytes = max_line_bytes
        self._pieces: list[bytes] = []  # the unfinished line so far
        self._pending = 0  # its length
        self._discarding = False  # inside an oversized line: drop input up to its newline
        self._ready: deque[bytes | OversizedMessage] = deque()

    @property
    def pending_bytes(self) -> int:
        """Bytes of an unfinished line held right now."""
        return self._pending

    def feed(self, chunk: bytes) -> None:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._complete(chunk[start:end])
            start = end + 1
        if start < len(chunk):
            self._hold(chunk[start:] if start else chunk)

    def next_line(self) -> bytes | OversizedMessage | None:
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
        else:
            self._pieces.append(piece)

    def _complete(self, tail: bytes) -> None:
        if self._discarding:  # the end of an oversized line, already reported
            self._reset()
            return
        if self._pending + len(tail) > self.max_line_bytes:
            self._reset()
            self._ready.append(OversizedMessage(self.max_line_bytes))
            return
        if self._pieces:
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
        self._discarding = False


def parse_message(line: bytes | bytearray) -> ReadItem:
    """One stdout line → a ``SessionMessage``, or a ``MalformedMessage`` to deliver as a value.

    Parsed once to Python objects, then validated: ``validate_json`` on the JSON-RPC union
    builds an intermediate JSON tree and tries each member, which measured ~4 copies of a
    large payload and twice the time; ``from_json`` makes each string once, and validating
    the resulting dict reuses those strings.
    """
    try:
        message = jsonrpc_message_adapter.validate_python(from_json(line), by_name=False)
    except ValidationError:
        problem = "valid JSON, but not a JSON-RPC request, notification, response or error"
    except ValueError as exc:  # from_json: not JSON, or not UTF-8
        problem = f"invalid JSON ({exc})"
    else:
        return SessionMessage(message)
    preview = bytes(line[:_PREVIEW_BYTES]).decode("utf-8", "replace")
    return MalformedMessage(len(line), preview, problem)


@asynccontextmanager
async def stdio_client(
    server: StdioServerParameters,
    errlog: IO[Any] = sys.stderr,
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[ReadItem], MemoryObjectSendStream[SessionMessage]]
]:
    """Spawn ``server`` and exchange newline-delimited JSON-RPC with it over stdin/stdout.

    Raises ``OSError`` if the process cannot be started.
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
                    await _pump_lines(process.stdout, to_session, max_message_bytes)
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
    stdout: ByteReceiveStream, sink: MemoryObjectSendStream[ReadItem], max_message_bytes: int
) -> None:
    """Read stdout to its end, delivering each line as a parsed message or an error item."""
    splitter = LineSplitter(max_message_bytes)
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
        while (line := splitter.next_line()) is not None:
            item = line if isinstance(line, OversizedMessage) else parse_message(line)
            # Hold neither the raw line while the session is busy, nor the message once it
            # has been handed over: one copy of a big payload at a time.
            del line
            if isinstance(item, Exception):  # the session logs it too, at its own level
                logger.debug("MCP server stdout: %s", item)
            delivered = await _deliver(sink, item)
            del item
            if not delivered:
                return


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
