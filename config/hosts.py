"""Routing by host: the app host serves the app, the sandbox host serves only sandbox pages.

The two are different origins (DESIGN §7). Requests for the sandbox host are answered from
``config.urls_sandbox`` with no cookies read and none set.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse


def _strip_port(host: str) -> str:
    host = host.lower()
    if host.startswith("["):
        return host.split("]")[0] + "]"
    return host.rsplit(":", 1)[0] if ":" in host else host


def is_sandbox_host(host: str) -> bool:
    name = _strip_port(host)
    sandbox = settings.SANDBOX_HOST.lower()
    if sandbox.startswith("*."):
        if name.endswith(sandbox[1:]):
            return True
    elif name == sandbox:
        return True
    suffix = settings.SANDBOX_SUBDOMAIN_SUFFIX.lower().lstrip(".")
    return bool(suffix) and (name == suffix or name.endswith("." + suffix))


class HostRoutingMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not is_sandbox_host(request.get_host()):
            return self.get_response(request)
        request.urlconf = "config.urls_sandbox"
        # The sandbox origin knows nobody: never read or set a cookie there.
        request.COOKIES = {}
        request.META.pop("HTTP_COOKIE", None)
        request.is_sandbox = True
        response = self.get_response(request)
        response.cookies.clear()
        if response.has_header("Set-Cookie"):
            del response["Set-Cookie"]
        return response
