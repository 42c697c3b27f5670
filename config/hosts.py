"""Routing by host: the app host serves the app, each server's sandbox host only its proxy.

Every MCP server's views run on an origin of their own, ``<server-key>.<SANDBOX_DOMAIN>``
(DESIGN §7, docs/sandbox.md). The Host header is normalized (case, port, one trailing dot)
before anything is decided:

- the app host → the app;
- ``<key>.<SANDBOX_DOMAIN>`` with ``<key>`` one DNS label → ``config.urls_sandbox``, no cookie
  read and none set;
- any other name under the sandbox domain (its bare parent, deeper names) → 404, no cookies;
- anything else → Django's ALLOWED_HOSTS check (400).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseNotFound

# One DNS label: what a server key may be (chat.app_view_bridge.sandbox_key_for makes them).
SERVER_KEY_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")


def normalize_host(host: str) -> str:
    """The host name alone: lower case, no port, no trailing dot ("A.Localhost.:80" → "a.localhost")."""
    name = host.strip().lower()
    if name.startswith("["):
        return name.split("]")[0] + "]"
    name = name.rsplit(":", 1)[0] if ":" in name else name
    return name[:-1] if name.endswith(".") else name


def _under_sandbox_domain(name: str) -> bool:
    domain = settings.SANDBOX_DOMAIN
    return name == domain or name.endswith("." + domain)


def is_sandbox_host(host: str) -> bool:
    """Is this host (any name under the sandbox domain but the app's own) never the app?"""
    name = normalize_host(host)
    return name != settings.APP_HOST and _under_sandbox_domain(name)


def sandbox_server_key(host: str) -> str | None:
    """The server key a sandbox host names, or None when it is not one server's host."""
    name = normalize_host(host)
    if name == settings.APP_HOST or not _under_sandbox_domain(name):
        return None
    label = name[: -len(settings.SANDBOX_DOMAIN) - 1]
    return label if SERVER_KEY_RE.match(label) else None


def _without_cookies(response: HttpResponse) -> HttpResponse:
    response.cookies.clear()
    if response.has_header("Set-Cookie"):
        del response["Set-Cookie"]
    return response


class HostRoutingMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # get_host() first: a host outside ALLOWED_HOSTS is a 400 before any routing.
        host = request.get_host()
        if not is_sandbox_host(host):
            return self.get_response(request)
        # The sandbox origins know nobody: never read or set a cookie there.
        request.COOKIES = {}
        request.META.pop("HTTP_COOKIE", None)
        key = sandbox_server_key(host)
        if key is None:
            # The wildcard's bare parent or a deeper name: no server lives there.
            return _without_cookies(HttpResponseNotFound("Not a sandbox host."))
        request.urlconf = "config.urls_sandbox"
        request.is_sandbox = True
        request.sandbox_server_key = key
        return _without_cookies(self.get_response(request))
