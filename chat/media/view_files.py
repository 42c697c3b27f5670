"""App views and the thread's files (issue 26 part 4; docs/files.md "App views and files").

Every service here is an app view's request, decided by its binding (``bindings.policy``:
``VIEW_FILE_UPLOAD``, ``VIEW_FILE_LINK``, ``VIEW_FILES_SELECT``, ``VIEW_FILE_SAVE``, audited
470–473; members only, never viewers) and carried out by the members' upload pipeline
(``chat.media.attachments``: the role, name and size checks against the workspace's limits,
staging, type sniffing from the content, the worker): no second pipeline.

- **uploadFile** (Apps SDK): :func:`view_file_upload_begin` hands the host a ticket for the
  body (the same ``PUT /media/uploads/body/<ticket>/`` as a member's file), the asset is
  recorded with ``origin = app_upload`` and the view (``MediaAsset.app_view``);
  :func:`view_file_uploaded` then names it for the app: its ``fileId``.
- **fileIds** are signed (:func:`file_id_for`): one file, one thread, one app (server). A
  view gets them only for files its app's views uploaded or saved, and for the files its
  person chose for it in the host's chooser; it can neither forge nor widen one.
- **getFileDownloadUrl**: :func:`view_file_link` — a short-lived single-file link
  (``attachments.file_link_mint``) for a fileId of this thread and this app.
- **selectFiles**: :func:`view_files_offer` lists the thread's files for the host's chooser
  (the host page, never the view); :func:`view_files_choose` answers the person's choice
  with fileIds of exactly those files.
- **ui/download-file** (MCP Apps): :func:`view_file_save` stores the view's file as a file of
  the thread and posts "<app> saved <name>" with it (a message labelled with the app).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.core import signing
from django.db import transaction

from bindings.policy import ActionKind
from bindings.services.authorize import (
    Authorization,
    Requester,
    ViewActionRequest,
    view_action_authorize,
)

from ..models import Message, MessageRole, Thread, ToolCall
from ..presenters import serialize_message
from ..realtime.events import emit
from .attachments import (
    THREAD_FILE_ORIGINS,
    AttachmentRefused,
    attachment_begin,
    attachment_receive,
    attachment_ticket,
    file_link_mint,
)
from .formats import HEAD_BYTES
from .models import MediaAsset, MediaStatus
from .presenters import attachment_part
from .staging import staging_root
from .storage import remove_staging_file

FILE_ID_SALT = "atrium.media.view-file-id"
MAX_SAVE_FILES = 10  # files one ui/download-file may save
MAX_CHOSEN = 10  # files a person may choose for a view at once
MAX_OFFERED = 200  # newest files the chooser lists


class ViewFileRefused(Exception):
    """A refused request, with the reason code and a message for the person; ``audited``:
    the refusal is in the audit log already."""

    def __init__(self, code: str, message: str, *, audited: bool = True) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.audited = audited


@dataclass(frozen=True)
class SaveItem:
    """One file of a ``ui/download-file``, decoded: its name (a hint) and its bytes."""

    filename: str
    data: bytes


def _authorize(
    *, view: ToolCall, user: Any, role: str | None, thread: Thread, kind: ActionKind, **extra: Any
) -> Authorization:
    auth = view_action_authorize(
        ViewActionRequest(
            requester=Requester("app_view", user, role, thread),
            action_kind=kind,
            view=view,
            extra=extra,
        )
    )
    if not auth.allowed:
        raise ViewFileRefused(str(auth.decision.reason_code), auth.decision.message)
    return auth


def _refused(exc: AttachmentRefused) -> ViewFileRefused:
    # The pipeline audited it (704 "File upload refused").
    return ViewFileRefused(exc.code, exc.message)


# --------------------------------------------------------------------------- file ids


def file_id_for(*, asset: MediaAsset, view: ToolCall) -> str:
    """The id under which ``view``'s app knows ``asset``: signed, naming the file, its
    thread and the app (server), so it is good for every view of that app in that thread
    (across reloads, e.g. kept in widget state) and for nothing else."""
    return "file_" + signing.dumps(
        [asset.pk, asset.thread_id, view.server_id], salt=FILE_ID_SALT, compress=True
    )


def asset_for_file_id(file_id: Any, *, view: ToolCall) -> MediaAsset | None:
    """The file a fileId names, if it is one of this view's app and thread, still there
    and not rejected; else None."""
    if not isinstance(file_id, str) or not file_id.startswith("file_") or len(file_id) > 300:
        return None
    try:
        asset_id, thread_id, server_id = signing.loads(file_id[5:], salt=FILE_ID_SALT)
    except (signing.BadSignature, ValueError, TypeError):
        return None
    if (thread_id, server_id) != (view.thread_id, view.server_id):
        return None
    return (
        MediaAsset.objects.select_related("thread")
        .filter(pk=asset_id, thread_id=thread_id, origin__in=THREAD_FILE_ORIGINS)
        .exclude(status=MediaStatus.REJECTED)
        .first()
    )


def _described(asset: MediaAsset, view: ToolCall) -> dict[str, Any]:
    """What the view learns of a file it was given (Apps SDK FileMetadata, and more)."""
    return {
        "fileId": file_id_for(asset=asset, view=view),
        "fileName": asset.filename,
        "mimeType": asset.mime_type,
        "size": asset.size,
    }


# --------------------------------------------------------------------------- uploadFile


def view_file_upload_begin(
    *,
    view: ToolCall,
    user: Any,
    role: str | None,
    thread: Thread,
    kind: ActionKind,
    filename: str,
    size: int,
) -> dict[str, Any]:
    """A view's ``uploadFile``: decided, then the members' checks (name, size against the
    workspace's limits) and a ticket for the body, which the host sends."""
    _authorize(
        view=view,
        user=user,
        role=role,
        thread=thread,
        kind=kind,
        step="begin",
        filename=filename[:200],
        size=size,
    )
    try:
        return attachment_begin(
            thread=thread, actor=user, filename=filename, size=size, app_view_id=view.pk
        )
    except AttachmentRefused as exc:
        raise _refused(exc) from None


def view_file_uploaded(
    *, view: ToolCall, user: Any, role: str | None, thread: Thread, kind: ActionKind, asset_id: Any
) -> dict[str, Any]:
    """The body arrived: the fileId of the view's own upload (this view, this person)."""
    asset = (
        MediaAsset.objects.filter(
            pk=asset_id if isinstance(asset_id, int) else 0,
            thread=thread,
            app_view_id=view.pk,
            uploaded_by=user,
        ).first()
        if not isinstance(asset_id, bool)
        else None
    )
    if asset is None:
        raise ViewFileRefused("file_not_found", "That upload is not this view's.", audited=False)
    if asset.status == MediaStatus.REJECTED:
        raise ViewFileRefused("rejected", asset.reason or "The file could not be stored.")
    _authorize(
        view=view, user=user, role=role, thread=thread, kind=kind, step="stored", asset=asset.pk
    )
    return _described(asset, view)


# ------------------------------------------------------------------- getFileDownloadUrl


def view_file_link(
    *, view: ToolCall, user: Any, role: str | None, thread: Thread, kind: ActionKind, file_id: Any
) -> dict[str, Any]:
    """A view's ``getFileDownloadUrl``: a short-lived link to one file it was given."""
    asset = asset_for_file_id(file_id, view=view)
    _authorize(
        view=view,
        user=user,
        role=role,
        thread=thread,
        kind=kind,
        asset=asset.pk if asset else None,
        found=asset is not None,
    )
    if asset is None:
        raise ViewFileRefused(
            "file_not_found", "No such file for this app in this thread.", audited=False
        )
    if asset.status != MediaStatus.READY:
        raise ViewFileRefused(
            "not_ready", "The file is still being stored; try again in a moment.", audited=False
        )
    url = file_link_mint(
        asset=asset, actor=user, purpose=f"getFileDownloadUrl of {view.server.name} (view)"
    )
    return {"downloadUrl": url, "fileName": asset.filename, "mimeType": asset.mime_type}


# --------------------------------------------------------------------------- selectFiles


def _thread_files(thread: Thread) -> Any:
    """The thread's files a person may hand a view: sent attachments and app files."""
    return (
        MediaAsset.objects.filter(thread=thread, origin__in=THREAD_FILE_ORIGINS)
        .exclude(status=MediaStatus.REJECTED)
        .exclude(message__isnull=True, app_view__isnull=True)
    )


def view_files_offer(
    *, view: ToolCall, user: Any, role: str | None, thread: Thread, kind: ActionKind
) -> dict[str, Any]:
    """A view's ``selectFiles``: decided, then the thread's files for the host's chooser
    (the host page's, never the view's: it sees only what its person chooses)."""
    _authorize(view=view, user=user, role=role, thread=thread, kind=kind, step="asked")
    rows = list(_thread_files(thread).order_by("-id")[:MAX_OFFERED])
    return {"appName": view.server.name, "files": [attachment_part(a) for a in rows]}


def view_files_choose(
    *,
    view: ToolCall,
    user: Any,
    role: str | None,
    thread: Thread,
    kind: ActionKind,
    asset_ids: Sequence[Any],
) -> list[dict[str, Any]]:
    """The person chose these files of the thread for the view: decided again (the person
    as they are now), audited with what was chosen; the view gets their fileIds."""
    wanted: list[int] = []
    for raw in asset_ids:
        if not isinstance(raw, int) or isinstance(raw, bool) or raw in wanted:
            raise ViewFileRefused("invalid_params", "Choose files of this thread.", audited=False)
        wanted.append(raw)
    if len(wanted) > MAX_CHOSEN:
        raise ViewFileRefused(
            "too_many_files", f"Choose at most {MAX_CHOSEN} files.", audited=False
        )
    found = {a.pk: a for a in _thread_files(thread).filter(pk__in=wanted)}
    if len(found) != len(wanted):
        raise ViewFileRefused(
            "file_not_found", "One of the files is no longer in this thread.", audited=False
        )
    chosen = [found[pk] for pk in wanted]
    _authorize(
        view=view,
        user=user,
        role=role,
        thread=thread,
        kind=kind,
        step="chosen",
        assets=wanted,
        names=[a.filename for a in chosen],
    )
    return [_described(a, view) for a in chosen]


# ----------------------------------------------------------------------- ui/download-file


def _stage(ticket_key: str, data: bytes) -> Any:
    path = staging_root() / ticket_key
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    return path


def view_file_save(
    *,
    view: ToolCall,
    user: Any,
    role: str | None,
    thread: Thread,
    kind: ActionKind,
    items: Sequence[SaveItem],
) -> dict[str, Any]:
    """A view's ``ui/download-file``: each file through the members' pipeline (limits,
    staging, sniffing, the worker), then "<app> saved <name>" in the thread with the files
    attached — the same chip as a member's attachment, for every member, after a reload."""
    if not items or len(items) > MAX_SAVE_FILES:
        raise ViewFileRefused("invalid_params", f"Send 1 to {MAX_SAVE_FILES} files.", audited=False)
    _authorize(
        view=view,
        user=user,
        role=role,
        thread=thread,
        kind=kind,
        files=[i.filename[:200] for i in items],
        sizes=[len(i.data) for i in items],
    )
    assets: list[MediaAsset] = []
    for item in items:
        try:
            ticket, _note = attachment_ticket(
                thread=thread,
                actor=user,
                filename=item.filename,
                size=len(item.data),
                app_view_id=view.pk,
            )
        except AttachmentRefused as exc:
            raise _refused(exc) from None
        path = _stage(ticket.key, item.data)
        try:
            assets.append(
                attachment_receive(
                    ticket=ticket, path=path, size=len(item.data), head=item.data[:HEAD_BYTES]
                )
            )
        except AttachmentRefused as exc:  # audited; its staging file removed
            raise _refused(exc) from None
        except BaseException:
            remove_staging_file(path)
            raise
    app = view.server.name
    names = ", ".join(a.filename for a in assets)
    with transaction.atomic():
        message = Message.objects.create(
            thread=thread,
            role=MessageRole.USER,
            author=user,
            author_label=f"{app} (via view)",
            text=f"{app} saved {names}",
            via_tool_call=view,
        )
        MediaAsset.objects.filter(pk__in=[a.pk for a in assets]).update(message=message)
        emit(thread_id=thread.pk, kind="message", payload=serialize_message(message))
    return {
        "messageId": message.pk,
        "files": [_described(a, view) for a in assets],
    }
