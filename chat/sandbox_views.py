"""The sandbox origins' only page: the proxy that hosts one view (DESIGN §7, docs/sandbox.md).

No session or cookie is used here: the signed token alone names the view, and the page is
served only on the sandbox host of the view's own server in the view's own workspace. The
response carries the view's Content-Security-Policy as an HTTP header, so the app document
the proxy writes into its inner frame inherits it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.files.storage import default_storage
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.views.decorators.http import require_GET

from chat.sandbox_hosts import sandbox_label_for
from mcp_bridge.models import UiResource
from mcp_bridge.services.ui_resources import ui_document_name

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
    if call is None or resource is None or resource.flavor not in SUPPORTED_FLAVORS:
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
    response._csp_config = directives  # type: ignore[attr-defined]
    response["Referrer-Policy"] = "no-referrer"
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "no-store"
    response.xframe_options_exempt = True  # framing is governed by frame-ancestors above
    return response


# ---- the view's document, on the app origin (``chat.views.view_document`` checks access)
#
# A document is stored once by content hash (``mcp_bridge.services.ui_resources``) and sent
# from storage in chunks by an *async* iterator: a 7 MB single-file app costs this process
# one chunk at a time, never the whole document per request (Django consumes a sync
# iterator, FileResponse's included, with ``sync_to_async(list)`` under ASGI).

DOCUMENT_CHUNK = 256 * 1024
DOCUMENT_HEADERS = {
    "Cache-Control": "private, max-age=31536000, immutable",
    "X-Content-Type-Options": "nosniff",
    # Data for the proxy, never rendered by the app origin.
    "Content-Security-Policy": "default-src 'none'; sandbox",
}


def view_document_response(request: HttpRequest, resource: UiResource) -> HttpResponseBase:
    """The document of ``resource`` as ``text/plain`` (ETag: its content hash): from
    storage, streamed; a version stored before documents went to storage, from its row."""
    etag = f'"{resource.content_hash}"'
    if etag in request.headers.get("If-None-Match", ""):
        response: HttpResponseBase = HttpResponse(status=304)
    else:
        name = ui_document_name(resource.content_hash)
        try:
            size = default_storage.size(name)
        except OSError:
            size = -1
        if size >= 0:
            response = StreamingHttpResponse(
                _read_document(name), content_type="text/plain; charset=utf-8"
            )
            response["Content-Length"] = str(size)
        else:
            text = UiResource.objects.filter(pk=resource.pk).values_list("text", flat=True).first()
            if not text:
                raise Http404("Unknown or expired view.")
            response = HttpResponse(text, content_type="text/plain; charset=utf-8")
    for key, value in DOCUMENT_HEADERS.items():
        response[key] = value
    response["ETag"] = etag
    return response


async def _read_document(name: str) -> AsyncIterator[bytes]:
    handle = await sync_to_async(default_storage.open, thread_sensitive=False)(name, "rb")
    try:
        while chunk := await sync_to_async(handle.read, thread_sensitive=False)(DOCUMENT_CHUNK):
            yield chunk
    finally:
        await sync_to_async(handle.close, thread_sensitive=False)()
