"""Routing by host: the app host serves the app, each sandbox host only its proxy.

The Host header is read by chat.sandbox_hosts (the one place that builds or parses a sandbox
host); here each request is routed by it:

- the app host → the app;
- ``<label>.<SANDBOX_DOMAIN>`` with ``<label>`` one DNS label → ``config.urls_sandbox``, no
  cookie read and none set (the page itself checks the label is its view's);
- any other name under the sandbox domain (its bare parent, deeper names) → 404, no cookies;
- anything else → Django's ALLOWED_HOSTS check (400).
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseNotFound

from chat.sandbox_hosts import is_sandbox_host, sandbox_label_of


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
        label = sandbox_label_of(host)
        if label is None:
            # The wildcard's bare parent or a deeper name: no server lives there.
            return _without_cookies(HttpResponseNotFound("Not a sandbox host."))
        request.urlconf = "config.urls_sandbox"
        request.is_sandbox = True
        request.sandbox_label = label
        return _without_cookies(self.get_response(request))
