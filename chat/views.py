"""Chat pages. Thin: membership checks and selectors; outsiders get 404, never data."""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.contrib.auth.decorators import login_required
from django.core.serializers.json import DjangoJSONEncoder
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_POST

from bindings import ratelimit
from chat.services.refusals import rate_limit_record
from mcp_bridge import views as oauth_views
from mcp_bridge.models import UiResource

from . import services
from .app_view_bridge import read_view_token
from .layout.selectors import thread_layout_for
from .models import Thread, ToolCall, Workspace
from .sandbox_views import view_document_response
from .selectors import membership_for, thread_snapshot, threads_for, workspaces_for


def _workspace_for_member(request: HttpRequest, slug: str):
    workspace = Workspace.objects.filter(slug=slug).first()
    membership = membership_for(user=request.user, workspace_id=workspace.pk) if workspace else None
    if workspace is None or membership is None:
        raise Http404("No such workspace.")
    return workspace, membership


@login_required
def home(request: HttpRequest) -> HttpResponse:
    workspaces = workspaces_for(user=request.user)
    if workspaces:
        return redirect("workspace", slug=workspaces[0].slug)
    return render(request, "chat/no_workspace.html", {"workspaces": []})


@login_required
def workspace_detail(request: HttpRequest, slug: str) -> HttpResponse:
    workspace, membership = _workspace_for_member(request, slug)
    return render(
        request,
        "chat/workspace.html",
        {
            "workspace": workspace,
            "membership": membership,
            "workspaces": workspaces_for(user=request.user),
            "threads": threads_for(workspace=workspace),
        },
    )


@login_required
@require_POST
def thread_create(request: HttpRequest, slug: str) -> HttpResponse:
    workspace, _ = _workspace_for_member(request, slug)
    try:
        thread = services.thread_create(
            workspace=workspace, title=request.POST.get("title", ""), actor=request.user
        )
    except services.ChatError as exc:
        return HttpResponse(exc.message, status=403)
    return redirect("thread", slug=workspace.slug, thread_id=thread.pk)


def json_script(value: Any, element_id: str) -> SafeString:
    """`django.utils.html.json_script`, same output, with the three escapes done by
    `str.replace`: Django's `str.translate` with a dict costs ~25 ms on a 500 KB snapshot."""
    text = (
        json.dumps(value, cls=DjangoJSONEncoder)
        .replace(">", "\\u003E")
        .replace("<", "\\u003C")
        .replace("&", "\\u0026")
    )
    return format_html(
        '<script id="{}" type="application/json">{}</script>', element_id, mark_safe(text)
    )


@login_required
def thread_detail(request: HttpRequest, slug: str, thread_id: int) -> HttpResponse:
    workspace, membership = _workspace_for_member(request, slug)
    thread = get_object_or_404(Thread, pk=thread_id, workspace=workspace)
    snapshot = thread_snapshot(thread=thread)
    layout = thread_layout_for(user=request.user, thread_id=thread.pk)  # the member's own pane
    return render(
        request,
        "chat/thread.html",
        {
            "workspace": workspace,
            "membership": membership,
            "workspaces": workspaces_for(user=request.user),
            "threads": threads_for(workspace=workspace),
            "thread": thread,
            "snapshot": snapshot,
            "snapshot_script": json_script(snapshot, "thread-snapshot"),
            "layout": layout,
            "layout_script": json_script(layout, "thread-layout-data"),
        },
    )


@login_required
def view_document(request: HttpRequest, content_hash: str) -> HttpResponseBase:
    """A view's HTML, for the host page to hand to the sandbox proxy (never rendered here)."""

    claims = read_view_token(request.GET.get("t"))
    if claims is None or claims.user_id != request.user.pk:
        raise Http404("Unknown or expired view.")
    call = ToolCall.objects.filter(pk=claims.call_id, thread_id=claims.thread_id).first()
    if (
        call is None
        or membership_for(user=request.user, workspace_id=call.thread.workspace_id) is None
    ):
        raise Http404("Unknown or expired view.")
    resource = (
        UiResource.objects.filter(pk=call.ui_resource_id, content_hash=content_hash)
        .defer("text")
        .first()
    )
    if resource is None:
        raise Http404("Unknown or expired view.")
    return view_document_response(request, resource)  # streamed from storage


@require_POST
async def oauth_connect(request: HttpRequest, slug: str) -> HttpResponse:
    """Start an OAuth sign-in (``mcp_bridge.views.connect``), a few times a minute per
    person: each start sends Atrium to URLs the server chose (discovery, registration)."""
    user = await sync_to_async(lambda: request.user if request.user.is_authenticated else None)()
    if user is not None:
        verdict = await ratelimit.take_async("oauth_connect", str(user.pk))
        if not verdict.allowed:
            if verdict.audit:
                await database_sync_to_async(rate_limit_record)(
                    user=user,
                    workspace_id=None,
                    thread_id=None,
                    bucket="oauth_connect",
                    refused_since_last=verdict.refused_since_audit,
                )
            wait = verdict.retry_after
            shown = "a moment" if wait == float("inf") else f"{max(1, round(wait))} s"
            message = f"Too many sign-ins started; try again in {shown}."
            context = {"ok": False, "message": message, "server": ""}
            return render(request, "mcp_bridge/oauth_result.html", context, status=429)
    return await oauth_views.connect(request, slug)
