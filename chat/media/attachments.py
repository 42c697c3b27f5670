"""Files members attach to messages (issue 26; docs/files.md). One ``MediaAsset`` per file,
``origin = attachment``: the same staging, worker, thumbnails and serving as tool media.

The path of a file:

1. ``attachment_begin`` (a Django view, session + CSRF): the member's role, the name, the
   declared size against the workspace's limits — refused before any byte is sent — and a
   signed upload ticket (:func:`upload_ticket`) for one file of at most that size;
2. ``chat.media.uploads`` (plain ASGI, ahead of Django's body buffering) streams the body
   to a staging file, refusing a ``Content-Length`` over the ticket at once and stopping a
   body that grows past it; ``attachment_receive`` then sniffs the type from the content
   (never the name or the browser's type), checks an image's header against the bomb
   limits and records a ``staged`` asset, enqueuing ``persist_tool_media`` on commit;
3. ``message_post(attachment_ids=…)`` claims the member's staged or ready files for the
   message (``attachments_claim``), renaming duplicates ("a (2).png");
4. the worker persists each (``chat.media.services``), extracts a PDF's or text file's
   text for the model (``chat.media.documents``) and re-emits the message.

An app view's files (Apps SDK ``uploadFile``, MCP Apps ``ui/download-file``) take the same
path with ``origin = app_upload`` and the view on the ticket (``chat.media.view_files``).

Deleting a message deletes its files (``attachments_delete_for_message``, from a
``pre_delete`` receiver); ``attachments_expire`` is the workspace retention sweep. Every
create, refusal and delete is audited (audit types 703–708).
"""

from __future__ import annotations

import contextlib
import functools
import mimetypes
import re
import time
import unicodedata
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from celery import current_app
from django.conf import settings
from django.core import signing
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import Q, Sum
from django.urls import reverse
from django.utils import timezone

from audit.types import AuditEventType, Decision
from audit.writer import record
from mcp_bridge.normalize.limits import human_size

from ..models import Membership, Message, Thread, Workspace
from . import storage
from .formats import HEAD_BYTES, MediaRejected, describe_content, identify, verifiable
from .images import check_image_header
from .models import MediaAsset, MediaOrigin, MediaStatus, WorkspaceFileSettings
from .presenters import attachment_part
from .services import emit_message_of

PERSIST_TASK = "chat.tasks.persist_tool_media"  # chat.media.tasks.persist_tool_media
UPLOAD_SALT = "atrium.media.upload-ticket"
LINK_SALT = "atrium.media.file-link"
TICKET_MAX_AGE = 15 * 60  # seconds an upload ticket is good for
LINK_MAX_AGE = 10 * 60  # default life of a single-file link (tools, app views)
MAX_FILES_PER_MESSAGE = 10
MAX_NAME_CHARS = 200
# C0/C1 controls, and the characters that reorder how a name is shown (bidi overrides,
# embeddings, isolates and marks): "invoice‮fdp.exe" must not pass for a PDF; and lone
# surrogates (a JSON "\\ud800" decodes to one, and no database stores it).
_HIDDEN_CHARS_RE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
    "\ud800-\udfff]"
)
_SEPARATORS_RE = re.compile(r"[/\\]")
# Files of the thread that count against the workspace's limits and retention: members'
# attachments and what app views uploaded or saved (chat.media.view_files).
THREAD_FILE_ORIGINS = (MediaOrigin.ATTACHMENT, MediaOrigin.APP_UPLOAD)


class AttachmentRefused(Exception):
    """A refused upload or attachment, with a message meant for the member."""

    def __init__(self, code: str, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


# --------------------------------------------------------------------------- limits


@dataclass(frozen=True)
class FileLimits:
    max_file_bytes: int
    max_total_bytes: int
    retention_days: int


def default_limits() -> FileLimits:
    return FileLimits(
        max_file_bytes=min(
            int(settings.ATRIUM_ATTACH_MAX_FILE_BYTES), int(settings.ATRIUM_MEDIA_MAX_BYTES)
        ),
        max_total_bytes=int(settings.ATRIUM_ATTACH_MAX_TOTAL_BYTES),
        retention_days=int(settings.ATRIUM_ATTACH_RETENTION_DAYS),
    )


def limits_for(*, workspace_id: int) -> FileLimits:
    """The workspace's own row, or the defaults. A file is never larger than the media
    pipeline accepts (``ATRIUM_MEDIA_MAX_BYTES``)."""
    row = WorkspaceFileSettings.objects.filter(workspace_id=workspace_id).first()
    if row is None:
        return default_limits()
    return FileLimits(
        max_file_bytes=min(int(row.max_file_bytes), int(settings.ATRIUM_MEDIA_MAX_BYTES)),
        max_total_bytes=int(row.max_total_bytes),
        retention_days=int(row.retention_days),
    )


def workspace_attached_bytes(*, workspace_id: int) -> int:
    """Bytes of the workspace's attached files that count against its total."""
    total = (
        MediaAsset.objects.filter(origin__in=THREAD_FILE_ORIGINS, thread__workspace_id=workspace_id)
        .exclude(status=MediaStatus.REJECTED)
        .aggregate(total=Sum("size"))["total"]
    )
    return int(total or 0)


def file_settings_set(
    *,
    workspace: Workspace,
    actor: Any,
    max_file_bytes: int,
    max_total_bytes: int,
    retention_days: int,
) -> WorkspaceFileSettings:
    """Set a workspace's file limits and retention (the admin's form calls this)."""
    with transaction.atomic():
        row, _ = WorkspaceFileSettings.objects.update_or_create(
            workspace=workspace,
            defaults={
                "max_file_bytes": max_file_bytes,
                "max_total_bytes": max_total_bytes,
                "retention_days": retention_days,
            },
        )
        record(
            event_type=AuditEventType.ATTACHMENT_LIMITS_CHANGED,
            decision=Decision.ALLOWED,
            actor_kind="user" if actor else "system",
            actor_user_id=getattr(actor, "pk", None),
            workspace_id=workspace.pk,
            action="file_settings",
            extra={
                "max_file_bytes": max_file_bytes,
                "max_total_bytes": max_total_bytes,
                "retention_days": retention_days,
            },
        )
    return row


# --------------------------------------------------------------------------- names


def clean_filename(raw: str) -> tuple[str, str | None]:
    """(a safe display name, a note for the member when it had to change).

    Path separators become ``_`` (a name is never a path), control and bidi characters
    are removed, the name is NFC-normalized and cut to ``MAX_NAME_CHARS``."""
    original = raw or ""
    name = unicodedata.normalize("NFC", original)
    notes = []
    if _SEPARATORS_RE.search(name):
        name = _SEPARATORS_RE.sub("_", name)
        notes.append("path separators were replaced")
    if _HIDDEN_CHARS_RE.search(name):
        name = _HIDDEN_CHARS_RE.sub("", name)
        notes.append("control or text-direction characters were removed")
    name = name.strip().strip(".").strip()
    if len(name) > MAX_NAME_CHARS:
        stem, dot, ext = name.rpartition(".")
        keep = MAX_NAME_CHARS - (len(ext) + 1 if dot and len(ext) <= 10 else 0)
        name = (stem[:keep] + "." + ext) if dot and len(ext) <= 10 else name[:MAX_NAME_CHARS]
        notes.append("it was shortened")
    if not name:
        name = "file"
        notes.append("it had no usable characters")
    note = f"Saved as “{name}”: " + ", ".join(notes) + "." if notes else None
    return name, note


def dedupe_names(names: Sequence[str]) -> list[str]:
    """``a.png, a.png`` → ``a.png, a (2).png`` (case-insensitive), order kept."""
    seen: set[str] = set()
    out = []
    for name in names:
        candidate = name
        stem, dot, ext = name.rpartition(".")
        if not dot or not stem:
            stem, ext = name, ""
        counter = 2
        while candidate.lower() in seen:
            candidate = f"{stem} ({counter})" + (f".{ext}" if ext else "")
            counter += 1
        seen.add(candidate.lower())
        out.append(candidate)
    return out


# --------------------------------------------------------------------------- sniffing


@dataclass(frozen=True)
class Sniffed:
    kind: str  # image | audio | video | binary
    mime: str


def sniff(head: bytes, *, filename: str) -> Sniffed:
    """What the content is (its first bytes); the name only to catch a mismatch.

    Raises MediaRejected when the name's extension promises a type the content is not
    (a ZIP named ``photo.png``, an executable named ``report.pdf``)."""
    found = identify(head)
    guessed = (mimetypes.guess_type(filename)[0] or "").lower()
    if found is not None and found.accepts:
        if found.pillow_format:
            kind = "image"
        elif found.mime.startswith(("audio/", "video/")):
            kind = found.mime.split("/", 1)[0]
        else:
            kind = "binary"
        mime = guessed if guessed in found.accepts else found.mime
        sniffed = Sniffed(kind=kind, mime=mime)
    else:
        label = describe_content(head)
        if label == "text":
            mime = guessed if guessed.startswith("text/") or guessed in _TEXT_LIKE else "text/plain"
        else:
            mime = "application/octet-stream"
        sniffed = Sniffed(kind="binary", mime=mime)
    promised = guessed.split("/", 1)[0] if guessed else ""
    claimed = _claimed_signature(guessed)
    if claimed and (found is None or guessed not in found.accepts):
        raise MediaRejected(
            f"The file's content ({describe_content(head)}) does not match its name "
            f"({filename}), so it was not attached."
        )
    if promised in ("image", "audio", "video") and sniffed.kind != promised:
        # A type Atrium cannot check (HEIC, SVG, Photoshop…): kept as a download only.
        return Sniffed(kind="binary", mime="application/octet-stream")
    return sniffed


_TEXT_LIKE = ("application/json", "application/xml", "application/x-yaml")


def _claimed_signature(guessed: str) -> bool:
    """The name's type is one whose content Atrium can check (PNG, PDF, ZIP…)."""
    return bool(guessed) and verifiable(guessed)


# --------------------------------------------------------------------------- upload


@dataclass(frozen=True)
class UploadTicket:
    thread_id: int
    user_id: int
    filename: str
    size: int  # the declared size; the body may not exceed it
    key: str  # the staging key the body is written to
    view_id: int | None = None  # an app view's upload (its tool call): origin app_upload

    def sign(self) -> str:
        return signing.dumps(
            {
                "t": self.thread_id,
                "u": self.user_id,
                "n": self.filename,
                "s": self.size,
                "k": self.key,
                "v": self.view_id,
            },
            salt=UPLOAD_SALT,
            compress=True,
        )

    @classmethod
    def open(cls, token: str) -> UploadTicket:
        """The ticket of a token; raises AttachmentRefused if forged or expired."""
        try:
            data = signing.loads(token, salt=UPLOAD_SALT, max_age=TICKET_MAX_AGE)
        except signing.SignatureExpired:
            raise AttachmentRefused(
                "upload_expired", "The upload took too long to start; try again.", status=403
            ) from None
        except signing.BadSignature:
            raise AttachmentRefused(
                "upload_forbidden", "This upload link is not valid.", status=403
            ) from None
        return cls(
            thread_id=int(data["t"]),
            user_id=int(data["u"]),
            filename=str(data["n"]),
            size=int(data["s"]),
            key=str(data["k"]),
            view_id=int(data["v"]) if data.get("v") is not None else None,
        )


def _refuse(
    *, thread: Thread | None, workspace_id: int | None, actor_id: int | None, code: str, msg: str
) -> AttachmentRefused:
    """Audit a refusal (its own transaction) and return the exception to raise."""
    with transaction.atomic():
        record(
            event_type=AuditEventType.ATTACHMENT_REFUSED,
            decision=Decision.DENIED,
            actor_kind="user" if actor_id else "system",
            actor_user_id=actor_id,
            workspace_id=workspace_id,
            thread_id=thread.pk if thread else None,
            action="attach_file",
            reason=msg[:300],
            extra={"code": code},
        )
    status = 413 if code in ("too_large", "workspace_full") else 403 if code == "forbidden" else 400
    return AttachmentRefused(code, msg, status=status)


def attachment_begin(
    *, thread: Thread, actor: Any, filename: str, size: int, app_view_id: int | None = None
) -> dict[str, Any]:
    """Check one file the member is about to send; a ticket for its body, or refused.
    ``app_view_id``: an app view uploads it (chat.media.view_files), for ``actor``."""
    ticket, note = attachment_ticket(
        thread=thread, actor=actor, filename=filename, size=size, app_view_id=app_view_id
    )
    token = ticket.sign()
    return {
        "uploadUrl": reverse("media-upload-body", kwargs={"token": token}),
        "filename": ticket.filename,
        "note": note,
        "maxBytes": size,
    }


def attachment_ticket(
    *, thread: Thread, actor: Any, filename: str, size: int, app_view_id: int | None = None
) -> tuple[UploadTicket, str | None]:
    """The checks of :func:`attachment_begin` (role, name, limits; refusals audited): the
    ticket of one file's body and the note on its name, or AttachmentRefused."""
    membership = Membership.objects.filter(workspace_id=thread.workspace_id, user=actor).first()
    refuse = functools.partial(
        _refuse, thread=thread, workspace_id=thread.workspace_id, actor_id=actor.pk
    )
    if membership is None or not membership.can_act:
        raise refuse(code="forbidden", msg="Viewers can read this thread but not attach files.")
    name, note = clean_filename(filename)
    limits = limits_for(workspace_id=thread.workspace_id)
    if size <= 0:
        raise refuse(code="empty_file", msg=f"“{name}” is empty (0 bytes), so it was not attached.")
    if size > limits.max_file_bytes:
        raise refuse(
            code="too_large",
            msg=f"“{name}” ({human_size(size)}) is larger than this workspace's "
            f"{human_size(limits.max_file_bytes)} limit per file.",
        )
    used = workspace_attached_bytes(workspace_id=thread.workspace_id)
    if used + size > limits.max_total_bytes:
        raise refuse(
            code="workspace_full",
            msg=f"“{name}” ({human_size(size)}) does not fit: this workspace's files use "
            f"{human_size(used)} of {human_size(limits.max_total_bytes)}.",
        )
    ticket = UploadTicket(
        thread_id=thread.pk,
        user_id=actor.pk,
        filename=name,
        size=size,
        key=uuid.uuid4().hex,
        view_id=app_view_id,
    )
    return ticket, note


def attachment_receive(*, ticket: UploadTicket, path: Path, size: int, head: bytes) -> MediaAsset:
    """Record a body that reached staging whole (``path``, ``size`` bytes): sniff, check
    the header of images against the bomb limits, re-check the workspace total under a
    lock, create the ``staged`` asset, audit, and enqueue the worker on commit.

    Raises AttachmentRefused (audited; the staging file removed)."""
    thread = Thread.objects.filter(pk=ticket.thread_id).first()
    workspace_id = thread.workspace_id if thread else None
    refuse = functools.partial(
        _refuse, thread=thread, workspace_id=workspace_id, actor_id=ticket.user_id
    )
    try:
        if thread is None:
            raise refuse(code="forbidden", msg="This thread no longer exists.")
        membership = Membership.objects.filter(
            workspace_id=thread.workspace_id, user_id=ticket.user_id
        ).first()
        if membership is None or not membership.can_act:
            raise refuse(code="forbidden", msg="Viewers can read this thread but not attach files.")
        if size == 0:
            raise refuse(
                code="empty_file",
                msg=f"“{ticket.filename}” is empty (0 bytes), so it was not attached.",
            )
        if size != ticket.size:
            raise refuse(
                code="incomplete",
                msg=f"“{ticket.filename}” arrived incomplete ({human_size(size)} of "
                f"{human_size(ticket.size)}); nothing was stored. Try again.",
            )
        try:
            sniffed = sniff(head[:HEAD_BYTES], filename=ticket.filename)
            found = identify(head[:HEAD_BYTES])
            if sniffed.kind == "image" and found is not None and found.pillow_format:
                check_image_header(path, found.pillow_format)
        except MediaRejected as exc:
            raise refuse(code="rejected", msg=exc.reason) from None
        with transaction.atomic():
            locked = Workspace.objects.select_for_update().filter(pk=thread.workspace_id)
            list(locked.values_list("pk"))  # attachments of one workspace count one by one
            limits = limits_for(workspace_id=thread.workspace_id)
            used = workspace_attached_bytes(workspace_id=thread.workspace_id)
            if used + size > limits.max_total_bytes:
                raise AttachmentRefused(
                    "workspace_full",
                    f"“{ticket.filename}” does not fit: this workspace's files use "
                    f"{human_size(used)} of {human_size(limits.max_total_bytes)}.",
                    status=413,
                )
            asset = MediaAsset.objects.create(
                thread=thread,
                origin=MediaOrigin.APP_UPLOAD if ticket.view_id else MediaOrigin.ATTACHMENT,
                app_view_id=ticket.view_id,
                uploaded_by_id=ticket.user_id,
                kind=sniffed.kind,
                mime_type=sniffed.mime,
                filename=ticket.filename,
                size=size,
                staging_path=ticket.key,
            )
            record(
                event_type=AuditEventType.ATTACHMENT_UPLOADED,
                decision=Decision.ALLOWED,
                actor_kind="user",
                actor_user_id=ticket.user_id,
                workspace_id=thread.workspace_id,
                thread_id=thread.pk,
                action="attach_file",
                extra={
                    "asset_id": asset.pk,
                    "filename": asset.filename,
                    "kind": asset.kind,
                    "mime": asset.mime_type,
                    "size": size,
                    "app_view": ticket.view_id,
                },
            )
            transaction.on_commit(functools.partial(_enqueue_persist, asset.pk))
        return asset
    except AttachmentRefused as exc:
        if exc.code == "workspace_full":
            _refuse(
                thread=thread,
                workspace_id=workspace_id,
                actor_id=ticket.user_id,
                code=exc.code,
                msg=exc.message,
            )
        storage.remove_staging_file(path)
        raise


def attachment_refuse_body(*, ticket: UploadTicket, code: str, message: str) -> AttachmentRefused:
    """An upload whose body was refused or cut off on the way in (audited)."""
    thread = Thread.objects.filter(pk=ticket.thread_id).first()
    return _refuse(
        thread=thread,
        workspace_id=thread.workspace_id if thread else None,
        actor_id=ticket.user_id,
        code=code,
        msg=message,
    )


def _enqueue_persist(asset_id: int) -> None:
    # By name: chat.media.tasks imports this module (the retention sweep).
    current_app.send_task(PERSIST_TASK, args=[asset_id])


def attachment_status(*, asset_id: int, user: Any) -> dict[str, Any] | None:
    """The uploader's view of one of their files (for the composer), or None."""
    asset = MediaAsset.objects.filter(
        pk=asset_id, origin=MediaOrigin.ATTACHMENT, uploaded_by=user
    ).first()
    return attachment_part(asset) if asset else None


# --------------------------------------------------------------------------- messages


def attachments_claim(*, message: Message, actor: Any, ids: Iterable[Any]) -> list[MediaAsset]:
    """Inside ``message_post``'s transaction: give the member's unclaimed files of this
    thread to the message, in the order given; duplicate names get " (2)"."""
    wanted: list[int] = []
    for raw in ids:
        if not isinstance(raw, int) or isinstance(raw, bool) or raw in wanted:
            raise AttachmentRefused("invalid_attachments", "The attached files are not valid.")
        wanted.append(raw)
    if not wanted:
        return []
    if len(wanted) > MAX_FILES_PER_MESSAGE:
        raise AttachmentRefused(
            "too_many_files", f"A message can carry at most {MAX_FILES_PER_MESSAGE} files."
        )
    rows = {
        a.pk: a
        for a in MediaAsset.objects.select_for_update().filter(
            pk__in=wanted,
            thread_id=message.thread_id,
            origin=MediaOrigin.ATTACHMENT,
            uploaded_by=actor,
            message__isnull=True,
        )
    }
    missing = [pk for pk in wanted if pk not in rows]
    if missing:
        raise AttachmentRefused(
            "attachment_gone",
            "One of the files is no longer available (already sent, or removed); attach it again.",
        )
    rejected = [rows[pk] for pk in wanted if rows[pk].status == MediaStatus.REJECTED]
    if rejected:
        raise AttachmentRefused(
            "attachment_rejected",
            f"“{rejected[0].filename}” could not be stored: {rejected[0].reason}",
        )
    assets = [rows[pk] for pk in wanted]
    for asset, name in zip(assets, dedupe_names([a.filename for a in assets]), strict=True):
        asset.message = message
        asset.filename = name
        asset.save(update_fields=["message", "filename"])
    return assets


# --------------------------------------------------------------------------- deletion


def _delete_assets(
    assets: Sequence[MediaAsset], *, event_type: AuditEventType, actor: Any, reason: str
) -> int:
    """Delete rows (audited, one event each) and, on commit, their stored files that no
    other asset shares (content-addressed) and their staging files."""
    if not assets:
        return 0
    paths: set[str] = set()
    staging: list[Path] = []
    for asset in assets:
        record(
            event_type=event_type,
            decision=Decision.ALLOWED,
            actor_kind="user" if actor else "system",
            actor_user_id=getattr(actor, "pk", None),
            actor_label="" if actor else "retention",
            workspace_id=asset.thread.workspace_id,
            thread_id=asset.thread_id,
            action="delete_file",
            reason=reason,
            extra={
                "asset_id": asset.pk,
                "filename": asset.filename,
                "size": asset.size,
                "sha256": asset.sha256,
                "message_id": asset.message_id,
            },
        )
        paths.update(
            p
            for p in (asset.storage_path, asset.thumbnail_path, asset.poster_path, asset.text_path)
            if p
        )
        found = storage.staging_file(asset.staging_path)
        if found is not None:
            staging.append(found)
    ids = [a.pk for a in assets]
    MediaAsset.objects.filter(pk__in=ids).delete()
    transaction.on_commit(functools.partial(_remove_unshared, sorted(paths), staging))
    return len(ids)


def _remove_unshared(paths: list[str], staging: list[Path]) -> None:
    shared: set[str] = set()
    for field in ("storage_path", "thumbnail_path", "poster_path", "text_path"):
        shared.update(
            MediaAsset.objects.filter(**{f"{field}__in": paths}).values_list(field, flat=True)
        )
    for name in paths:
        if name not in shared:
            with contextlib.suppress(OSError):
                default_storage.delete(name)
    for path in staging:
        storage.remove_staging_file(path)


def attachments_delete_for_message(*, message_id: int, actor: Any = None) -> int:
    """A message is being deleted: its files go with it (audited)."""
    assets = list(
        MediaAsset.objects.select_related("thread").filter(
            message_id=message_id, origin__in=THREAD_FILE_ORIGINS
        )
    )
    return _delete_assets(
        assets,
        event_type=AuditEventType.ATTACHMENT_DELETED,
        actor=actor,
        reason="message deleted",
    )


def attachment_delete(*, asset: MediaAsset, actor: Any, reason: str = "deleted") -> int:
    """One file deleted (by an admin, or its uploader before sending)."""
    with transaction.atomic():
        return _delete_assets(
            [asset], event_type=AuditEventType.ATTACHMENT_DELETED, actor=actor, reason=reason
        )


UNCLAIMED_AFTER = timedelta(days=1)  # an upload never sent with a message


def attachments_expire(*, now: Any = None) -> int:
    """The retention sweep: files older than their workspace's retention, and uploads
    never sent with a message after a day. Idempotent; returns how many went."""
    now = now or timezone.now()
    # (An app view's upload is never sent with a message: only the retention applies.)
    conditions = Q(
        origin=MediaOrigin.ATTACHMENT,
        message__isnull=True,
        created_at__lt=now - UNCLAIMED_AFTER,
    )
    default_days = int(settings.ATRIUM_ATTACH_RETENTION_DAYS)
    own = dict(WorkspaceFileSettings.objects.values_list("workspace_id", "retention_days"))
    for workspace_id, days in own.items():
        if days:
            conditions |= Q(
                thread__workspace_id=workspace_id, created_at__lt=now - timedelta(days=days)
            )
    if default_days:
        conditions |= Q(
            ~Q(thread__workspace_id__in=list(own)),
            created_at__lt=now - timedelta(days=default_days),
        )
    removed = 0
    while True:
        with transaction.atomic():
            batch = list(
                MediaAsset.objects.select_related("thread")
                .filter(conditions, origin__in=THREAD_FILE_ORIGINS)
                .order_by("id")[:200]
            )
            if not batch:
                return removed
            message_ids = {a.message_id for a in batch if a.message_id}
            removed += _delete_assets(
                batch,
                event_type=AuditEventType.ATTACHMENT_EXPIRED,
                actor=None,
                reason="retention",
            )
            if message_ids:
                for message_id in sorted(message_ids):
                    emit_message_of(message_id)


# --------------------------------------------------------------------------- links


def file_link_token(*, asset_id: int, max_age: int = LINK_MAX_AGE) -> str:
    """A signed token for one file that expires ``max_age`` seconds from now."""
    return signing.dumps({"a": int(asset_id), "e": int(time.time()) + int(max_age)}, salt=LINK_SALT)


def asset_id_for_link(token: str, *, now: float | None = None) -> int | None:
    """The file a link token names while it is valid; None when forged or expired."""
    try:
        data = signing.loads(token, salt=LINK_SALT)
    except signing.BadSignature:
        return None
    if not isinstance(data, dict) or int(data.get("e", 0)) < (now or time.time()):
        return None
    return int(data["a"])


def file_link_mint(
    *, asset: MediaAsset, actor: Any = None, purpose: str, max_age: int = LINK_MAX_AGE
) -> str:
    """An absolute URL through Atrium that serves this one ready file, without a session,
    for ``max_age`` seconds (for an MCP server's ``resource_link`` or an app view's
    ``getFileDownloadUrl``). Audited, so every link handed out can be traced."""
    if asset.status != MediaStatus.READY:
        raise AttachmentRefused("not_ready", "The file is not stored yet.")
    token = file_link_token(asset_id=asset.pk, max_age=max_age)
    with transaction.atomic():
        record(
            event_type=AuditEventType.ATTACHMENT_LINK_ISSUED,
            decision=Decision.ALLOWED,
            actor_kind="user" if actor else "system",
            actor_user_id=getattr(actor, "pk", None),
            workspace_id=asset.thread.workspace_id,
            thread_id=asset.thread_id,
            action="file_link",
            reason=purpose[:300],
            extra={"asset_id": asset.pk, "max_age": max_age},
        )
    path = reverse("media-file-link", kwargs={"asset_id": asset.pk, "token": token})
    return settings.ATRIUM_APP_ORIGIN + path
