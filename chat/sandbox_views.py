"""The sandbox origins' only page: the proxy that hosts one view (DESIGN §7, docs/sandbox.md).

No session or cookie is used here: the signed token alone names the view, and the page is
served only on the sandbox host of the view's own server in the view's own workspace. The
response carries the view's Content-Security-Policy as an HTTP header, so the app document
the proxy writes into its inner frame inherits it.
"""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from chat.sandbox_hosts import sandbox_label_for

from .app_view_bridge import SUPPORTED_FLAVORS, effective_csp, read_view_token
from .models import ToolCall
from .services.app_views import app_view_sandbox_refused

# The spec's frame (security/sandbox-permissions): the app document runs on its server's
# sandbox origin in its workspace, so it has storage of its own, isolated from the app,
# other servers and the same server's views in other workspaces.
# allow-forms is kept for apps with plain <form>s. The host asks for these tokens and the
# proxy never grants more (no popups, no modals, no top navigation).
INNER_SANDBOX = "allow-scripts allow-same-origin allow-forms"
THEMES = ("light", "dark")


@require_GET
def sandbox_proxy(request: HttpRequest, token: str) -> HttpResponse:
    claims = read_view_token(token)
    if claims is None:
        raise Http404("Unknown or expired view.")
    call = (
        ToolCall.objects.select_related("ui_resource", "binding", "server", "thread")
        .filter(pk=claims.call_id, thread_id=claims.thread_id, server_id=claims.server_id)
        .first()
    )
    resource = call.ui_resource if call else None
    if resource is None or resource.flavor not in SUPPORTED_FLAVORS:
        raise Http404("Unknown or expired view.")
    expected = sandbox_label_for(call.server.slug, call.thread.workspace_id)
    if expected != getattr(request, "sandbox_label", None):
        # A valid token on another server's (or another workspace's) origin: the views
        # there could reach this one's storage. Refused and audited.
        app_view_sandbox_refused(call=call, user_id=claims.user_id, host=request.get_host())
        raise Http404("This view belongs to another sandbox origin.")
    csp = effective_csp(resource, call.binding)
    theme = request.GET.get("theme")
    response = render(
        request,
        "sandbox/proxy.html",
        {
            "app_origin": settings.ATRIUM_APP_ORIGIN,
            "flavor": resource.flavor,
            "external_url": resource.text.strip() if resource.flavor == "url" else "",
            "inner_sandbox": INNER_SANDBOX,
            "app_sdk": resource.flavor == "skybridge",
            # The document's color-scheme follows the host's theme (docs/sandbox.md).
            "color_scheme": theme if theme in THEMES else "light dark",
        },
    )
    # Replaces the host pages' policy (django-csp reads this per-response override).
    directives = dict(csp.directives)
    # Only the app origin may frame the proxy ('self' lets the proxy hold its inner frame).
    directives["frame-ancestors"] = [settings.ATRIUM_APP_ORIGIN, "'self'"]
    response._csp_config = directives
    response["Referrer-Policy"] = "no-referrer"
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "no-store"
    response.xframe_options_exempt = True  # framing is governed by frame-ancestors above
    return response
