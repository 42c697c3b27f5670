"""How to reach one MCP server: ``ServerSpec``, whose ``key`` names its connection.

Pure Python, no Django: built from a server row by ``mcp_bridge.services.servers.spec_for``
(plus the caller's OAuth grant, ``mcp_bridge.oauth``) and handed to
``mcp_bridge.connections.ConnectionManager``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

import httpx2

__all__ = ["ConnectMode", "ServerSpec", "TransportName"]

TransportName = Literal["stdio", "streamable_http", "sse"]
ConnectMode = Literal["auto", "legacy"]


@dataclass(frozen=True)
class ServerSpec:
    """How to reach one MCP server. Immutable; ``key`` identifies the connection.

    ``env`` and ``headers`` are kept out of ``repr`` (they often carry secrets) and out of
    the hash (mappings are not hashable); two specs with the same key are expected to be the
    same configuration — ``ServerSpec.create`` guarantees that by hashing the config into the
    key.
    """

    key: str
    transport: TransportName = "stdio"
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False, hash=False)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False, hash=False)
    call_timeout: float = 60.0
    connect_timeout: float = 20.0
    # "auto" speaks the 2026 stateless protocol to servers that offer it and falls back to the
    # 2025-11-25 handshake; "legacy" forces the handshake (needed for server→client sampling,
    # elicitation and roots on older SDKs).
    mode: ConnectMode = "auto"
    # Human-readable name for messages; defaults to the key.
    name: str = ""
    # An httpx Auth for HTTP transports (OAuth: ``mcp_bridge.oauth``); like headers, kept
    # out of repr, hash and key: whoever builds the spec puts the grant into the key.
    auth: httpx2.Auth | None = field(default=None, repr=False, hash=False, compare=False)
    # The lowest MCP log level asked of the server (None: its default): 2026-era requests
    # carry it as their opt-in, 2025-era connections send `logging/setLevel` once connected.
    log_level: str | None = None

    def __post_init__(self) -> None:
        if not self.key:
            raise ValueError("ServerSpec.key must not be empty")
        if self.transport not in ("stdio", "streamable_http", "sse"):
            raise ValueError(f"Unknown transport {self.transport!r}")
        if self.transport == "stdio" and not self.command:
            raise ValueError("A stdio server needs a command")
        if self.transport != "stdio" and not self.url:
            raise ValueError(f"A {self.transport} server needs a url")
        if self.mode not in ("auto", "legacy"):
            raise ValueError(f"Unknown mode {self.mode!r}")
        if self.call_timeout <= 0 or self.connect_timeout <= 0:
            raise ValueError("Timeouts must be positive")
        # Freeze the mutable inputs so a caller editing its dict cannot change a live spec.
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))
        object.__setattr__(self, "headers", MappingProxyType(dict(self.headers)))

    @classmethod
    def create(cls, slug: str, **config: Any) -> ServerSpec:
        """Build a spec whose key is ``"<slug>:<hash of config>"``.

        Any change to the configuration (command, env, url, timeouts…) yields a new key and
        thus a new connection. The manager treats keys with the same ``<slug>:`` prefix as
        versions of one server: when a new one is first used, the old connection finishes
        its running calls and stops.
        """
        material = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in config.items()}
        if "args" in material:
            material["args"] = list(material["args"])
        digest = hashlib.sha256(
            json.dumps(material, sort_keys=True, default=str).encode()
        ).hexdigest()[:16]
        config.setdefault("name", slug)
        return cls(key=f"{slug}:{digest}", **config)

    @property
    def label(self) -> str:
        return self.name or self.key
