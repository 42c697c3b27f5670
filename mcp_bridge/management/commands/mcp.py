"""`manage.py mcp …` — add, import, list and exercise MCP servers from the terminal.

mcp add NAME --stdio "CMD ARGS" [--env K=V]...
mcp add NAME --url URL [--header K=V]... [--sse]
mcp import FILE                 (the `mcpServers` JSON of desktop MCP clients)
mcp list
mcp tools NAME [--json]
mcp resource NAME URI [--json]
mcp call NAME TOOL --args JSON [--json]   (prints the canonical result)
mcp reseal-grants               (re-encrypt OAuth grants with the newest key; docs/oauth.md)
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from channels.db import database_sync_to_async
from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcp_bridge import gateway, services
from mcp_bridge.errors import BridgeError
from mcp_bridge.models import McpServer, Tool
from mcp_bridge.normalize import (
    StagedPayload,
    build_sanitized_tool_result,
    normalize_tool_result,
    text_fallback,
)

# Query parameters whose values are hidden by `mcp list` (hosted servers put keys in URLs).
_SECRET_PARAM = re.compile(r"key|token|secret|pass|auth|sig|session|credential", re.IGNORECASE)


def _pairs(values: list[str] | None, sep: str = "=") -> dict[str, str]:
    result: dict[str, str] = {}
    for value in values or []:
        key, found, val = value.partition(sep)
        if not found or not key.strip():
            # Not echoed back: the argument may hold a secret.
            raise CommandError(f"Expected KEY{sep}VALUE; one argument has no key or no '{sep}'.")
        result[key.strip()] = val.strip()
    return result


def _string_map(entry: dict[str, Any], field: str) -> dict[str, str]:
    """An `env` / `headers` object of an mcpServers entry, values as strings."""
    value = entry.get(field)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise services.ServerConfigError(f"'{field}' is not an object.")
    if not all(isinstance(v, str | int | float) for v in value.values()):
        raise services.ServerConfigError(f"'{field}' has a value that is not a string.")
    return {str(k): str(v) for k, v in value.items()}


def _import_fields(entry: Any) -> dict[str, Any]:
    """`add_server` arguments for one mcpServers entry; ServerConfigError if it is unusable."""
    if not isinstance(entry, dict):
        raise services.ServerConfigError("Not an object.")
    url = entry.get("url")
    if url is not None:
        if not isinstance(url, str):
            raise services.ServerConfigError("'url' is not a string.")
        transport = "sse" if entry.get("type") == "sse" else "streamable_http"
        return {"transport": transport, "url": url, "headers": _string_map(entry, "headers")}
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        raise services.ServerConfigError("It has neither a 'command' nor a 'url'.")
    args = entry.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str | int | float) for a in args):
        raise services.ServerConfigError("'args' is not a list of strings.")
    return {
        "transport": "stdio",
        "command": command,
        "args": [str(a) for a in args],
        "env": _string_map(entry, "env"),
    }


def _display_url(url: str) -> str:
    """The URL without credentials: no userinfo, secret-looking query values masked."""
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return "(unparseable URL)"
    netloc = parts.netloc.rpartition("@")[2]
    masked = [(k, "***" if _SECRET_PARAM.search(k) else v) for k, v in query]
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(masked, safe="*"), ""))


class _MediaFolder:
    """Where `mcp call` saves large media: a private folder made on first use.

    ``mkdtemp`` (unique, mode 0700) rather than a fixed shared /tmp path, which another
    local user could fill with symlinks; names never overwrite each other.
    """

    def __init__(self) -> None:
        self.path: Path | None = None

    def stage(self, payload: StagedPayload) -> dict[str, Any]:
        if self.path is None:
            self.path = Path(tempfile.mkdtemp(prefix="atrium-cli-media-"))
        name = Path(payload.filename or "").name.strip(". ") or f"{payload.kind}.bin"
        path = self.path / name
        number = 1
        while path.exists():
            number += 1
            path = self.path / f"{number}-{name}"
        with path.open("xb") as out:
            out.write(payload.data)
        return {"status": "saved", "path": str(path), "size": len(payload.data)}


class Command(BaseCommand):
    help = "Manage MCP servers: add, import, list, tools, resource, call."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        add = sub.add_parser("add", help="register a server")
        add.add_argument("name")
        target = add.add_mutually_exclusive_group(required=True)
        target.add_argument("--stdio", metavar="COMMAND", help='e.g. "npx -y my-server --stdio"')
        target.add_argument("--url", help="streamable HTTP (or SSE with --sse) endpoint")
        add.add_argument("--sse", action="store_true")
        add.add_argument("--env", action="append", metavar="K=V")
        add.add_argument("--header", action="append", metavar="K=V")
        add.add_argument("--timeout", type=float, default=60.0)
        add.add_argument(
            "--auth",
            choices=["none", "headers", "oauth_shared", "oauth_member"],
            default="",
            help="how calls sign in (default: headers if any are given, else none)",
        )
        imp = sub.add_parser("import", help="import an mcpServers JSON file")
        imp.add_argument("file")
        sub.add_parser("list", help="list servers and their health")
        tools = sub.add_parser("tools", help="list a server's tools")
        tools.add_argument("name")
        tools.add_argument("--json", action="store_true")
        resource = sub.add_parser("resource", help="read a UI resource")
        resource.add_argument("name")
        resource.add_argument("uri")
        resource.add_argument("--json", action="store_true")
        call = sub.add_parser("call", help="call a tool and print the canonical result")
        call.add_argument("name")
        call.add_argument("tool")
        call.add_argument("--args", dest="tool_args", default="{}")
        call.add_argument("--json", action="store_true")
        sub.add_parser("reseal-grants", help="re-encrypt OAuth grants with the newest key")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        try:
            if action == "add":
                self._add(options)
            elif action == "import":
                self._import(options["file"])
            elif action == "list":
                self._list()
            elif action == "reseal-grants":
                count = services.grants_reseal()
                self.stdout.write(f"Resealed {count} OAuth grant(s) with the newest key.")
            else:
                asyncio.run(self._remote(action, options))
        except services.ServerConfigError as exc:
            raise CommandError(str(exc)) from exc
        except BridgeError as exc:
            raise CommandError(exc.user_message) from exc

    # -- local ---------------------------------------------------------------------------

    def _add(self, options: dict[str, Any]) -> None:
        if options["stdio"] is not None:
            if options["sse"] or options["header"]:
                raise CommandError("--sse and --header apply to --url servers only.")
            try:
                parts = shlex.split(options["stdio"])
            except ValueError as exc:
                raise CommandError(f"Cannot parse the --stdio command: {exc}.") from exc
            if not parts:
                raise CommandError("--stdio needs a command.")
            server = services.add_server(
                name=options["name"],
                transport="stdio",
                command=parts[0],
                args=parts[1:],
                env=_pairs(options["env"]),
                call_timeout=options["timeout"],
            )
        else:
            if options["env"]:
                raise CommandError("--env applies to --stdio servers only.")
            server = services.add_server(
                name=options["name"],
                transport="sse" if options["sse"] else "streamable_http",
                url=options["url"],
                headers=_pairs(options["header"]),
                call_timeout=options["timeout"],
                auth_mode=options["auth"],
            )
        self.stdout.write(f"Added '{server.slug}' ({server.transport}).")

    def _import(self, path: str) -> None:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise CommandError(f"Cannot read {path}: {exc}") from exc
        entries = data.get("mcpServers") if isinstance(data, dict) else None
        if not isinstance(entries, dict):
            raise CommandError("The file has no 'mcpServers' object.")
        for name, entry in entries.items():
            # One bad entry (wrong types included) is reported and skipped, never fatal.
            try:
                services.add_server(name=name, **_import_fields(entry))
            except services.ServerConfigError as exc:
                self.stderr.write(f"Skipped '{name}': {exc}")
                continue
            self.stdout.write(f"Imported '{name}'.")

    def _list(self) -> None:
        for server in McpServer.objects.order_by("slug"):
            target = (
                _display_url(server.url)
                if server.url
                else " ".join([server.command, *map(str, server.args)])
            )
            health = (
                "ok"
                if server.last_seen and not server.last_error
                else (
                    f"error: {server.last_error[:60]}" if server.last_error else "never connected"
                )
            )
            state = "" if server.enabled else " (disabled)"
            self.stdout.write(f"{server.slug:<20} {server.transport:<16} {health}{state}  {target}")

    # -- remote --------------------------------------------------------------------------

    async def _remote(self, action: str, options: dict[str, Any]) -> None:
        server = await database_sync_to_async(
            McpServer.objects.filter(slug=options["name"]).first
        )()
        if server is None:
            raise CommandError(f"No server named '{options['name']}' (see `mcp list`).")
        try:
            if action == "tools":
                await self._tools(server, options["json"])
            elif action == "resource":
                await self._resource(server, options["uri"], options["json"])
            elif action == "call":
                await self._call(server, options)
        finally:
            await gateway.close_all()

    async def _tools(self, server: McpServer, as_json: bool) -> None:
        await gateway.refresh_catalogue(server)
        tools = await database_sync_to_async(
            lambda: list(Tool.objects.filter(server=server, present=True).order_by("name"))
        )()
        if as_json:
            self.stdout.write(
                json.dumps(
                    [
                        {
                            "name": t.name,
                            "title": t.title,
                            "description": t.description,
                            "inputSchema": t.input_schema,
                            "annotations": t.annotations,
                            "visibility": t.visibility,
                            "resourceUri": t.resource_uri or None,
                        }
                        for t in tools
                    ],
                    indent=2,
                )
            )
            return
        for tool in tools:
            ui = f"  view: {tool.resource_uri}" if tool.resource_uri else ""
            self.stdout.write(f"{tool.name:<28} [{','.join(tool.visibility)}]{ui}")

    async def _resource(self, server: McpServer, uri: str, as_json: bool) -> None:
        resource = await gateway.ui_resource(server, uri)
        if as_json:
            self.stdout.write(
                json.dumps(
                    {
                        "uri": resource.uri,
                        "mimeType": resource.mime_type,
                        "flavor": resource.flavor,
                        "contentHash": resource.content_hash,
                        "size": resource.size,
                        "meta": resource.meta,
                    },
                    indent=2,
                )
            )
            return
        self.stdout.write(
            f"{resource.uri}  {resource.mime_type}  {resource.size} bytes  "
            f"sha256 {resource.content_hash[:16]}…"
        )

    async def _call(self, server: McpServer, options: dict[str, Any]) -> None:
        try:
            arguments = json.loads(options["tool_args"])
        except ValueError as exc:
            raise CommandError(f"--args is not valid JSON: {exc}") from exc
        tool = await gateway.tool_for(server, options["tool"])
        raw, latency = await gateway.call_tool(server, tool, arguments)
        normalized = normalize_tool_result(raw, stage=_MediaFolder().stage)
        sanitized = build_sanitized_tool_result(
            normalized, tool_name=tool.name, tool_call_id="cli", server=server.slug
        )
        if options["json"]:
            self.stdout.write(json.dumps(sanitized, indent=2))
        else:
            self.stdout.write(text_fallback(sanitized))
            for part in sanitized["parts"]:
                asset = part.get("asset")
                if isinstance(asset, dict) and asset.get("path"):
                    self.stdout.write(f"  saved to {asset['path']}")
            self.stdout.write(f"({latency:.0f} ms)")
