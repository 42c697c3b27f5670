"""Legacy MCP-UI resources (the pre-MCP-Apps generation), built by hand as embedded resources.

The PyPI helper `mcp-ui-server` 1.0.0 does not work with `mcp` 2.x, so the three legacy
content types are built directly as `EmbeddedResource`s:

- `show_raw_html`     `text/html`: a view speaking the legacy postMessage protocol;
- `show_external_url` `text/uri-list`: a page served by this process's own small HTTP server;
- `show_remote_dom`   `application/vnd.mcp-ui.remote-dom+javascript; framework=react`.

Run over stdio (default), streamable HTTP or SSE:

    python examples/legacy/server.py
    python examples/legacy/server.py --http --host 127.0.0.1 --port 8104   # :8104/mcp

The external page is served on `--page-port` / `LEGACY_PAGE_PORT` (default 0: a free port
chosen at start-up) by a daemon thread, in every transport mode.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Annotated, Any, Final

from mcp.server.mcpserver import MCPServer
from mcp.types import (
    CallToolResult,
    EmbeddedResource,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)
from pydantic import Field

HERE: Final = Path(__file__).parent
DEFAULT_HTTP_PORT: Final = 8104
RAW_URI: Final = "ui://legacy/raw"
EXTERNAL_URI: Final = "ui://legacy/external"
REMOTE_DOM_URI: Final = "ui://legacy/remote-dom"
REMOTE_DOM_MIME: Final = "application/vnd.mcp-ui.remote-dom+javascript; framework=react"
PREFERRED_FRAME_SIZE: Final = ["100%", "320px"]
READ_ONLY: Final = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def ui_meta(render_data: dict[str, Any]) -> dict[str, Any]:
    """The legacy `mcpui.dev/ui-*` keys on a resource's `_meta`."""
    return {
        "mcpui.dev/ui-preferred-frame-size": PREFERRED_FRAME_SIZE,
        "mcpui.dev/ui-initial-render-data": render_data,
    }


def ui_resource(
    uri: str, mime_type: str, text: str, render_data: dict[str, Any]
) -> EmbeddedResource:
    return EmbeddedResource(
        type="resource",
        resource=TextResourceContents(
            uri=uri, mime_type=mime_type, text=text, _meta=ui_meta(render_data)
        ),
    )


def fallback(text: str) -> TextContent:
    """Text for the model and for clients that cannot render UI resources."""
    return TextContent(type="text", text=text)


class PageHandler(BaseHTTPRequestHandler):
    server_version = "AtriumLegacyPage/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        return  # stdout is the stdio transport; keep stderr quiet too

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path not in ("/", "/index.html"):
            self._send(HTTPStatus.NOT_FOUND, "text/plain; charset=utf-8", b"not found\n")
            return
        page = (HERE / "page.html").read_text(encoding="utf-8")
        page = page.replace("__SERVED_AT__", datetime.now(UTC).strftime("%H:%M:%S UTC"))
        self._send(HTTPStatus.OK, "text/html; charset=utf-8", page.encode("utf-8"))

    def _send(self, status: HTTPStatus, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)


class PageServer(ThreadingHTTPServer):
    daemon_threads = True


def start_page_server(port: int) -> PageServer:
    httpd = PageServer(("127.0.0.1", port), PageHandler)
    threading.Thread(target=httpd.serve_forever, name="legacy-page", daemon=True).start()
    return httpd


def create_server(page_url: str) -> MCPServer:
    mcp = MCPServer(
        "legacy",
        title="Legacy MCP-UI samples",
        version="1.0.0",
        instructions="Returns legacy MCP-UI resources (raw HTML, external URL, remote DOM).",
    )

    @mcp.tool(title="Show a raw HTML view", annotations=READ_ONLY)
    def show_raw_html(
        greeting: Annotated[
            str, Field(description="Text the view shows")
        ] = "Hello from a legacy MCP-UI view",
    ) -> CallToolResult:
        """Show an interactive legacy MCP-UI view (text/html) that calls tools and posts prompts."""
        render_data = {"greeting": greeting, "user": {"name": "Ada"}, "accent": "#6366f1"}
        html = (HERE / "raw.html").read_text(encoding="utf-8")
        return CallToolResult(
            content=[
                fallback(f"Showing a legacy MCP-UI view: {greeting}"),
                ui_resource(RAW_URI, "text/html", html, render_data),
            ]
        )

    @mcp.tool(title="Show an external page", annotations=READ_ONLY)
    def show_external_url(
        url: Annotated[
            str | None, Field(description="http(s) URL to show; default: this server's page")
        ] = None,
    ) -> CallToolResult:
        """Show a web page in a frame (legacy text/uri-list resource)."""
        target = url or page_url
        if not target.startswith(("http://", "https://")):
            return CallToolResult(
                content=[fallback("Only http(s) URLs can be shown.")], is_error=True
            )
        uri_list = (
            f"# Atrium legacy external page (RFC 2483: comment lines are ignored)\r\n{target}\r\n"
        )
        return CallToolResult(
            content=[
                fallback(f"Showing the page at {target}"),
                ui_resource(EXTERNAL_URI, "text/uri-list", uri_list, {"source": "legacy-example"}),
            ]
        )

    @mcp.tool(title="Show a remote-DOM view", annotations=READ_ONLY)
    def show_remote_dom() -> CallToolResult:
        """Show a legacy remote-DOM view (a script that builds React-style UI elements)."""
        script = (HERE / "remote_dom.js").read_text(encoding="utf-8")
        return CallToolResult(
            content=[
                fallback("Showing a remote-DOM counter view."),
                ui_resource(
                    REMOTE_DOM_URI, REMOTE_DOM_MIME, script, {"start": 3, "label": "Clicks"}
                ),
            ]
        )

    @mcp.tool(
        title="Echo",
        annotations=ToolAnnotations(
            read_only_hint=True, idempotent_hint=True, open_world_hint=False
        ),
    )
    def legacy_echo(
        message: Annotated[str, Field(description="Text to echo back")] = "",
        data: Annotated[dict[str, Any] | None, Field(description="Any JSON object to echo")] = None,
    ) -> CallToolResult:
        """Echo the parameters back (the legacy views call this)."""
        echoed = {"message": message, "data": data or {}}
        received_at = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        return CallToolResult(
            content=[fallback(f"Echo: {message}" if message else "Echo: (no message)")],
            structured_content={"echo": echoed, "receivedAt": received_at},
        )

    return mcp


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Legacy MCP-UI resources MCP server.")
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp")
    transport.add_argument("--sse", action="store_true", help="serve the legacy SSE transport")
    parser.add_argument("--host", default="127.0.0.1", help="MCP HTTP bind address")
    parser.add_argument("--port", type=int, default=DEFAULT_HTTP_PORT, help="MCP HTTP port")
    parser.add_argument(
        "--page-port",
        type=int,
        default=int(os.environ.get("LEGACY_PAGE_PORT", "0")),
        help="port of the external demo page (env LEGACY_PAGE_PORT; 0 = any free port)",
    )
    args = parser.parse_args(argv)

    page_server = start_page_server(args.page_port)
    page_url = f"http://127.0.0.1:{page_server.server_address[1]}/"
    print(f"legacy: external page at {page_url}", file=sys.stderr)
    mcp = create_server(page_url)
    try:
        if args.http:
            mcp.run("streamable-http", host=args.host, port=args.port)
        elif args.sse:
            mcp.run("sse", host=args.host, port=args.port)
        else:
            mcp.run()
    except KeyboardInterrupt:
        pass  # Ctrl-C: the HTTP server has already shut down cleanly
    finally:
        page_server.shutdown()
        page_server.server_close()


if __name__ == "__main__":
    main()
