"""The async paths a member's request takes: ask the bound server, then the services.

Every refusal is audited (``PROMPT_REFUSED`` / ``RESOURCE_ATTACH_REFUSED``, at a bounded
rate) and raised as ``ContextRefused`` with a code and a message a person can read."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from channels.db import database_sync_to_async

from audit.types import AuditEventType
from mcp_bridge import gateway
from mcp_bridge.errors import BridgeError
from mcp_bridge.models import McpServer

from ..models import Message, Thread
from ..services import ChatError
from ..services.refusals import action_record_refused
from . import listings, services
from .content import is_ui_resource, prompt_items, resource_copy

MAX_ARGUMENTS = 30
MAX_ARGUMENT_CHARS = 4_000


class ContextRefused(Exception):
    def __init__(self, code: str, message: str, *, audited: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.audited = audited  # its DENIED row is written


async def _refuse(
    *,
    event_type: AuditEventType,
    user: Any,
    thread: Thread,
    server: McpServer | None,
    code: str,
    message: str,
    extra: dict[str, Any],
) -> ContextRefused:
    await database_sync_to_async(action_record_refused)(
        user=user,
        workspace_id=thread.workspace_id,
        thread_id=thread.pk,
        action="prompt.use" if event_type == AuditEventType.PROMPT_REFUSED else "resource.attach",
        reason=code,
        event_type=event_type,
        server_id=getattr(server, "pk", None),
        extra=extra,
    )
    return ContextRefused(code, message, audited=True)


def _string_arguments(arguments: Any) -> dict[str, str] | None:
    """Prompt arguments are strings (MCP ``PromptArgument``); anything else is refused."""
    if not isinstance(arguments, Mapping) or len(arguments) > MAX_ARGUMENTS:
        return None
    out: dict[str, str] = {}
    for key, value in arguments.items():
        if not isinstance(key, str) or not isinstance(value, str):
            return None
        if len(key) > 100 or len(value) > MAX_ARGUMENT_CHARS:
            return None
        out[key] = value
    return out


async def prompt_use(
    *, thread: Thread, user: Any, can_act: bool, server_slug: Any, name: Any, arguments: Any
) -> list[Message]:
    """Get a bound server's prompt with the member's arguments and post its messages."""
    extra = {"server": str(server_slug)[:60], "prompt": str(name)[:200]}
    refused = AuditEventType.PROMPT_REFUSED
    server = await listings.bound_server(thread, server_slug)
    if not can_act:
        raise await _refuse(
            event_type=refused,
            user=user,
            thread=thread,
            server=server,
            code="viewer_cannot_act",
            message="Viewers can read this thread but not post in it.",
            extra=extra,
        )
    if server is None:
        raise await _refuse(
            event_type=refused,
            user=user,
            thread=thread,
            server=None,
            code="server_not_bound",
            message=f"No server named '{str(server_slug)[:60]}' is bound to this thread.",
            extra=extra,
        )
    args = _string_arguments(arguments)
    if args is None or not isinstance(name, str) or not name:
        raise await _refuse(
            event_type=refused,
            user=user,
            thread=thread,
            server=server,
            code="invalid_arguments",
            message="A prompt takes a name and text arguments (name=value).",
            extra=extra,
        )
    try:
        prompt = await listings.find_prompt(server, name, user.pk)
        if prompt is None:
            raise await _refuse(
                event_type=refused,
                user=user,
                thread=thread,
                server=server,
                code="unknown_prompt",
                message=f"The {server.name} server has no prompt named '{name[:100]}'.",
                extra=extra,
            )
        missing = [
            a.get("name")
            for a in prompt.get("arguments") or []
            if isinstance(a, dict) and a.get("required") and not args.get(str(a.get("name")))
        ]
        if missing:
            raise await _refuse(
                event_type=refused,
                user=user,
                thread=thread,
                server=server,
                code="missing_arguments",
                message="This prompt needs: " + ", ".join(str(m) for m in missing) + ".",
                extra={**extra, "missing": [str(m)[:100] for m in missing]},
            )
        spec = await gateway.server_spec(server, user_id=user.pk)
        result = await gateway.manager().get_prompt(spec, name, args)
    except BridgeError as exc:
        raise await _refuse(
            event_type=refused,
            user=user,
            thread=thread,
            server=server,
            code=exc.code,
            message=exc.user_message,
            extra=extra,
        ) from exc
    items = prompt_items(result)
    try:
        return await database_sync_to_async(services.prompt_messages_post)(
            thread=thread,
            author=user,
            server=server,
            prompt_name=name,
            argument_names=list(args),
            items=items,
        )
    except ChatError as exc:
        raise ContextRefused(exc.code, exc.message) from exc


async def resources_attach(
    *, thread: Thread, user: Any, can_act: bool, text: Any, refs: Any, attachment_ids: Any = ()
) -> Message:
    """Read the chosen resources of bound servers, subscribe where offered, and post the
    member's message with them attached."""
    refused = AuditEventType.RESOURCE_ATTACH_REFUSED
    if not isinstance(refs, list) or not refs or len(refs) > services.MAX_ATTACHMENTS:
        raise ContextRefused(
            "invalid_message", f"Send 1 to {services.MAX_ATTACHMENTS} resources to attach."
        )
    if not can_act:
        raise await _refuse(
            event_type=refused,
            user=user,
            thread=thread,
            server=None,
            code="viewer_cannot_act",
            message="Viewers can read this thread but not post in it.",
            extra={},
        )
    attachments = []
    for ref in refs:
        ref = ref if isinstance(ref, Mapping) else {}
        uri = ref.get("uri")
        extra = {"server": str(ref.get("server"))[:60], "uri": str(uri)[:500]}
        server = await listings.bound_server(thread, ref.get("server"))
        if server is None:
            raise await _refuse(
                event_type=refused,
                user=user,
                thread=thread,
                server=None,
                code="server_not_bound",
                message="That server is not bound to this thread.",
                extra=extra,
            )
        if not isinstance(uri, str) or not uri or len(uri) > 2000 or is_ui_resource(uri):
            raise await _refuse(
                event_type=refused,
                user=user,
                thread=thread,
                server=server,
                code="invalid_resource",
                message="That resource cannot be attached.",
                extra=extra,
            )
        try:
            entry = await listings.find_resource(server, uri, user.pk)
            if entry is None:
                raise await _refuse(
                    event_type=refused,
                    user=user,
                    thread=thread,
                    server=server,
                    code="unknown_resource",
                    message=f"The {server.name} server does not offer {uri[:200]}.",
                    extra=extra,
                )
            spec = await gateway.server_spec(server, user_id=user.pk)
            read = await gateway.manager().read_resource(spec, uri)
        except BridgeError as exc:
            raise await _refuse(
                event_type=refused,
                user=user,
                thread=thread,
                server=server,
                code=exc.code,
                message=exc.user_message,
                extra=extra,
            ) from exc
        copy = resource_copy(
            uri, read, name=str(entry.get("name") or ""), mime_type=str(entry.get("mimeType") or "")
        )
        subscribed = False
        # A server without subscriptions refuses: the copy then stays as read.
        with contextlib.suppress(BridgeError):
            await gateway.manager().subscribe_resource(spec, uri)
            subscribed = True
        attachments.append((server, copy, subscribed))
    try:
        return await database_sync_to_async(services.message_resources_post)(
            thread=thread,
            author=user,
            text=text if isinstance(text, str) else "",
            attachments=attachments,
            attachment_ids=attachment_ids if isinstance(attachment_ids, list) else (),
        )
    except ChatError as exc:
        raise ContextRefused(exc.code, exc.message) from exc


async def complete(
    *, thread: Thread, user: Any, server_slug: Any, ref: Any, argument: Any, context: Any
) -> dict[str, Any]:
    """``completion/complete`` for a bound server's prompt or resource-template argument."""
    server = await listings.bound_server(thread, server_slug)
    if server is None:
        raise ContextRefused("server_not_bound", "That server is not bound to this thread.")
    if (
        not isinstance(ref, Mapping)
        or ref.get("type") not in ("ref/prompt", "ref/resource")
        or not isinstance(argument, Mapping)
        or not isinstance(argument.get("name"), str)
        or not isinstance(argument.get("value"), str)
        or len(argument["value"]) > MAX_ARGUMENT_CHARS
    ):
        raise ContextRefused("invalid_message", "Send ref, argument {name, value}.")
    known = _string_arguments(context) if context else {}
    spec = await gateway.server_spec(server, user_id=user.pk)
    try:
        result = await gateway.manager().complete(
            spec,
            {k: str(v)[:2000] for k, v in ref.items() if k in ("type", "name", "uri")},
            {"name": argument["name"][:100], "value": argument["value"]},
            known or None,
        )
    except BridgeError as exc:
        raise ContextRefused(exc.code, exc.user_message) from exc
    values = result.get("values") if isinstance(result, dict) else None
    return {
        "values": [str(v)[:500] for v in (values or [])[:100] if isinstance(v, str)],
        "hasMore": bool(isinstance(result, dict) and result.get("hasMore")),
    }


async def resource_updated(*, server: McpServer, uri: str) -> list[int]:
    """`notifications/resources/updated`: re-read a resource that messages hold subscribed
    copies of, and refresh them."""
    if uri not in await database_sync_to_async(services.subscribed_uris)(server_id=server.pk):
        return []
    try:
        read = await gateway.read_resource(server, uri)
    except BridgeError:
        return []  # the copy stays as it was; the next update tries again
    copy = resource_copy(uri, read)
    return await database_sync_to_async(services.message_resources_refresh)(
        server_id=server.pk, uri=uri, copy=copy
    )
