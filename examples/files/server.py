"""Files: tools that take a file from the client, as a link or embedded in the call.

    python examples/files/server.py                                      # stdio
    python examples/files/server.py --http --host 127.0.0.1 --port 8107  # http://127.0.0.1:8107/mcp

- ``file_stats(file, lines=5)`` — ``file`` is an MCP ``ResourceLink`` (the server fetches
  its ``uri`` with httpx) **or** an ``EmbeddedResource`` (``text`` or base64 ``blob``).
- ``url_stats(url, lines=5)`` — ``url`` is a plain string with ``format: "uri"``.
- ``embedded_stats(file, lines=5)`` — ``file`` must be an ``EmbeddedResource``.

Each answers with the file's name, type, size, SHA-256, line count and first lines
(``structuredContent``, and a text summary for the model). ``file_stats`` given a link also
returns a ``resource_link`` back to the file it read, so a host can show that file.

Links are fetched over http(s) only, without following redirects, for at most 10 seconds
and 20 MiB (``FILES_MAX_FETCH_BYTES``).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
from typing import Annotated, Any, Final

import httpx
from mcp.server.mcpserver import MCPServer
from mcp.types import (
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)
from pydantic import AnyUrl, Field

DEFAULT_HTTP_PORT: Final = 8107
MAX_FETCH_BYTES: Final = int(os.environ.get("FILES_MAX_FETCH_BYTES", str(20 * 1024 * 1024)))
FETCH_TIMEOUT: Final = 10.0
READ_ONLY: Final = ToolAnnotations(read_only_hint=True, open_world_hint=True)
Lines = Annotated[int, Field(ge=0, le=50, description="How many first lines to show.")]

mcp = MCPServer(
    "files",
    title="Files",
    version="1.0.0",
    instructions="Tools that read a file the client passes: as a link, or embedded.",
)


class FetchFailed(Exception):
    pass


def fetch(url: str) -> tuple[bytes, str | None]:
    """The bytes at ``url`` (http/https, no redirects, bounded) and its content type."""
    if not url.lower().startswith(("http://", "https://")):
        raise FetchFailed(f"Only http(s) links can be fetched, not {url.split(':', 1)[0]}:.")
    try:
        with (
            httpx.Client(timeout=FETCH_TIMEOUT, follow_redirects=False) as client,
            client.stream("GET", url) as response,
        ):
            if response.status_code != 200:
                raise FetchFailed(f"The link answered HTTP {response.status_code}.")
            body = bytearray()
            for chunk in response.iter_bytes():
                body.extend(chunk)
                if len(body) > MAX_FETCH_BYTES:
                    raise FetchFailed(f"The file is larger than {MAX_FETCH_BYTES} bytes.")
            return bytes(body), response.headers.get("content-type")
    except httpx.HTTPError as exc:
        raise FetchFailed(f"The link could not be fetched: {exc.__class__.__name__}.") from exc


def stats(data: bytes, *, name: str, mime_type: str | None, via: str, lines: int) -> dict[str, Any]:
    text = data.decode("utf-8", errors="replace")
    all_lines = text.splitlines()
    return {
        "name": name,
        "mimeType": mime_type,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "lines": len(all_lines),
        "firstLines": all_lines[:lines],
        "via": via,
    }


def answer(found: dict[str, Any], *extra: Any) -> CallToolResult:
    summary = (
        f"{found['name']} ({found['mimeType'] or 'unknown type'}): {found['size']} bytes, "
        f"{found['lines']} lines, sha256 {found['sha256']}, read {found['via']}."
    )
    if found["firstLines"]:
        summary += "\nFirst lines:\n" + "\n".join(found["firstLines"])
    return CallToolResult(
        content=[TextContent(type="text", text=summary), *extra], structured_content=found
    )


def failure(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def from_embedded(file: EmbeddedResource, lines: int) -> CallToolResult:
    contents = file.resource
    name = str(contents.uri).rstrip("/").rsplit("/", 1)[-1] or str(contents.uri)
    if isinstance(contents, TextResourceContents):
        data = contents.text.encode("utf-8")
    elif isinstance(contents, BlobResourceContents):
        try:
            data = base64.b64decode(contents.blob, validate=True)
        except ValueError:
            return failure("The embedded blob is not valid base64.")
    else:  # pragma: no cover - the SDK's model has only these two
        return failure("The embedded resource has no content.")
    return answer(stats(data, name=name, mime_type=contents.mime_type, via="embedded", lines=lines))


def from_link(url: str, name: str, mime_type: str | None, lines: int) -> CallToolResult:
    try:
        data, served_type = fetch(url)
    except FetchFailed as exc:
        return failure(str(exc))
    found = stats(data, name=name, mime_type=mime_type or served_type, via="link", lines=lines)
    return answer(found)


@mcp.tool(annotations=READ_ONLY)
def file_stats(file: ResourceLink | EmbeddedResource, lines: Lines = 5) -> CallToolResult:
    """Name, size, SHA-256, line count and first lines of a file, given as a link (fetched)
    or embedded in the call."""
    if isinstance(file, EmbeddedResource):
        return from_embedded(file, lines)
    result = from_link(str(file.uri), file.name, file.mime_type, lines)
    if not result.is_error:
        # The file it read, for the host to show (its own link, not a copy).
        result.content.append(
            ResourceLink(
                type="resource_link",
                uri=file.uri,
                name=file.name,
                mime_type=file.mime_type,
                size=result.structured_content["size"],
            )
        )
    return result


@mcp.tool(annotations=READ_ONLY)
def url_stats(url: AnyUrl, lines: Lines = 5) -> CallToolResult:
    """Name, size, SHA-256, line count and first lines of the file at a URL."""
    text = str(url)
    name = text.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1] or text
    return from_link(text, name, None, lines)


@mcp.tool(annotations=READ_ONLY)
def embedded_stats(file: EmbeddedResource, lines: Lines = 5) -> CallToolResult:
    """Name, size, SHA-256, line count and first lines of a file embedded in the call."""
    return from_embedded(file, lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Files: an MCP server that reads files.")
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp")
    transport.add_argument("--sse", action="store_true", help="serve the legacy SSE transport")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP bind address")
    parser.add_argument("--port", type=int, default=DEFAULT_HTTP_PORT, help="HTTP port")
    args = parser.parse_args(argv)
    try:
        if args.http:
            mcp.run("streamable-http", host=args.host, port=args.port)
        elif args.sse:
            mcp.run("sse", host=args.host, port=args.port)
        else:
            mcp.run()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
