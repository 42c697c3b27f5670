"""App views: opening one, and every request a view makes (DESIGN §7, docs/view-bridge.md).

Each request carries the view's capability token; the token must name a view of this
thread and this user, and the bindings policy decides (and audits) the action itself.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

from channels.db import database_sync_to_async
from django.urls import reverse

from bindings.policy import ActionKind
from bindings.services.authorize import Authorization
from bindings.services.errors import BindingError
from bindings.services.permissions import app_view_permissions_grant
from chat.calls.admission import JSONRPC_INVALID_PARAMS, POLICY_DENIED, token_is_this_sockets
from chat.sandbox_hosts import sandbox_origin_for
from chat.services.refusals import request_record_refused
from mcp_bridge import gateway
from mcp_bridge.errors import BridgeError
from mcp_bridge.models import Tool
from mcp_bridge.services.ui_resources import TOO_LARGE, too_large_message

from ..agent import start_turn
from ..app_view_bridge import (
    SUPPORTED_FLAVORS,
    ViewToken,
    call_tool_result,
    permission_request,
    read_message_proposal,
    read_view_token,
    sign_view_token,
    view_for_claims,
    view_permissions,
)
from ..media import view_files
from ..media.view_files import SaveItem, ViewFileRefused
from ..models import Message, ToolCall
from ..services import app_views
from ..view_tools.naming import block_text
from .app_view_calls import (
    ViewRequestError,
    admitted_view,
    app_view_tool_call,
    view_admission,
    view_limit,
)
from .registry import (
    ActionContext,
    ActionError,
    action,
    rate_limited_error,
    take_tokens,
)
from .view_methods import (
    USER_VIEW_REQUEST,
    VIEW_FILES,
    VIEW_METHODS,
    VIEW_REQUEST,
    RateBucket,
    ViewMethod,
    view_method,
)

log = logging.getLogger(__name__)

JSONRPC_METHOD_NOT_FOUND = -32601
JSONRPC_SERVER_ERROR = -32000
MAX_MODEL_CONTEXT_BYTES = 64 * 1024
MAX_WIDGET_STATE_BYTES = 64 * 1024
GESTURES = ("frame", "card")  # what let a view go full screen / pip (docs/view-bridge.md)


# --------------------------------------------------------------------------- view.open


def _open_view(ctx: ActionContext, call_id: Any) -> dict[str, Any]:
    if not isinstance(call_id, int):
        raise ActionError("invalid_message", "'toolCallId' must be a number.")
    call = (
        ToolCall.objects.select_related("server", "ui_resource", "binding", "thread")
        .filter(pk=call_id, thread=ctx.thread)
        .first()
    )
    if call is None:
        raise ActionError("not_found", "That tool call is not in this thread.")
    resource = call.ui_resource
    if resource is None:
        raise ActionError("no_view", "This tool call has no view.")
    if resource.flavor == TOO_LARGE:  # refused when read (mcp_bridge ui_resources)
        refused = (resource.meta or {}).get("refused") or {}
        raise ActionError("view_too_large", refused.get("message") or too_large_message(0))
    if resource.flavor not in SUPPORTED_FLAVORS:
        raise ActionError(
            "view_not_supported",
            f"This view uses {resource.flavor} UI, which Atrium does not run; "
            "the text result is shown instead.",
        )
    auth, csp = app_views.app_view_open(
        call=call, user=ctx.user, role=ctx.membership.role, thread=ctx.thread
    )
    # Raised after the block: a denial's audit row must commit, not roll back with it.
    if not auth.allowed:
        raise ActionError(str(auth.decision.reason_code), auth.decision.message)
    allow, granted = view_permissions(resource, call.binding)
    asked = permission_request(resource, call.binding, role=ctx.membership.role)
    token = sign_view_token(call=call, user_id=ctx.user.pk)
    tool = Tool.objects.filter(server=call.server, name=call.tool_name).first()
    sandbox_origin = sandbox_origin_for(call.server.slug, call.thread.workspace_id)
    meta = resource.meta or {}
    legacy = None
    part = next((p for p in (call.result or {}).get("parts", []) if p.get("type") == "ui"), {})
    if resource.flavor in ("html", "url", "remote-dom") or meta.get("preferredFrameSize"):
        legacy = {
            "preferredFrameSize": part.get("preferredFrameSize"),
            "initialRenderData": part.get("initialRenderData"),
        }
    return {
        "token": token,
        "sandboxUrl": f"{sandbox_origin}/sandbox/{token}/",
        "sandboxOrigin": sandbox_origin,
        "documentUrl": None
        if resource.flavor == "url"
        else reverse("view-document", args=[resource.content_hash]) + f"?t={token}",
        "flavor": resource.flavor,
        # remote-dom: MCP-UI's framework=react|webcomponents (docs/compat.md)
        "framework": part.get("framework") if resource.flavor == "remote-dom" else None,
        "uri": resource.uri,
        "url": resource.text.strip() if resource.flavor == "url" else None,
        "allow": allow,
        "permissions": granted,
        "permissionRequest": asked,
        "csp": csp.header(),
        "appSdk": resource.flavor == "skybridge" or bool(tool and tool.is_app_sdk),
        "legacy": legacy,
        "prefersBorder": meta.get("prefersBorder"),
        "appName": call.server.name,
        "toolInfo": {
            "id": call.pk,
            "tool": {
                "name": call.tool_name,
                "title": getattr(tool, "title", "") or call.tool_name,
                "description": getattr(tool, "description", ""),
                "inputSchema": getattr(tool, "input_schema", {}) or {"type": "object"},
                "annotations": getattr(tool, "annotations", {}) or {},
            },
        },
        "toolInput": call.arguments,
        "toolResult": call_tool_result(call.result),
        "status": call.status,
        "widgetState": call.widget_state,
        "displayMode": call.display_mode or "inline",
    }


@action("view.open")
async def open_view(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    # Each opening is decided, audited and signed: bounded like the view's own requests.
    verdict = await take_tokens(ctx, [(USER_VIEW_REQUEST.name, str(ctx.user.pk))])
    if not verdict.allowed:
        raise rate_limited_error(verdict, "views opened")
    return await database_sync_to_async(_open_view)(ctx, msg.get("toolCallId"))


def _grant_permissions(ctx: ActionContext, call_id: Any, permissions: Any) -> dict[str, Any]:
    if not isinstance(call_id, int) or not isinstance(permissions, list):
        raise ActionError("invalid_message", "Send toolCallId and a list of permissions.")
    call = (
        ToolCall.objects.select_related("ui_resource").filter(pk=call_id, thread=ctx.thread).first()
    )
    if call is None or call.ui_resource is None or call.binding_id is None:
        raise ActionError("not_found", "That view is not in this thread.")
    try:
        binding = app_view_permissions_grant(
            binding_id=call.binding_id,
            permissions=permissions,
            declared=(call.ui_resource.meta or {}).get("permissions"),
            actor=ctx.user,
            role=ctx.membership.role,
            thread_id=ctx.thread.pk,
            tool_call_id=call.pk,
        )
    except BindingError as exc:
        raise ActionError(exc.code, exc.message) from exc
    return {"permissions": sorted(binding.granted_permissions or [])}


@action("view.grant_permissions")
async def grant_permissions(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    """An owner answers a view's permission prompt with "Allow for this app" (anyone else
    is refused, and audited, by the service)."""
    return await database_sync_to_async(_grant_permissions)(
        ctx, msg.get("toolCallId"), msg.get("permissions")
    )


# ------------------------------------------------------------------------ view.request


def _authorize_view(ctx, view, kind, **kwargs) -> Authorization:
    return app_views.app_view_authorize(
        view=view, user=ctx.user, role=ctx.membership.role, thread=ctx.thread, kind=kind, **kwargs
    )


def _deny(auth: Authorization) -> ViewRequestError:
    return ViewRequestError(str(auth.decision.reason_code), auth.decision.message, audited=True)


def _refuse(
    ctx,
    view: ToolCall,
    kind: ActionKind,
    code: str,
    message: str,
    jsonrpc_code: int = JSONRPC_INVALID_PARAMS,
) -> ViewRequestError:
    """A malformed or oversized request: audited as denied, answered with the reason."""
    request_record_refused(
        action_kind=kind,
        actor_kind="app_view",
        user=ctx.user,
        thread=ctx.thread,
        server_id=view.server_id,
        binding_id=view.binding_id,
        reason=code,
        extra={"view": view.pk, "message": message},
    )
    return ViewRequestError(code, message, jsonrpc_code, audited=True)


def _kind(method: ViewMethod, params: dict[str, Any]) -> ActionKind:
    """What the table says this request is decided (and audited) as, per compat layer."""
    kind = method.kind_for(params)
    assert kind is not None, f"{method.name} names no policy kind"
    return kind


# A server row's handler (view_methods.VIEW_METHODS), bound where it is defined (`handles`):
# a request's: async (ctx, view, method, params) → its result; a deferred request's:
# (ctx, claims, method, msg), answering from its own task (its row's bucket already taken);
# a notification's: on the database thread, (ctx, view, method, params).
VIEW_HANDLERS: dict[str, Callable[..., Any]] = {}


def handles(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Bind the decorated function to the table's rows ``names`` (server rows only)."""

    def bind(handler: Callable[..., Any]) -> Callable[..., Any]:
        for name in names:
            row = next((r for r in VIEW_METHODS if r.name == name), None)
            if row is None or row.side != "server" or name in VIEW_HANDLERS:
                raise LookupError(f"{name}: not a server row of VIEW_METHODS, or bound twice")
            VIEW_HANDLERS[name] = handler
        return handler

    return bind


@handles("resources/read", "resources/list", "resources/templates/list", "prompts/list")
async def _resources(
    ctx: ActionContext, view: ToolCall, row: ViewMethod, params: dict[str, Any]
) -> dict[str, Any]:
    method = row.name
    uri = params.get("uri")
    auth = await database_sync_to_async(_authorize_view)(
        ctx, view, _kind(row, params), extra={"method": method, "uri": str(uri)[:300]}
    )
    if not auth.allowed:
        raise _deny(auth)
    manager = gateway.manager()
    try:
        # An OAuth server reads with the grant of the member whose view asks.
        spec = await gateway.server_spec(view.server, user_id=ctx.user.pk)
        if method == "resources/read":
            if not isinstance(uri, str):
                raise ViewRequestError(
                    "invalid_params", "resources/read needs a uri.", JSONRPC_INVALID_PARAMS
                )
            return await manager.read_resource(spec, uri)
        if method == "resources/list":
            return {"resources": await manager.list_resources(spec)}
        return (
            {"resourceTemplates": [], "prompts": []}
            if method != "prompts/list"
            else {"prompts": []}
        )
    except BridgeError as exc:
        raise ViewRequestError(exc.code, exc.user_message) from exc


def _content_text(content: Any) -> str:
    """ui/message content may be one block or a list of blocks (accept both)."""
    blocks = content if isinstance(content, list) else [content]
    texts = []
    described: list[str] = []
    for block in blocks[:20]:
        if (
            isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ):
            texts.append(block["text"])
        elif isinstance(block, str):
            texts.append(block)
        elif isinstance(block, dict):  # issue 27: other modalities, described
            described.append(block_text(block))
    text = "\n\n".join(texts).strip()
    return "\n\n".join([text, *described]) if text and described else text


@handles("ui/message")
async def _ui_message(
    ctx: ActionContext, view: ToolCall, row: ViewMethod, params: dict[str, Any]
) -> dict[str, Any]:
    reply = await database_sync_to_async(_ui_message_decide)(ctx, view, _kind(row, params), params)
    if not reply:
        await start_turn(thread=ctx.thread, user=ctx.user, role=ctx.membership.role)
    return reply


def _ui_message_decide(
    ctx, view: ToolCall, kind: ActionKind, params: dict[str, Any]
) -> dict[str, Any]:
    """``{}`` when posted (a turn may start), or ``{"confirm": card}``: what the host's
    message card shows until the member presses Send (``view.message_decide``)."""
    text = _content_text(params.get("content"))
    if not text:
        raise _refuse(ctx, view, kind, "invalid_params", "ui/message needs text content.")
    if len(text) > 8000:
        raise _refuse(
            ctx,
            view,
            kind,
            "message_too_long",
            "ui/message text is limited to 8,000 characters.",
            POLICY_DENIED,
        )
    asked = {"view": view, "user": ctx.user, "role": ctx.membership.role, "thread": ctx.thread}
    if app_views.app_view_message_needs_card(view=view, thread=ctx.thread):
        # F11: it would start a model turn: the host shows the card, Send posts it.
        auth, card = app_views.app_view_message_propose(**asked, text=text, kind=kind)
        if not auth.allowed:
            raise _deny(auth)
        return {"confirm": card}
    auth, _message = app_views.app_view_message_post(**asked, text=text, kind=kind)
    if not auth.allowed:
        raise _deny(auth)
    return {}


def _refuse_oversized(
    ctx, view: ToolCall, kind: ActionKind, value: Any, limit: int, what: str
) -> None:
    """A view's stored value (model context, widget state) over its size limit is refused
    and audited before it is decided."""
    if len(json.dumps(value, default=str)) > limit:
        message = f"{what} is limited to {limit // 1024} KB."
        raise _refuse(ctx, view, kind, "too_large", message, POLICY_DENIED)


@handles("ui/update-model-context")
async def _update_model_context(
    ctx: ActionContext, view: ToolCall, row: ViewMethod, params: dict[str, Any]
) -> dict[str, Any]:
    await database_sync_to_async(_model_context_set)(ctx, view, _kind(row, params), params)
    return {}


def _model_context_set(ctx, view: ToolCall, kind: ActionKind, params: dict[str, Any]) -> None:
    context = {k: params[k] for k in ("content", "structuredContent") if k in params}
    _refuse_oversized(ctx, view, kind, context, MAX_MODEL_CONTEXT_BYTES, "Model context")
    auth = app_views.app_view_model_context_set(
        view=view, user=ctx.user, role=ctx.membership.role, thread=ctx.thread, context=context
    )
    if not auth.allowed:
        raise _deny(auth)


@handles("ui/open-link")
async def _open_link(
    ctx: ActionContext, view: ToolCall, row: ViewMethod, params: dict[str, Any]
) -> dict[str, Any]:
    url = params.get("url")
    auth = await database_sync_to_async(_authorize_view)(
        ctx, view, _kind(row, params), url=url if isinstance(url, str) else ""
    )
    if not auth.allowed:
        raise _deny(auth)
    return {}


@handles("openai/setOpenInAppUrl")
async def _open_in_app_url(
    ctx: ActionContext, view: ToolCall, row: ViewMethod, params: dict[str, Any]
) -> dict[str, Any]:
    """Apps SDK setOpenInAppUrl: the host's "Open in <app>" link (docs/compat.md), https
    only, then the link policy (the binding's schemes) like openExternal."""
    await database_sync_to_async(_open_in_app_decide)(ctx, view, _kind(row, params), params)
    return {}


def _open_in_app_decide(ctx, view: ToolCall, kind: ActionKind, params: dict[str, Any]) -> None:
    href = params.get("href")
    if not isinstance(href, str) or not href.lower().startswith("https://") or len(href) > 2048:
        raise _refuse(ctx, view, kind, "scheme_not_allowed", "The app's page must be an https URL.")
    auth = _authorize_view(ctx, view, kind, url=href, extra={"openInApp": True})
    if not auth.allowed:
        raise _deny(auth)


@handles("ui/request-display-mode")
async def _display_mode(
    ctx: ActionContext, view: ToolCall, row: ViewMethod, params: dict[str, Any]
) -> dict[str, Any]:
    mode = params.get("mode")
    current = (
        params.get("current")
        if params.get("current") in ("inline", "fullscreen", "pip", "split")
        else "inline"
    )
    declared = params.get("availableDisplayModes")
    declared = (
        tuple(m for m in declared if isinstance(m, str)) if isinstance(declared, list) else None
    )
    auth = await database_sync_to_async(_authorize_view)(
        ctx,
        view,
        _kind(row, params),
        display_mode=mode if isinstance(mode, str) else "",
        available_display_modes=declared,
        # How the person let it happen (the host's word, F14): a click or key in the frame
        # just before ("frame"), or Allow on the host's card ("card").
        extra={"gesture": params.get("gesture") if params.get("gesture") in GESTURES else ""},
    )
    return {"mode": mode if auth.allowed else current}


# ----------------------------------------------- files (issue 26 part 4, chat.media.view_files)


def _files_call(ctx, view: ToolCall, kind: ActionKind, service: Callable[..., Any], **kw: Any):
    """On the database thread: one of chat.media.view_files' services, as this person; a
    refusal answered with its reason (audited: by the policy, the pipeline, or here)."""
    try:
        return service(
            view=view, user=ctx.user, role=ctx.membership.role, thread=ctx.thread, kind=kind, **kw
        )
    except ViewFileRefused as exc:
        if exc.audited:
            raise ViewRequestError(exc.code, exc.message, audited=True) from None
        if exc.code == "not_ready":  # not a refusal: the worker has not stored it yet
            raise ViewRequestError(exc.code, exc.message, JSONRPC_SERVER_ERROR) from None
        raise _refuse(ctx, view, kind, exc.code, exc.message) from None


def _int_param(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@handles("openai/uploadFile")
async def _upload_file(
    ctx: ActionContext, view: ToolCall, row: ViewMethod, params: dict[str, Any]
) -> dict[str, Any]:
    """Apps SDK uploadFile, in two steps the host takes: ``{filename, size}`` → a ticket for
    the body (which the host PUTs, as for a member's file); ``{assetId}`` → the fileId."""
    kind = _kind(row, params)
    asset_id = _int_param(params.get("assetId"))
    if asset_id is not None:
        return await database_sync_to_async(_files_call)(
            ctx, view, kind, view_files.view_file_uploaded, asset_id=asset_id
        )
    name, size = params.get("filename"), _int_param(params.get("size"))
    if not isinstance(name, str) or size is None:

        def refuse() -> None:
            raise _refuse(ctx, view, kind, "invalid_params", "uploadFile needs a file.")

        await database_sync_to_async(refuse)()
    ticket = await database_sync_to_async(_files_call)(
        ctx, view, kind, view_files.view_file_upload_begin, filename=name, size=size
    )
    return {"uploadUrl": ticket["uploadUrl"], "filename": ticket["filename"]}


@handles("openai/getFileDownloadUrl")
async def _file_download_url(
    ctx: ActionContext, view: ToolCall, row: ViewMethod, params: dict[str, Any]
) -> dict[str, Any]:
    """Apps SDK getFileDownloadUrl({fileId}) → {downloadUrl}: a short-lived link."""
    return await database_sync_to_async(_files_call)(
        ctx, view, _kind(row, params), view_files.view_file_link, file_id=params.get("fileId")
    )


@handles("openai/selectFiles")
async def _select_files(
    ctx: ActionContext, view: ToolCall, row: ViewMethod, params: dict[str, Any]
) -> dict[str, Any]:
    """Apps SDK selectFiles: the thread's files for the host's chooser (the host page's
    answer; the view gets only what its person chooses: ``view.files_choose``)."""
    return await database_sync_to_async(_files_call)(
        ctx, view, _kind(row, params), view_files.view_files_offer
    )


def _files_choose(ctx: ActionContext, msg: dict[str, Any]) -> list[dict[str, Any]]:
    view = admitted_view(ctx, read_view_token(msg.get("token")))
    ids = msg.get("assetIds")
    if not isinstance(ids, list):
        raise ActionError("invalid_message", "Send the chosen files' ids.")
    kind = ActionKind.VIEW_FILES_SELECT
    return _files_call(ctx, view, kind, view_files.view_files_choose, asset_ids=ids)


@action("view.files_choose", admits_itself=True)
async def files_choose(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    """The person chose files for a view in the host's chooser (file_chooser.js): decided
    as them, now; the answer (the files' fileIds) is what the host gives the view."""
    claims = read_view_token(msg.get("token"))
    await _limit_view_requests(ctx, claims)
    await view_limit(ctx, [(VIEW_FILES, str(claims.call_id if claims else 0))])
    return {"files": await database_sync_to_async(_files_choose)(ctx, msg)}


def _file_name(uri: Any, fallback: str = "download") -> str:
    """A name hint from a resource's uri: its last path segment (the server cleans it)."""
    if not isinstance(uri, str):
        return fallback
    path = urlsplit(uri).path or uri
    name = unquote(path.rstrip("/").rsplit("/", 1)[-1])
    return name or fallback


def _decoded(resource: dict[str, Any], name: str) -> SaveItem | None:
    if isinstance(resource.get("text"), str):
        return SaveItem(name, resource["text"].encode())
    if isinstance(resource.get("blob"), str):
        try:
            return SaveItem(name, base64.b64decode(resource["blob"], validate=True))
        except (binascii.Error, ValueError):
            return None
    return None


async def _save_items(ctx: ActionContext, view: ToolCall, contents: list[Any]) -> list[SaveItem]:
    """The files of a ui/download-file: embedded resources (text or base64 blob), or
    resource links read from the view's own server."""
    items: list[SaveItem] = []
    for block in contents[: view_files.MAX_SAVE_FILES + 1]:
        if not isinstance(block, dict):
            raise ViewRequestError("invalid_params", "Each item must be a resource.")
        if block.get("type") == "resource" and isinstance(block.get("resource"), dict):
            resource = block["resource"]
            item = _decoded(resource, _file_name(resource.get("uri")))
        elif block.get("type") == "resource_link" and isinstance(block.get("uri"), str):
            try:
                spec = await gateway.server_spec(view.server, user_id=ctx.user.pk)
                read = await gateway.manager().read_resource(spec, block["uri"])
            except BridgeError as exc:
                raise ViewRequestError(exc.code, exc.user_message) from exc
            found = next((c for c in read.get("contents") or [] if isinstance(c, dict)), {})
            name = block.get("name") if isinstance(block.get("name"), str) else ""
            item = _decoded(found, name or _file_name(block["uri"]))
        else:
            item = None
        if item is None:
            raise ViewRequestError(
                "invalid_params",
                "Send embedded resources with text or base64 blob, or resource links.",
            )
        items.append(item)
    return items


@handles("ui/download-file")
async def _download(
    ctx: ActionContext, view: ToolCall, row: ViewMethod, params: dict[str, Any]
) -> dict[str, Any]:
    """MCP Apps ui/download-file: the view's file saved as a file of the thread ("<app>
    saved report.csv", its chip the download), decided and audited as VIEW_FILE_SAVE."""
    kind = _kind(row, params)
    contents = params.get("contents")
    try:
        if not isinstance(contents, list) or not contents:
            raise ViewRequestError("invalid_params", "ui/download-file needs contents.")
        items = await _save_items(ctx, view, contents)
    except ViewRequestError as exc:
        code, message = exc.code, exc.message

        def refuse() -> None:
            raise _refuse(ctx, view, kind, code, message)

        await database_sync_to_async(refuse)()
        raise
    return await database_sync_to_async(_files_call)(
        ctx, view, kind, view_files.view_file_save, items=items
    )


@handles("atrium/setWidgetState")
async def _set_widget_state(
    ctx: ActionContext, view: ToolCall, row: ViewMethod, params: dict[str, Any]
) -> dict[str, Any]:
    await database_sync_to_async(_widget_state_set)(ctx, view, _kind(row, params), params)
    return {}


def _widget_state_set(ctx, view: ToolCall, kind: ActionKind, params: dict[str, Any]) -> None:
    state = params.get("state")
    _refuse_oversized(ctx, view, kind, state, MAX_WIDGET_STATE_BYTES, "Widget state")
    auth = app_views.app_view_widget_state_set(
        view=view, user=ctx.user, role=ctx.membership.role, thread=ctx.thread, state=state
    )
    if not auth.allowed:
        raise _deny(auth)


@handles("openai/requestModal")
async def _request_modal(
    ctx: ActionContext, view: ToolCall, row: ViewMethod, params: dict[str, Any]
) -> dict[str, Any]:
    """Apps SDK requestModal: decided and audited like every view request. The host titles
    the dialog with the app's name; the app's own title is only shown as its text."""
    title = params.get("title")
    title = " ".join(title.split())[:120] if isinstance(title, str) else ""
    auth = await database_sync_to_async(_authorize_view)(
        ctx, view, _kind(row, params), extra={"title": title}
    )
    if not auth.allowed:
        raise _deny(auth)
    return {"appName": view.server.name, "title": title}


@handles("ping")
async def _ping(ctx: ActionContext, view: ToolCall, row: ViewMethod, params: dict[str, Any]):
    return {}


@handles("tools/call")
def _tools_call(
    ctx: ActionContext, claims: ViewToken | None, row: ViewMethod, msg: dict[str, Any]
) -> None:
    params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
    app_view_tool_call(ctx, claims, msg, _kind(row, params))


async def _limit_view_requests(
    ctx: ActionContext, claims: ViewToken | None, *also: tuple[RateBucket, str]
) -> None:
    """Before any database work: every request of a view, and of a person, is rate limited;
    ``also``: more buckets, taken after those two in the same trip to the store."""
    await view_limit(
        ctx,
        [
            (USER_VIEW_REQUEST, str(ctx.user.pk)),
            (VIEW_REQUEST, str(claims.call_id if claims else "invalid")),
            *also,
        ],
    )


def _own_bucket(ctx: ActionContext, bucket: RateBucket, view_id: int) -> tuple[RateBucket, str]:
    """A method's own bucket and its key: the view's, or its person's across their views."""
    return bucket, str(view_id if bucket.per == "view" else ctx.user.pk)


async def _dispatch(ctx: ActionContext, view: ToolCall, name: str, params: dict[str, Any]):
    """A request of an admitted view, by its row in the table."""
    row = view_method(name, "request")
    handler = VIEW_HANDLERS.get(row.name) if row and not row.deferred else None
    if row is None or handler is None:  # unknown, or the browser's own (side "host")
        raise ViewRequestError(
            "method_not_found", f"Unknown method '{name[:80]}'.", JSONRPC_METHOD_NOT_FOUND
        )
    if row.bucket is not None:
        await view_limit(ctx, [_own_bucket(ctx, row.bucket, view.pk)])
    return await handler(ctx, view, row, params)


@action("view.request", admits_itself=True)
async def view_request(ctx: ActionContext, msg: dict[str, Any]) -> Any:
    name = msg.get("method")
    params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
    if not isinstance(name, str):
        raise ViewRequestError("invalid_request", "A view request needs a method.", -32600)
    claims = read_view_token(msg.get("token"))
    row = view_method(name, "request")
    if (
        row is not None
        and row.deferred
        and claims is not None
        and token_is_this_sockets(view_admission(ctx, claims))
    ):
        # It may wait (an approval, a slow tool): answered from a task, the socket stays
        # free. Its own bucket is taken here, after the view's two, in their trip to the
        # store (a refusal is answered like any other, before the task).
        own = [_own_bucket(ctx, row.bucket, claims.call_id)] if row.bucket else []
        await _limit_view_requests(ctx, claims, *own)
        VIEW_HANDLERS[row.name](ctx, claims, row, msg)
        return DEFERRED
    await _limit_view_requests(ctx, claims)
    # A forged or foreign token is refused here, answered before the socket's next frame.
    view = await database_sync_to_async(admitted_view)(ctx, claims)
    return await _dispatch(ctx, view, name, params)


DEFERRED = object()


# ----------------------------------------------------------------- view.message_decide


def _message_decide(ctx: ActionContext, msg: dict[str, Any]) -> Message | None:
    decision = msg.get("decision")
    if decision not in ("send", "dismiss"):
        raise ActionError("invalid_message", "Send a decision: send or dismiss.")
    proposal = read_message_proposal(msg.get("proposal"))
    if proposal is None or (proposal.user_id, proposal.thread_id) != (ctx.user.pk, ctx.thread.pk):
        raise ActionError(
            "invalid_proposal", "This message request is no longer valid; ask the app again."
        )
    view = view_for_claims(
        ViewToken(proposal.call_id, proposal.user_id, proposal.thread_id, None, proposal.server_id),
        ctx.thread.pk,
    )
    if view is None or view.server_id != proposal.server_id:
        raise ActionError("not_found", "That view is no longer in this thread.")
    outcome = app_views.app_view_message_decide(
        proposal=proposal,
        view=view,
        user=ctx.user,
        role=ctx.membership.role,
        thread=ctx.thread,
        send=decision == "send",
        remember=msg.get("remember") is True,
    )
    if outcome.outcome == "spent":
        raise ActionError(
            "already_answered", "This message request was already answered.", audited=True
        )
    if outcome.outcome == "denied" and outcome.auth is not None:
        raise _deny(outcome.auth)
    return outcome.message


@action("view.message_decide")
async def message_decide(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    """A member's Send or Dismiss on a view's message card (F11): decided on the server as
    this person (membership re-read, role and rate re-checked), the card's frozen text
    posted, audited; Send starts the turn the view's message would have."""
    message = await database_sync_to_async(_message_decide)(ctx, msg)
    if message is None:
        return {"sent": False}
    await start_turn(thread=ctx.thread, user=ctx.user, role=ctx.membership.role)
    return {"sent": True, "messageId": message.pk}


@action("view.notify", admits_itself=True)
async def view_notify(ctx: ActionContext, msg: dict[str, Any]) -> dict[str, Any]:
    method = msg.get("method")
    params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
    claims = read_view_token(msg.get("token"))
    await _limit_view_requests(ctx, claims)

    row = view_method(method, "notification") if isinstance(method, str) else None
    handler = VIEW_HANDLERS.get(row.name) if row else None

    def notified() -> None:
        view = admitted_view(ctx, claims)
        # Size and teardown reports are only admitted; the log is decided and audited.
        if row is not None and handler is not None:
            handler(ctx, view, row, params)

    await database_sync_to_async(notified)()
    return {}


@handles("notifications/message")
def _log_message(ctx, view: ToolCall, row: ViewMethod, params: dict[str, Any]) -> None:
    level = params.get("level") if isinstance(params.get("level"), str) else "info"
    data = json.dumps(params.get("data"), default=str)[:2000]
    _authorize_view(
        ctx,
        view,
        _kind(row, params),
        extra={"level": level[:20], "logger": str(params.get("logger", ""))[:100], "data": data},
    )
