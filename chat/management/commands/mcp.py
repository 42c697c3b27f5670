"""`manage.py mcp …` — add, import, bind, list and exercise MCP servers from the terminal.

mcp add NAME --stdio "CMD ARGS" [--env K=V]...
mcp add NAME --url URL [--header K=V]... [--sse]
mcp import FILE [--bind WORKSPACE] [--auto TOOL]...
                                (the `mcpServers` JSON of desktop MCP clients; idempotent)
mcp bind SERVER --workspace W [--thread ID] [--auto TOOL]...    (idempotent)
mcp list
mcp tools NAME [--json]
mcp resource NAME URI [--json]
mcp call NAME TOOL --args JSON [--json]   (prints the canonical result)
mcp reseal-grants               (re-encrypt OAuth grants, server secrets and provider keys
                                 with the newest key; docs/oauth.md)

It lives in `chat` (not `mcp_bridge` or `bindings`) because `bind` and `import --bind` use
the binding services and name chat's workspaces and threads, and layers import downwards
only. Every change goes through a service that audits it (docs/operators.md).
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

from bindings.services.bindings import binding_ensure
from bindings.services.errors import BindingError
from mcp_bridge import gateway
from mcp_bridge.errors import BridgeError
from mcp_bridge.models import McpServer, Tool
from mcp_bridge.normalize import (
    StagedPayload,
    build_sanitized_tool_result,
    normalize_tool_result,
    text_fallback,
)
from mcp_bridge.sealed_fields import reseal_column
from mcp_bridge.server_config import ConfigFileError, parse_mcp_servers
from mcp_bridge.services.oauth_grants import grant_reseal_all
from mcp_bridge.services.servers import ServerConfigError, server_add, server_import

from ...models import Thread, Workspace

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


def _workspace(slug: str) -> Workspace:
    workspace = Workspace.objects.filter(slug=slug).first()
    if workspace is None:
        raise CommandError(f"No workspace with the slug '{slug}'.")
    return workspace


class Command(BaseCommand):
    help = "Manage MCP servers: add, import, bind, list, tools, resource, call."

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
        imp = sub.add_parser("import", help="import an mcpServers JSON file (idempotent)")
        imp.add_argument("file")
        imp.add_argument(
            "--bind", metavar="WORKSPACE", help="bind every imported server to this workspace"
        )
        imp.add_argument(
            "--auto", action="append", metavar="TOOL", help="with --bind: run TOOL without asking"
        )
        bind = sub.add_parser("bind", help="bind a server to a workspace or thread (idempotent)")
        bind.add_argument("name", metavar="SERVER")
        bind.add_argument("--workspace", required=True, metavar="SLUG")
        bind.add_argument("--thread", type=int, metavar="ID", help="bind to this thread only")
        bind.add_argument("--auto", action="append", metavar="TOOL", help="run TOOL without asking")
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
                self._import(options["file"], options["bind"], options["auto"] or [])
            elif action == "bind":
                self._bind(options)
            elif action == "list":
                self._list()
            elif action == "reseal-grants":
                count = grant_reseal_all()
                self.stdout.write(f"Resealed {count} OAuth grant(s) with the newest key.")
                secrets = sum(reseal_column(McpServer, name) for name in ("env", "headers"))
                secrets += reseal_column(Workspace, "provider_api_key")
                self.stdout.write(f"Resealed {secrets} server secret(s) and provider key(s).")
            else:
                asyncio.run(self._remote(action, options))
        except ServerConfigError as exc:
            raise CommandError(str(exc)) from exc
        except BindingError as exc:
            raise CommandError(exc.message) from exc
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
            server = server_add(
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
            server = server_add(
                name=options["name"],
                transport="sse" if options["sse"] else "streamable_http",
                url=options["url"],
                headers=_pairs(options["header"]),
                call_timeout=options["timeout"],
                auth_mode=options["auth"],
            )
        self.stdout.write(f"Added '{server.slug}' ({server.transport}).")

    def _import(self, path: str, workspace_slug: str | None, auto: list[str]) -> None:
        if auto and not workspace_slug:
            raise CommandError("--auto applies with --bind only.")
        # The workspace first: a typo must not leave half a set-up behind.
        workspace = _workspace(workspace_slug) if workspace_slug else None
        try:
            entries = parse_mcp_servers(json.loads(Path(path).read_text()))
        except (OSError, ValueError) as exc:
            if isinstance(exc, ConfigFileError):
                raise CommandError(str(exc)) from exc
            raise CommandError(f"Cannot read {path}: {exc}") from exc
        outcomes = server_import(entries=entries, source=Path(path).name)
        for outcome in outcomes:
            if outcome.status == "skipped":
                # One bad entry (wrong types included) is reported and skipped, never fatal.
                self.stderr.write(f"Skipped '{outcome.name}': {outcome.error}")
                continue
            detail = f" ({', '.join(outcome.changed)})" if outcome.changed else ""
            self.stdout.write(f"{outcome.status.capitalize()} '{outcome.name}'{detail}.")
            if workspace is not None and outcome.server is not None:
                self._ensure_binding(outcome.server, workspace, None, auto)
        skipped = sum(1 for outcome in outcomes if outcome.status == "skipped")
        if skipped:
            raise CommandError(
                f"{skipped} of {len(outcomes)} entries were skipped (see above); "
                "the others were imported."
            )

    def _bind(self, options: dict[str, Any]) -> None:
        server = McpServer.objects.filter(slug=options["name"]).first()
        if server is None:
            raise CommandError(f"No server named '{options['name']}' (see `mcp list`).")
        workspace = _workspace(options["workspace"])
        thread = None
        if options["thread"] is not None:
            thread = Thread.objects.filter(pk=options["thread"]).first()
            if thread is None:
                raise CommandError(f"No thread with id {options['thread']}.")
        self._ensure_binding(server, workspace, thread, options["auto"] or [])

    def _ensure_binding(
        self, server: McpServer, workspace: Workspace, thread: Thread | None, auto: list[str]
    ) -> None:
        outcome = binding_ensure(
            server=server, workspace=workspace, thread=thread, auto_tools=auto, actor_label="cli"
        )
        scope = f"thread {thread.pk}" if thread is not None else f"workspace '{workspace.slug}'"
        verb = "Bound" if outcome.created else "Already bound:"
        state = "" if outcome.binding.enabled else " (the binding is disabled)"
        self.stdout.write(f"{verb} '{server.slug}' to {scope}{state}.")
        if outcome.auto_approved:
            self.stdout.write(f"  runs without asking: {', '.join(outcome.auto_approved)}")
        if server.catalogue_refreshed_at is not None:
            known = set(Tool.objects.filter(server=server).values_list("name", flat=True))
            unknown = [name for name in auto if name not in known]
            if unknown:
                self.stderr.write(
                    f"Note: '{server.slug}' has not listed {', '.join(unknown)} (yet); "
                    "the rule applies once it does."
                )

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
