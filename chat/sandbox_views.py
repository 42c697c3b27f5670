"""The sandbox origin's only page: the proxy that hosts one view (DESIGN §7).

No session or cookie is used here: the signed token alone names the view. The response
carries the view's Content-Security-Policy as an HTTP header, so the app document the proxy
writes into its inner frame inherits it.
"""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from .models import ToolCall
from .view_bridge import SUPPORTED_FLAVORS, effective_csp, read_view_token

# The inner frame never gets more than this (no allow-same-origin: the app document runs
# in an opaque origin and cannot touch the proxy or the sandbox origin's storage).
INNER_SANDBOX = "allow-scripts allow-forms allow-popups allow-popups-to-escape-sandbox allow-modals"


@require_GET
def sandbox_proxy(request: HttpRequest, token: str) -> HttpResponse:
    claims = read_view_token(token)
    if claims is None:
        raise Http404("Unknown or expired view.")
    call = (
        ToolCall.objects.select_related("ui_resource", "binding", "server")
        .filter(pk=claims.call_id, thread_id=claims.thread_id, server_id=claims.server_id)
        .first()
    )
    resource = call.ui_resource if call else None
    if resource is None or resource.flavor not in SUPPORTED_FLAVORS:
        raise Http404("Unknown or expired view.")
    csp = effective_csp(resource, call.binding)
    response = render(
        request,
        "sandbox/proxy.html",
        {
            "app_origin": settings.ATRIUM_APP_ORIGIN,
            "flavor": resource.flavor,
            "external_url": resource.text.strip() if resource.flavor == "url" else "",
            "inner_sandbox": INNER_SANDBOX,
            "app_sdk": resource.flavor == "skybridge",
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
