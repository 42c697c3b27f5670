"""Where Atrium may send requests whose URLs a remote server chose.

Signing in to an MCP server follows URLs that server names: its protected-resource
metadata, its authorization server's metadata, the registration and token endpoints. A
server that names a loopback, private, link-local or otherwise non-public address would
make Atrium probe its own network (blind SSRF). So every such request is checked when it
is sent, and again on every redirect hop (each hop is a request through the same
transport): its host is resolved and every address must be public — unless the origin is
the MCP server's own (an administrator chose that URL) or an administrator names it in
``ATRIUM_OAUTH_ALLOWED_PRIVATE_ORIGINS``.

:func:`address_is_public` and :func:`origin_of` are the pure rule; :class:`GuardedTransport`
applies it to an ``httpx2`` client.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

import httpx2
from django.conf import settings

DEFAULT_PORTS = {"http": 80, "https": 443}


def address_is_public(address: str) -> bool:
    """Whether ``address`` (an IP literal) is a public unicast address: not loopback,
    private, link-local, unique-local, shared (CGNAT), multicast, reserved or unspecified.
    An IPv4 address written as IPv6 (``::ffff:10.0.0.1``) is judged as the IPv4 one."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not (ip.is_multicast or ip.is_reserved or ip.is_unspecified)


def origin_of(url: str) -> str:
    """``scheme://host:port`` of ``url``, lower-cased, with the default port written out
    (so ``https://Auth.example`` and ``https://auth.example:443`` are one origin)."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    try:
        port = parts.port or DEFAULT_PORTS.get(scheme, 0)
    except ValueError:
        port = 0
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


class EgressRefused(Exception):
    """A request to a non-public address that nobody allowed; ``str()`` names the origin."""

    def __init__(self, origin: str, address: str) -> None:
        super().__init__(f"{origin} resolves to {address}, which is not a public address")
        self.origin = origin
        self.address = address


async def refused_address(url: httpx2.URL, *, trusted: frozenset[str]) -> str | None:
    """The first non-public address ``url``'s host resolves to, or None when the request
    may go (a public host, or a trusted origin)."""
    origin = origin_of(str(url))
    if origin in trusted:
        return None
    host = url.host
    port = url.port or DEFAULT_PORTS.get(url.scheme, 0)
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
        addresses = [host]
    except ValueError:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = [str(info[4][0]) for info in infos]
    return next((a for a in addresses if not address_is_public(a)), None)


class GuardedTransport(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport that refuses (``EgressRefused``) any request whose host is
    not public, outside the ``trusted`` origins (the MCP server's own) and the origins an
    administrator allows (``ATRIUM_OAUTH_ALLOWED_PRIVATE_ORIGINS``)."""

    def __init__(self, trusted: Iterable[str]) -> None:
        allowed = getattr(settings, "ATRIUM_OAUTH_ALLOWED_PRIVATE_ORIGINS", [])
        self._trusted = frozenset(origin_of(o) for o in [*trusted, *allowed] if o)
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        address = await refused_address(request.url, trusted=self._trusted)
        if address is not None:
            raise EgressRefused(origin_of(str(request.url)), address)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()
