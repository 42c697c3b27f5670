"""Files of a thread passed to tools, and tool results that point back at them
(docs/files.md, "Passing files to tools"). The shapes are decided in
``chat.media.tool_inputs`` (pure); here the rows are read, checked and audited.

1. ``tool_files_resolve`` — when a person asks for a call (``/call``, the tool picker):
   each ``{"$file": …}`` argument names a ready file attached to a message of **this
   thread**; it becomes the value the tool's schema takes, with the file's authenticated
   URL (what the call stores and its approval card shows). Anything else is refused,
   audited (``FILE_TO_TOOL_REFUSED``), and nothing is recorded.
2. ``tool_files_hand_over`` — when the call runs (after any approval): each file argument
   of a person's call is checked again and handed over: a single-file link minted now
   (``file_link_mint``, audited 708), or the bytes for an embedded one; each audited
   ``FILE_PASSED_TO_TOOL``. Calls from the model or an app view get nothing here.
3. ``result_file_links_open`` — a result's ``resource_link`` to one of this thread's files
   (the link it was given, echoed) is stored as the file itself (the same part as a
   message's attached file), served through the authenticated URL: no token is stored.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.core.files.storage import default_storage
from django.db import transaction
from django.urls import reverse

from audit.types import AuditEventType, Decision
from audit.writer import record
from mcp_bridge.errors import BridgeError

from ..models import Membership, Thread, ToolCall
from .attachments import file_link_mint
from .models import MediaAsset, MediaOrigin, MediaStatus
from .presenters import attachment_part
from .tool_inputs import (
    EMBED_MAX_BYTES,
    LINK_SHAPES,
    MAX_FILE_ARGUMENTS,
    FileInfo,
    atrium_file_id,
    choose_shape,
    embedded_encoding,
    file_fields,
    file_references,
    result_file_links,
    server_value,
    stored_files,
    stored_value,
)

MAX_LISTED = 200  # files the picker offers (newest first)


class ToolFileRefused(Exception):
    """A file argument refused before the call is recorded (already audited)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class FileHandOverRefused(BridgeError):
    """A file argument that can no longer be handed over when its call runs."""

    code = "file_refused"
    default_message = "A file of this call can no longer be passed to the tool."


def media_prefix() -> str:
    """``<origin>/media/``: what every Atrium file URL starts with."""
    return settings.ATRIUM_APP_ORIGIN + reverse("media-asset", kwargs={"asset_id": 1})[:-2]


def file_url(asset_id: int) -> str:
    """A file's normal URL (a member's session is checked)."""
    return settings.ATRIUM_APP_ORIGIN + reverse("media-asset", kwargs={"asset_id": asset_id})


def _info(asset: MediaAsset) -> FileInfo:
    return FileInfo(
        id=asset.pk, name=asset.filename or f"file-{asset.pk}", mime_type=asset.mime_type,
        size=asset.size,
    )  # fmt: skip


def _thread_files() -> Any:
    return MediaAsset.objects.filter(
        origin=MediaOrigin.ATTACHMENT, status=MediaStatus.READY, message__isnull=False
    )


def thread_files_for_tools(*, thread: Thread) -> list[dict[str, Any]]:
    """The ready files attached to this thread's messages, newest first (the picker's
    choice for a file argument)."""
    rows = _thread_files().filter(thread=thread).order_by("-id")[:MAX_LISTED]
    return [
        {
            "id": a.pk,
            "name": a.filename,
            "size": a.size,
            "mimeType": a.mime_type,
            "kind": a.kind,
            "messageId": a.message_id,
        }
        for a in rows
    ]


def _refuse(
    *, thread: Thread, user: Any, server_id: int, tool_name: str, code: str, message: str,
    extra: dict[str, Any],
) -> ToolFileRefused:  # fmt: skip
    with transaction.atomic():
        record(
            event_type=AuditEventType.FILE_TO_TOOL_REFUSED,
            decision=Decision.DENIED,
            actor_kind="user",
            actor_user_id=getattr(user, "pk", None),
            workspace_id=thread.workspace_id,
            thread_id=thread.pk,
            server_id=server_id,
            tool_name=tool_name[:200],
            action="tool_file",
            reason=code,
            extra=extra,
        )
    return ToolFileRefused(code, message)


def _find(thread: Thread, ref: Any) -> MediaAsset | None:
    """The attached file a reference names in this thread: its id, or its name (the
    newest of that name). Another thread's file is not found (the same answer as none)."""
    files = MediaAsset.objects.filter(thread=thread, origin=MediaOrigin.ATTACHMENT)
    files = files.filter(message__isnull=False)
    if isinstance(ref, int) and not isinstance(ref, bool):
        return files.filter(pk=ref).first()
    if isinstance(ref, str) and ref.strip():
        return files.filter(filename__iexact=ref.strip()).order_by("-id").first()
    return None


def tool_files_resolve(
    *,
    thread: Thread,
    user: Any,
    server_id: int,
    tool_name: str,
    input_schema: Any,
    arguments: dict[str, Any],
) -> dict[str, Any]:
    """A person's arguments with each ``{"$file": …}`` replaced by the value the tool
    takes (resource_link, URL, embedded resource: ``tool_inputs``). Raises
    ``ToolFileRefused`` (audited) for a file that is not a ready file of this thread, an
    argument that takes no file, or a file too large for the only shape accepted."""
    references = file_references(arguments)
    if not references:
        return arguments

    def refuse(code: str, message: str, **extra: Any) -> ToolFileRefused:
        return _refuse(
            thread=thread, user=user, server_id=server_id, tool_name=tool_name, code=code,
            message=message, extra=extra,
        )  # fmt: skip

    if len(references) > MAX_FILE_ARGUMENTS:
        raise refuse("too_many_files", f"A call takes at most {MAX_FILE_ARGUMENTS} files.")
    if not Membership.objects.filter(user=user, workspace_id=thread.workspace_id).exists():
        raise refuse("not_a_member", "Only members of this workspace can pass its files.")
    fields = file_fields(input_schema)
    resolved = dict(arguments)
    for key, (ref, wanted) in references.items():
        field = fields.get(key)
        if field is None:
            takes = ", ".join(f"'{name}'" for name in fields) or "none of its arguments"
            raise refuse(
                "not_a_file_argument",
                f"{tool_name}'s argument '{key}' does not take a file (files go in: {takes}).",
                argument=key[:100],
            )
        asset = _find(thread, ref)
        if asset is None:
            shown = f"#{ref}" if isinstance(ref, int) else f"“{str(ref)[:80]}”"
            raise refuse(
                "file_not_in_thread",
                f"There is no file {shown} in this thread: only files attached to this "
                "thread's messages can be passed to a tool.",
                argument=key[:100],
                ref=str(ref)[:100],
            )
        if asset.status != MediaStatus.READY:
            raise refuse(
                "file_not_ready",
                f"{asset.filename} is not stored yet ({asset.status}).",
                asset_id=asset.pk,
            )
        shape, why = choose_shape(field, size=asset.size, wanted=wanted)
        if shape is None:
            raise refuse("file_shape_refused", f"{asset.filename}: {why}", asset_id=asset.pk)
        resolved[key] = stored_value(
            shape,
            _info(asset),
            file_url=file_url(asset.pk),
            encoding=embedded_encoding(field, asset.mime_type),
        )
    return resolved


async def tool_files_resolve_async(**kwargs: Any) -> dict[str, Any]:
    return await database_sync_to_async(tool_files_resolve)(**kwargs)


# ------------------------------------------------------------------- when it runs


def _read(asset: MediaAsset) -> bytes:
    if asset.size > EMBED_MAX_BYTES:
        raise FileHandOverRefused(f"{asset.filename} is too large to embed.")
    with default_storage.open(asset.storage_path, "rb") as handle:
        data: bytes = handle.read(EMBED_MAX_BYTES + 1)
    if len(data) != asset.size:
        raise FileHandOverRefused(f"{asset.filename} could not be read.")
    return data


def tool_files_hand_over(*, call: ToolCall, input_schema: Any) -> dict[str, Any]:
    """The arguments a person's call is sent with: each of its files checked again (still
    a ready file of the call's thread, the person still a member), then handed over as a
    link minted now or as its bytes; audited per file. Raises ``FileHandOverRefused``."""
    found = stored_files(call.arguments, input_schema, media_prefix())
    if call.origin != "user" or not found:
        return call.arguments
    thread = call.thread
    member = call.requested_by_id is not None and (
        Membership.objects.filter(
            user_id=call.requested_by_id, workspace_id=thread.workspace_id
        ).exists()
    )
    assets = {a.pk: a for a in _thread_files().filter(thread_id=call.thread_id)
              .filter(pk__in=[f.asset_id for f in found])}  # fmt: skip
    arguments = dict(call.arguments)
    with transaction.atomic():
        for item in found:
            asset = assets.get(item.asset_id)
            if asset is None or not member:
                raise FileHandOverRefused(
                    f"The file for '{item.key}' is no longer in this thread, or you can no "
                    "longer read it."
                )
            info = _info(asset)
            stored = arguments[item.key]
            as_link = item.shape in LINK_SHAPES
            if as_link:
                link = file_link_mint(
                    asset=asset,
                    actor=call.requested_by,
                    purpose=f"tool {call.server.slug}.{call.tool_name}"[:300],
                )
                arguments[item.key] = server_value(item.shape, stored, info, link=link)
            else:
                arguments[item.key] = server_value(item.shape, stored, info, content=_read(asset))
            record(
                event_type=AuditEventType.FILE_PASSED_TO_TOOL,
                decision=Decision.ALLOWED,
                actor_kind="user",
                actor_user_id=call.requested_by_id,
                workspace_id=thread.workspace_id,
                thread_id=call.thread_id,
                binding_id=call.binding_id,
                server_id=call.server_id,
                tool_name=call.tool_name,
                action="tool_file",
                reason="link" if as_link else "embedded",
                extra={
                    "tool_call_id": call.pk,
                    "asset_id": asset.pk,
                    "name": info.name[:200],
                    "argument": item.key[:100],
                    "shape": str(item.shape),
                    "size": asset.size,
                },
            )
    return arguments


async def arguments_for_server(call: ToolCall, input_schema: Any) -> dict[str, Any]:
    """``tool_files_hand_over`` off the event loop, only for a person's call that has file
    arguments (every other call: its stored arguments, with no database trip)."""
    if call.origin != "user" or not stored_files(call.arguments, input_schema, media_prefix()):
        return call.arguments
    return await database_sync_to_async(tool_files_hand_over)(call=call, input_schema=input_schema)


# ------------------------------------------------------------------------- results


def result_file_links_open(*, call: ToolCall, sanitized: dict[str, Any]) -> None:
    """A result's links to Atrium files: a ready file of the call's thread becomes that
    file's part (the file chip, through the authenticated URL); any other keeps its link
    with the token dropped (the authenticated URL: only members can open it)."""
    parts = sanitized.get("parts")
    if not isinstance(parts, list):
        return
    prefix = media_prefix()
    found = result_file_links(parts, prefix)
    if not found:
        return
    assets = {
        a.pk: a
        for a in MediaAsset.objects.filter(
            thread_id=call.thread_id,
            status=MediaStatus.READY,
            pk__in=[asset_id for _, asset_id in found],
        )
    }
    for index, asset_id in found:
        asset = assets.get(asset_id)
        if asset is not None:
            part = attachment_part(asset)
            part.pop("text", None)  # the text fallback describes the part itself
            if "audience" in parts[index]:
                part["audience"] = parts[index]["audience"]
            parts[index] = part
        else:
            parts[index] = {**parts[index], "uri": file_url(asset_id), "clickable": True}
    for entry in sanitized.get("resources") or []:
        named = atrium_file_id(entry.get("uri"), prefix) if isinstance(entry, dict) else None
        if named is not None:
            entry["uri"] = file_url(named)
            entry["status"] = "ready" if named in assets else "external"
