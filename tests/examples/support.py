"""Helpers for the example-server tests: real processes, the real `mcp` client, no mocks."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client import advertise

from tests.fixtures.http_servers import free_port
from tests.waiting import poll

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
APP_MIME = "text/html;profile=mcp-app"


def ui_extension() -> Any:
    """Declare MCP Apps support, as a host does, so servers that gate on it show their UI."""
    return advertise("io.modelcontextprotocol/ui", {"mimeTypes": [APP_MIME]})


def server_params(
    name: str, *args: str, env: dict[str, str] | None = None
) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=[str(EXAMPLES_DIR / name / "server.py"), *args],
        env=env,
        cwd=str(EXAMPLES_DIR.parent),
    )


def stdio_client(name: str, *args: str, env: dict[str, str] | None = None) -> Client:
    # cache=None: tests must see the server's current answers, never a cached list.
    return Client(server_params(name, *args, env=env), extensions=[ui_extension()], cache=None)


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    def listening() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"server exited early with code {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            return False

    # Polled: the example servers print nothing when they start listening.
    poll(listening, timeout=timeout, interval=0.1, reason=f"a server listens on port {port}")


@contextmanager
def http_server(name: str, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """Start `examples/<name>/server.py --http` on a free port; yield its /mcp URL; stop it."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            str(EXAMPLES_DIR / name / "server.py"),
            "--http",
            "--port",
            str(port),
            *args,
        ],
        cwd=str(EXAMPLES_DIR.parent),
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


class ClientOwner:
    """Keeps one connection open across a module's tests.

    The client's task groups must be entered and exited by the same task, which pytest's
    fixture setup and teardown are not; so a dedicated task owns the connection and the tests
    only call through it.
    """

    def __init__(self, client: Client) -> None:
        self._client = client
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._error: BaseException | None = None

    async def _own(self) -> None:
        try:
            async with self._client:
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:  # surfaced by start()
            self._error = exc
            self._ready.set()
            raise

    async def start(self) -> Client:
        self._task = asyncio.create_task(self._own())
        await self._ready.wait()
        if self._error is not None:
            raise self._error
        return self._client

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task


def dump(model: Any) -> dict[str, Any]:
    """A result as it travels on the wire (camelCase, `_meta`)."""
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def texts(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")
