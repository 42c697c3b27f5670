"""App views: opening one, and every request a view makes (DESIGN §7, docs/view-bridge.md).

Each request carries the view's capability token; the token must name a view of this
thread and this user, and the bindings policy decides (and audits) the action itself.
"""

from __future__ import annotations

import contextlib
import json
import logging
from typing import Any

from channels.db import database_sync_to_async
from django.urls import reverse

from bindings import services as authority
from bindings.policy import ActionKind
from config.hosts import sandbox_origin_for
from mcp_bridge import gateway
from mcp_bridge.errors import BridgeError
from mcp_bridge.models import Tool

from .. import runtime, waiters
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
from ..models import Message, ToolCall, ToolCallStatus
from ..presenters import serialize_tool_call
from ..selectors import tool_calls_queryset
from ..services import app_views, tool_calls
from .registry import (
    ActionContext,
    ActionError,
    SessionEnded,
    action,
    admit,
    rate_limited_error,
    refusal_record,
    take_tokens,
)

log = logging.getLogger(__name__)

JSONRPC_INVALID_PARAMS = -32602
JSONRPC_METHOD_NOT_FOUND = -32601
POLICY_DENIED = -32003
RATE_LIMITED = -32029  # server-defined JSON-RPC error: too many requests
VIEW_CALL_WAIT = 15 * 60  # seconds a view's tools/call may wait (e.g. for an approval)
MAX_MODEL_CONTEXT_BYTES = 64 * 1024
MAX_WIDGET_STATE_BYTES = 64 * 1024
GESTURES = ("frame", "card")  # what let a view go full screen / pip (docs/view-bridge.md)

# What each compat layer's request is audited as.
COMPAT_KINDS = {
    ("tools/call", "legacy"): ActionKind.LEGACY_TOOL,
    ("tools/call", "openai"): ActionKind.APPS_SDK_CALL_TOOL,
    ("ui/message", "legacy"): ActionKind.LEGACY_PROMPT,
    ("ui/message", "legacy-intent"): ActionKind.LEGACY_INTENT,
    ("ui/message", "openai"): ActionKind.APPS_SDK_FOLLOW_UP,
    ("ui/open-link", "legacy"): ActionKind.LEGACY_LINK,
    ("ui/open-link", "openai"): ActionKind.APPS_SDK_OPEN_EXTERNAL,
    ("notifications/message", "legacy"): ActionKind.LEGACY_NOTIFY,
}


class ViewRequestError(ActionError):
    def __init__(
        self,
        code: str,
        message: str,
        jsonrpc_code: int = POLICY_DENIED,
        *,
        audited: bool = False,
        details: Any = None,
    ) -> None:
        super().__init__(code, message, details, audited=audited)
        self.jsonrpc_code = jsonrpc_code

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "jsonrpcCode": self.jsonrpc_code}


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
    if resource.flavor in ("html", "url") or meta.get("preferredFrameSize"):
        part = next((p for p in (call.result or {}).get("parts", []) if p.get("type") == "ui"), {})
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
    verdict = await take_tokens(ctx, [("user_view_request", str(ctx.user.pk))])
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
        binding = authority.app_view_permissions_grant(
            binding_id=call.binding_id,
            permissions=permissions,
            declared=(call.ui_resource.meta or {}).get("permissions"),
            actor=ctx.user,
            role=ctx.membership.role,
            thread_id=ctx.thread.pk,
            tool_call_id=call.pk,
        )
    except authority.BindingError as exc:
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


def _token_is_this_sockets(ctx: ActionContext, claims: ViewToken | None) -> bool:
    """The token's signature held and it names this socket's person and thread (no
    database: whether its view still exists is read with the request)."""
    return (
        claims is not None and claims.user_id == ctx.user.pk and claims.thread_id == ctx.thread.pk
    )


def _view_for_token(ctx: ActionContext, claims: ViewToken | None) -> ToolCall:
    """The view a token's claims (read once per request, ``read_view_token``) name."""
    if claims is None or not _token_is_this_sockets(ctx, claims):
        app_views.app_view_token_rejected(
            user=ctx.user,
            thread=ctx.thread,
            reason="invalid_token" if claims is None else "token_not_for_this_thread_or_user",
        )
        raise ViewRequestError(
            "invalid_token",
            "This view's token is invalid or expired; reload the view.",
            audited=True,
        )
    view = view_for_claims(claims, ctx.thread.pk)
    if view is None or view.server_id != claims.server_id:
        raise ViewRequestError("invalid_token", "This view no longer exists.")
    return view


def _admitted_view(ctx: ActionContext, claims: ViewToken | None) -> ToolCall:
    """The member's session and membership (re-read) and the view the token names: one
    trip to the database thread for what every view request checks first."""
    admit(ctx)
    return _view_for_token(ctx, claims)


def _authorize_view(ctx, view, kind, **kwargs) -> authority.Authorization:
    return app_views.app_view_authorize(
        view=view, user=ctx.user, role=ctx.membership.role, thread=ctx.thread, kind=kind, **kwargs
    )


def _deny(auth: authority.Authorization) -> ViewRequestError:
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
    authority.request_record_refused(
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


def _compat(params: dict[str, Any]) -> str | None:
    value = params.get("_compat")
    return value if isinstance(value, str) else None


def _kind(method: str, params: dict[str, Any], default: ActionKind) -> ActionKind:
    return COMPAT_KINDS.get((method, _compat(params) or ""), default)


async def _tools_call(
    ctx: ActionContext, claims: ViewToken | None, params: dict[str, Any]
) -> dict[str, Any]:
    name = params.get("name")
    arguments = params.get("arguments") or {}
    kind = _kind("tools/call", params, ActionKind.APP_TOOL_CALL)
    await _limit(ctx, [("tool_call", str(ctx.user.pk))], "tool calls")

    def request() -> tool_calls.CallRequest:
        # On the database thread, in the decision's trip: the session, membership and token
        # are checked, then the call is decided and recorded (one trip, not four).
        view = _admitted_view(ctx, claims)
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise _refuse(
                ctx,
                view,
                kind,
                "invalid_params",
                "tools/call needs a tool name and object arguments.",
            )
        if not ctx.can_act:
            # Decided (and audited) before anything else: a viewer's view neither refreshes
            # the catalogue nor stores or broadcasts a refused call.
            raise _deny(
                _authorize_view(
                    ctx, view, kind, tool_name=name, extra={"refused_before_call": True}
                )
            )
        return tool_calls.CallRequest(
            thread=ctx.thread,
            server=view.server,
            tool_name=name,
            arguments=arguments,
            origin="app_view",
            user=ctx.user,
            role=ctx.membership.role,
            parent_view=view,
            action_kind=kind,
        )

    try:
        call = await tool_calls.tool_call_start(request)
    except tool_calls.ToolCallRefused as exc:
        # Past the caps on pending approvals (audited by the service): asked nothing.
        raise ViewRequestError(exc.code, exc.message, RATE_LIMITED, audited=True) from exc
    if call.status not in waiters.FINAL:
        payload = await waiters.wait_final(
            call_id=call.pk,
            thread_id=ctx.thread.pk,
            timeout=VIEW_CALL_WAIT,
            read_final=database_sync_to_async(lambda: _final_payload(call.pk)),
            runs_here=runtime.is_running(tool_calls.task_key(call.pk)),
        )
        if payload is None:
            raise ViewRequestError("timeout", "The tool call is still waiting.")
    else:
        payload = await database_sync_to_async(_final_payload)(call.pk)
        assert payload is not None
    if payload["status"] in (ToolCallStatus.REJECTED, ToolCallStatus.CANCELLED):
        error = payload.get("error") or {}
        raise ViewRequestError(
            error.get("code", payload["status"]), error.get("message", "The call was refused.")
        )
    if payload["status"] == ToolCallStatus.ERROR and not payload.get("result"):
        error = payload.get("error") or {}
        raise ViewRequestError(error.get("code", "error"), error.get("message", "The call failed."))
    return call_tool_result(payload["result"]) or {"content": [], "isError": True}


def view_call_key(channel_name: str, rid: Any) -> str:
    """The task answering one of a socket's view tools/call requests."""
    return f"view-call:{channel_name}:{rid}"


def view_calls_cancel(channel_name: str) -> int:
    """A socket closed: its views' pending tools/call requests stop waiting (their waiters
    leave, and a call's shared watcher stops with its last waiter). The calls themselves
    stay as they are: a pending approval can still be decided, and its result is stored."""
    prefix = view_call_key(channel_name, "")
    return sum(runtime.cancel(key) for key in runtime.running() if key.startswith(prefix))


def _final_payload(call_id: int) -> dict[str, Any] | None:
    call = tool_calls_queryset().get(pk=call_id)
    return serialize_tool_call(call) if call.status in waiters.FINAL else None


async def _resources(ctx, view: ToolCall, method: str, params: dict[str, Any]) -> dict[str, Any]:
    uri = params.get("uri")
    auth = await database_sync_to_async(_authorize_view)(
        ctx, view, ActionKind.RESOURCE_READ, extra={"method": method, "uri": str(uri)[:300]}
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
    for block in blocks[:20]:
        if (
            isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ):
            texts.append(block["text"])
        elif isinstance(block, str):
            texts.append(block)
    return "\n\n".join(texts).strip()


def _ui_message(ctx, view: ToolCall, params: dict[str, Any]) -> dict[str, Any]:
    """``{}`` when posted (a turn may start), or ``{"confirm": card}``: what the host's
    message card shows until the member presses Send (``view.message_decide``)."""
    text = _content_text(params.get("content"))
    kind = _kind("ui/message", params, ActionKind.UI_MESSAGE)
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


def _update_model_context(ctx, view: ToolCall, params: dict[str, Any]) -> None:
    context = {k: params[k] for k in ("content", "structuredContent") if k in params}
    kind = ActionKind.UI_UPDATE_MODEL_CONTEXT
    _refuse_oversized(ctx, view, kind, context, MAX_MODEL_CONTEXT_BYTES, "Model context")
    auth = app_views.app_view_model_context_set(
        view=view, user=ctx.user, role=ctx.membership.role, thread=ctx.thread, context=context
    )
    if not auth.allowed:
        raise _deny(auth)


def _open_link(ctx, view: ToolCall, params: dict[str, Any]) -> None:
    url = params.get("url")
    auth = _authorize_view(
        ctx,
        view,
        _kind("ui/open-link", params, ActionKind.UI_OPEN_LINK),
        url=url if isinstance(url, str) else "",
    )
    if not auth.allowed:
        raise _deny(auth)


def _display_mode(ctx, view: ToolCall, params: dict[str, Any]) -> dict[str, Any]:
    mode = params.get("mode")
    current = (
        params.get("current")
        if params.get("current") in ("inline", "fullscreen", "pip")
        else "inline"
    )
    declared = params.get("availableDisplayModes")
    declared = (
        tuple(m for m in declared if isinstance(m, str)) if isinstance(declared, list) else None
    )
    auth = _authorize_view(
        ctx,
        view,
        ActionKind.UI_REQUEST_DISPLAY_MODE,
        display_mode=mode if isinstance(mode, str) else "",
        available_display_modes=declared,
        # How the person let it happen (the host's word, F14): a click or key in the frame
        # just before ("frame"), or Allow on the host's card ("card").
        extra={"gesture": params.get("gesture") if params.get("gesture") in GESTURES else ""},
    )
    return {"mode": mode if auth.allowed else current}


def _download(ctx, view: ToolCall, params: dict[str, Any]) -> None:
    contents = params.get("contents")
    if not isinstance(contents, list) or not contents:
        raise _refuse(
            ctx,
            view,
            ActionKind.UI_DOWNLOAD_FILE,
            "invalid_params",
            "ui/download-file needs contents.",
        )
    auth = _authorize_view(ctx, view, ActionKind.UI_DOWNLOAD_FILE, extra={"items": len(contents)})
    if not auth.allowed:
        raise _deny(auth)


def _set_widget_state(ctx, view: ToolCall, params: dict[str, Any]) -> None:
    state = params.get("state")
    kind = ActionKind.WIDGET_STATE
    _refuse_oversized(ctx, view, kind, state, MAX_WIDGET_STATE_BYTES, "Widget state")
    auth = app_views.app_view_widget_state_set(
        view=view, user=ctx.user, role=ctx.membership.role, thread=ctx.thread, state=state
    )
    if not auth.allowed:
        raise _deny(auth)


def _request_modal(ctx, view: ToolCall, params: dict[str, Any]) -> dict[str, Any]:
    """Apps SDK requestModal: decided and audited like every view request. The host titles
    the dialog with the app's name; the app's own title is only shown as its text."""
    title = params.get("title")
    title = " ".join(title.split())[:120] if isinstance(title, str) else ""
    auth = _authorize_view(ctx, view, ActionKind.APPS_SDK_REQUEST_MODAL, extra={"title": title})
    if not auth.allowed:
        raise _deny(auth)
    return {"appName": view.server.name, "title": title}


async def _limit(ctx: ActionContext, buckets: list[tuple[str, str]], what: str) -> None:
    verdict = await take_tokens(ctx, buckets)
    if not verdict.allowed:
        error = rate_limited_error(verdict, what)
        raise ViewRequestError(
            error.code, error.message, RATE_LIMITED, audited=True, details=error.details
        )


async def _limit_view_requests(ctx: ActionContext, claims: ViewToken | None) -> None:
    """Before any database work: every request of a view, and of a person, is rate limited."""
    await _limit(
        ctx,
        [
            ("user_view_request", str(ctx.user.pk)),
            ("view_request", str(claims.call_id if claims else "invalid")),
        ],
        "requests from this view",
    )


async def _dispatch(ctx: ActionContext, view: ToolCall, method: str, params: dict[str, Any]):
    db = database_sync_to_async
    if method in ("resources/read", "resources/list", "resources/templates/list", "prompts/list"):
        return await _resources(ctx, view, method, params)
    if method == "ui/message":
        reply = await db(_ui_message)(ctx, view, params)
        if not reply:
            await start_turn(thread=ctx.thread, user=ctx.user, role=ctx.membership.role)
        return reply
    if method == "ui/update-model-context":
        await _limit(ctx, [("view_model_context", str(view.pk))], "model context updates")
        await db(_update_model_context)(ctx, view, params)
        return {}
    if method == "openai/requestModal":
        return await db(_request_modal)(ctx, view, params)
    if method == "ui/open-link":
        await db(_open_link)(ctx, view, params)
        return {}
    if method == "ui/request-display-mode":
        return await db(_display_mode)(ctx, view, params)
    if method == "ui/download-file":
        await db(_download)(ctx, view, params)
        return {}
    if method == "atrium/setWidgetState":
        await _limit(ctx, [("view_widget_state", str(view.pk))], "widget state updates")
        await db(_set_widget_state)(ctx, view, params)
        return {}
    if method == "ping":
        return {}
    raise ViewRequestError(
        "method_not_found", f"Unknown method '{method[:80]}'.", JSONRPC_METHOD_NOT_FOUND
    )


@action("view.request", admits_itself=True)
async def view_request(ctx: ActionContext, msg: dict[str, Any]) -> Any:
    method = msg.get("method")
    params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
    if not isinstance(method, str):
        raise ViewRequestError("invalid_request", "A view request needs a method.", -32600)
    claims = read_view_token(msg.get("token"))
    await _limit_view_requests(ctx, claims)
    if method != "tools/call" or not _token_is_this_sockets(ctx, claims):
        # A forged or foreign token is refused here, answered before the socket's next frame.
        view = await database_sync_to_async(_admitted_view)(ctx, claims)
        return await _dispatch(ctx, view, method, params)

    # A tool call may wait (approval, a slow tool): answer from a task, keep the socket free.
    rid = msg.get("rid")

    async def answer() -> None:
        try:
            result = await _tools_call(ctx, claims, params)
            reply = {"type": "reply", "rid": rid, "ok": True, "result": result}
        except SessionEnded:
            if ctx.end_session is not None:
                await ctx.end_session(rid)
            return
        except ActionError as exc:
            if not exc.audited:
                await database_sync_to_async(refusal_record)(ctx, "view.request", exc.code)
            reply = {"type": "reply", "rid": rid, "ok": False, "error": exc.to_dict()}
        except Exception:
            log.exception("view tools/call failed")
            reply = {
                "type": "reply",
                "rid": rid,
                "ok": False,
                "error": {
                    "code": "internal_error",
                    "message": "The call failed.",
                    "jsonrpcCode": -32603,
                },
            }
        # The socket may have closed meanwhile; the result is stored anyway.
        with contextlib.suppress(Exception):
            await ctx.send(reply)

    runtime.spawn(view_call_key(ctx.channel_name, rid), answer())
    return DEFERRED


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

    def notified() -> None:
        view = _admitted_view(ctx, claims)
        if method == "notifications/message":
            _log_message(ctx, view, params)

    await database_sync_to_async(notified)()
    return {}


def _log_message(ctx, view: ToolCall, params: dict[str, Any]) -> None:
    level = params.get("level") if isinstance(params.get("level"), str) else "info"
    data = json.dumps(params.get("data"), default=str)[:2000]
    _authorize_view(
        ctx,
        view,
        _kind("notifications/message", params, ActionKind.LOG_MESSAGE),
        extra={"level": level[:20], "logger": str(params.get("logger", ""))[:100], "data": data},
    )
