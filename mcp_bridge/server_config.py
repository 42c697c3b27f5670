"""The `mcpServers` JSON of desktop MCP clients, read into server settings. Pure.

The file (Claude Desktop, Cursor, VS Code and others write the same shape)::

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "some-server"], "env": {"TOKEN": "…"}},
        "hosted": {"url": "https://mcp.example.com/mcp", "headers": {"X-Key": "…"}},
        "old": {"type": "sse", "url": "https://mcp.example.com/sse"}
    }}

Each entry becomes the keyword arguments of ``mcp_bridge.services.servers.server_add`` or an error
message naming what is wrong; one bad entry never hides the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ConfigFileError", "ServerEntry", "parse_mcp_servers"]


class ConfigFileError(ValueError):
    """The file as a whole is unusable (not JSON, no `mcpServers` object)."""


@dataclass(frozen=True)
class ServerEntry:
    name: str
    # `server_add` keyword arguments (transport, command/args/env or url/headers)…
    fields: dict[str, Any] | None = None
    # …or why the entry cannot be used.
    error: str = ""


def _string_map(entry: dict[str, Any], field: str) -> dict[str, str]:
    """An `env` / `headers` object of an entry, values as strings."""
    value = entry.get(field)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"'{field}' is not an object.")
    if not all(isinstance(v, str | int | float) for v in value.values()):
        raise ValueError(f"'{field}' has a value that is not a string.")
    return {str(k): str(v) for k, v in value.items()}


def entry_fields(entry: Any) -> dict[str, Any]:
    """`server_add` arguments for one entry; ``ValueError`` with a clear message if unusable."""
    if not isinstance(entry, dict):
        raise ValueError("Not an object.")
    url = entry.get("url")
    if url is not None:
        if not isinstance(url, str):
            raise ValueError("'url' is not a string.")
        transport = "sse" if entry.get("type") == "sse" else "streamable_http"
        return {"transport": transport, "url": url, "headers": _string_map(entry, "headers")}
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ValueError("It has neither a 'command' nor a 'url'.")
    args = entry.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str | int | float) for a in args):
        raise ValueError("'args' is not a list of strings.")
    return {
        "transport": "stdio",
        "command": command,
        "args": [str(a) for a in args],
        "env": _string_map(entry, "env"),
    }


def parse_mcp_servers(data: Any) -> list[ServerEntry]:
    """Every entry of a parsed `mcpServers` document, in file order."""
    entries = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise ConfigFileError("The file has no 'mcpServers' object.")
    parsed: list[ServerEntry] = []
    for name, entry in entries.items():
        if not name.strip():
            parsed.append(ServerEntry(name=name, error="The entry has no name."))
            continue
        try:
            parsed.append(ServerEntry(name=name, fields=entry_fields(entry)))
        except ValueError as exc:
            parsed.append(ServerEntry(name=name, error=str(exc)))
    return parsed
