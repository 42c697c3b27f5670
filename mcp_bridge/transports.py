"""The transport under one MCP connection: stdio, streamable HTTP or SSE, per ``ServerSpec``.

Pure async Python, no Django. ``open_transport`` picks the transport; ``watched`` wraps its
read stream so the connection learns when the transport died between requests.

* A stdio server's stderr goes to ``<stderr_dir>/<key>.stderr.log`` (``StderrLog``); its
  environment is the SDK's short safe list (HOME, PATH, …) plus a few locale variables plus
  ``spec.env``.
* stdio uses our own transport (``mcp_bridge.stdio_transport``): the SDK's reader is
  quadratic in message size, which made a 50 MiB result take minutes.
* Streamable HTTP runs on our own httpx client (the spec's headers, connect timeout and, when
  signed in, an egress guard).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

import anyio
import httpx2
from mcp import StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from mcp_bridge.egress import GuardedTransport
from mcp_bridge.server_spec import ServerSpec
from mcp_bridge.stdio_transport import stdio_client

__all__ = ["StderrLog", "open_transport", "watched"]

Streams = tuple[Any, Any]

# Variables a stdio server inherits from our environment on top of the SDK's own short list
# (HOME, LOGNAME, PATH, SHELL, TERM, USER). Nothing else leaks: our secrets stay ours.
_INHERITED_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
_STDERR_LOG_MAX_BYTES = 5 * 1024 * 1024
_STDERR_TAIL_BYTES = 2048


def open_transport(
    spec: ServerSpec, *, stderr: StderrLog | None, number: int, spool_dir: Path | None
) -> AbstractAsyncContextManager[Streams]:
    """The transport of connection ``number`` to ``spec`` (entered by the connection's owner).

    ``stderr``: where a stdio server's stderr goes; ``spool_dir``: where a stdio server's
    long media literals are streamed as they arrive (``None``: held in memory)."""
    if spec.transport == "stdio":
        if stderr is None:
            raise ValueError("A stdio connection needs a stderr log")
        return _stdio_transport(spec, stderr=stderr, number=number, spool_dir=spool_dir)
    if spec.transport == "streamable_http":
        return _http_transport(spec)
    return sse_client(
        spec.url or "",
        headers=dict(spec.headers) or None,
        timeout=spec.connect_timeout,
        auth=spec.auth,
    )


@asynccontextmanager
async def watched(
    transport: AbstractAsyncContextManager[Streams], on_eof: Callable[[], None]
) -> AsyncIterator[Streams]:
    """``transport`` whose read stream calls ``on_eof`` when it ends."""
    async with transport as (read_stream, write_stream):
        yield _EofWatchingStream(read_stream, on_eof), write_stream


class StderrLog:
    """A stdio server's stderr file, one per connection key, kept under a size cap.

    Each connection appends below a header line; ``tail`` reads only what the current
    connection wrote, to explain why it failed.
    """

    def __init__(self, directory: Path, key: str) -> None:
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", key)[:120]
        self.directory = directory
        self.path = directory / f"{safe}.stderr.log"
        self.offset = 0
        self.opened = False

    def open(self, number: int) -> IO[str]:
        """The file the child writes to, never our own stdout/stderr."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            if self.path.stat().st_size > _STDERR_LOG_MAX_BYTES:
                self.path.unlink()
        errlog = self.path.open("a", encoding="utf-8")
        errlog.write(f"--- connection #{number} started {datetime.now(UTC).isoformat()} ---\n")
        errlog.flush()
        self.offset = errlog.tell()
        self.opened = True
        return errlog

    def tail(self) -> str:
        """The last meaningful line the process wrote to stderr during this connection."""
        if not self.opened:
            return ""
        try:
            with self.path.open("rb") as log:
                log.seek(0, os.SEEK_END)
                size = log.tell()
                start = max(self.offset, size - _STDERR_TAIL_BYTES)
                log.seek(start)
                text = log.read().decode("utf-8", "replace")
        except OSError:
            return ""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[-1][:300] if lines else ""


@asynccontextmanager
async def _stdio_transport(
    spec: ServerSpec, *, stderr: StderrLog, number: int, spool_dir: Path | None
) -> AsyncIterator[Streams]:
    errlog = stderr.open(number)
    try:
        params = StdioServerParameters(
            command=spec.command or "",
            args=list(spec.args),
            env=_child_environment(spec.env),
            cwd=spec.cwd,
        )
        async with stdio_client(params, errlog=errlog, spool_dir=spool_dir) as streams:
            yield streams
    finally:
        errlog.close()


@asynccontextmanager
async def _http_transport(spec: ServerSpec) -> AsyncIterator[Streams]:
    # Our own httpx client, for the spec's headers and connect timeout; we close it.
    timeout = httpx2.Timeout(spec.connect_timeout, read=300.0)
    # Signed in (OAuth): a refresh or a new discovery goes only where a sign-in may.
    guard = GuardedTransport([spec.url or ""]) if spec.auth is not None else None
    async with (
        httpx2.AsyncClient(
            headers=dict(spec.headers), timeout=timeout, auth=spec.auth, transport=guard
        ) as http,
        streamable_http_client(spec.url or "", http_client=http) as streams,
    ):
        yield streams


def _child_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """The environment on top of the SDK's defaults: a few locale/time vars plus the spec's."""
    env = {name: os.environ[name] for name in _INHERITED_ENV if name in os.environ}
    env.update(extra)
    return env


class _EofWatchingStream:
    """Proxy for a transport's read stream that reports when the stream ends.

    The SDK gives no public signal that a connection died between requests (the stdio
    process exited, the SSE stream dropped); the end of the read stream is that signal.
    """

    def __init__(self, inner: Any, on_eof: Callable[[], None]) -> None:
        self._inner = inner
        self._on_eof = on_eof

    @property
    def last_context(self) -> Any:
        # The dispatcher reads the sender's contextvars snapshot from HTTP transports' streams.
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_eof()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _EofWatchingStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()
