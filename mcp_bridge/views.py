"""Sign-in to MCP servers on the app origin: start (POST, CSRF) and the OAuth callback.

Thin: the flow is ``mcp_bridge.oauth``; refusals are audited there and in the services.
"""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET, require_POST

from . import oauth
from .models import OAUTH_MODES, AuthMode, McpServer


def _result(request: HttpRequest, *, ok: bool, message: str, server: str = "", status: int = 200):
    context = {"ok": ok, "message": message, "server": server}
    return render(request, "mcp_bridge/oauth_result.html", context, status=status)


@sync_to_async
def _user(request: HttpRequest):
    return request.user if request.user.is_authenticated else None


@sync_to_async
def _server(slug: str) -> McpServer | None:
    return McpServer.objects.filter(slug=slug, enabled=True, auth_mode__in=OAUTH_MODES).first()


@require_POST
async def connect(request: HttpRequest, slug: str) -> HttpResponse:
    """Start signing in to ``slug`` (the caller's own account, or the shared grant for
    staff); a page that continues to the provider's consent page. Not a redirect: the
    host pages' CSP (``form-action 'self'``) rightly blocks a form post redirected to
    another origin."""
    user = await _user(request)
    if user is None:
        return _result(request, ok=False, message="Sign in to Atrium first.", status=403)
    server = await _server(slug)
    if server is None:
        return _result(request, ok=False, message="No server to connect here.", status=404)
    shared = server.auth_mode == AuthMode.OAUTH_SHARED
    if shared and not user.is_staff:
        message = f"Only an administrator can connect {server.name} for everyone."
        return _result(request, ok=False, message=message, server=server.name, status=403)
    try:
        url = await oauth.start_connect(server=server, user=user, shared=shared)
    except oauth.ConnectFailed as exc:
        return _result(request, ok=False, message=str(exc), server=server.name, status=502)
    context = {"server": server.name, "authorize_url": url, "shared": shared}
    return render(request, "mcp_bridge/oauth_continue.html", context)


@require_GET
async def callback(request: HttpRequest) -> HttpResponse:
    """The provider sends the browser back here with ``code`` and ``state``."""
    user = await _user(request)
    if user is None:
        return _result(request, ok=False, message="Sign in to Atrium first.", status=403)
    query = {key: request.GET.get(key, "")[:2000] for key in ("code", "state", "iss", "error")}
    ok, message = await oauth.deliver_callback(state=query["state"], user=user, query=query)
    return _result(request, ok=ok, message=message, status=200 if ok else 400)


@require_GET
@cache_control(public=True, max_age=3600)
def client_metadata(request: HttpRequest) -> HttpResponse:
    """Atrium's OAuth client ID metadata document: its URL is Atrium's client id at
    authorization servers that support them (``oauth.client_metadata_url``). Public, no
    secrets; 404 when Atrium is not served over https (then it registers dynamically)."""
    document = oauth.client_metadata_document()
    if document is None:
        raise Http404("Atrium publishes a client metadata document only over https.")
    return JsonResponse(document)
