"""Serving persisted media: members of the asset's thread only, streamed, range-capable.

- Session auth; anyone who is not a member of the thread's workspace (anonymous users
  included) gets a 404, as does an asset that is not ``ready``.
- ``Content-Type`` is the verified type (opaque binaries: ``application/octet-stream``),
  with ``X-Content-Type-Options: nosniff``, a sandboxing CSP, and ``Content-Disposition``
  ``inline`` for images/audio/video, ``attachment`` (RFC 6266 / 5987 ``filename*``) for
  other files.
- Single byte ranges (``Range: bytes=a-b``, ``a-``, ``-n``) get 206 + ``Content-Range``;
  an unsatisfiable range gets 416; ``If-Range`` and ``If-None-Match`` (ETag = sha256) are
  honoured. Several ranges in one request are answered with the whole file (allowed by
  RFC 9110).
- Content is immutable per asset (content-addressed): ``Cache-Control: private,
  max-age=31536000, immutable``.
- The body is an *async* iterator of 256 KiB reads. (Django's ``FileResponse`` iterates
  synchronously, and under ASGI Django consumes synchronous streaming content with
  ``sync_to_async(list)`` — the whole file in memory. This never does.)
- Behind nginx (``ATRIUM_MEDIA_ACCEL_REDIRECT`` set, docs/fleet.md) the view decides
  access, 304 and 416 and answers every other request with ``X-Accel-Redirect``: nginx
  sends the file and applies the same range rules (one range, ``If-Range`` against this
  ETag), and copies this response's headers: no web process is busy for the length of
  a download.
- Without nginx, the web server (uvicorn, config/serve.py) pauses the iterator while the
  client's socket buffer is full: a slow reader costs a buffer, not the file.

"""

from __future__ import annotations

import json
import mimetypes
import re
import unicodedata
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import quote

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.files.storage import default_storage
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.http import require_POST, require_safe

from ..selectors import membership_for, thread_with_membership
from .attachments import AttachmentRefused, asset_id_for_link, attachment_begin
from .formats import served_type
from .models import MediaAsset, MediaStatus

CHUNK_SIZE = 256 * 1024
CACHE_CONTROL = "private, max-age=31536000, immutable"
# Opened directly, a media URL renders as a bare image or player: nothing may run there.
MEDIA_CSP = (
    "default-src 'none'; img-src 'self'; media-src 'self'; style-src 'unsafe-inline'; sandbox"
)
INLINE_KINDS = ("image", "audio", "video")
_RANGE_RE = re.compile(r"^bytes=([0-9]*)-([0-9]*)$")  # ASCII digits only
_UNSAFE_FILENAME_RE = re.compile(r'[\x00-\x1f\x7f-\x9f/\\:*?"<>|;]+')
_EXTENSIONS = {
    "image/webp": ".webp",
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/mpeg": ".mp3",
    "video/x-msvideo": ".avi",
    "video/mp4": ".mp4",
    "video/webm": ".webm",
    "application/octet-stream": ".bin",
}


@dataclass(frozen=True)
class Variant:
    """What one URL serves of an asset."""

    field: str  # the MediaAsset field holding the storage name
    suffix: str  # distinguishes the ETag of derivatives


ORIGINAL = Variant("storage_path", "")
THUMBNAIL = Variant("thumbnail_path", "-thumbnail")
POSTER = Variant("poster_path", "-poster")


@require_safe
def media_asset(request: HttpRequest, asset_id: int) -> HttpResponseBase:
    return _serve(request, asset_id, ORIGINAL)


@require_safe
def media_thumbnail(request: HttpRequest, asset_id: int) -> HttpResponseBase:
    return _serve(request, asset_id, THUMBNAIL)


@require_safe
def media_poster(request: HttpRequest, asset_id: int) -> HttpResponseBase:
    return _serve(request, asset_id, POSTER)


def _asset_for_member(request: HttpRequest, asset_id: int) -> MediaAsset:
    """The ready asset, if the session's user belongs to its thread's workspace."""
    if not request.user.is_authenticated:
        raise Http404("No such media.")
    asset = (
        MediaAsset.objects.select_related("thread")
        .filter(pk=asset_id, status=MediaStatus.READY)
        .first()
    )
    if (
        asset is None
        or membership_for(user=request.user, workspace_id=asset.thread.workspace_id) is None
    ):
        raise Http404("No such media.")
    return asset


def _serve(
    request: HttpRequest, asset_id: int, variant: Variant, asset: MediaAsset | None = None
) -> HttpResponseBase:
    if asset is None:
        asset = _asset_for_member(request, asset_id)
    name = getattr(asset, variant.field)
    if not name:
        raise Http404("No such media.")
    try:
        size = default_storage.size(name)
    except OSError:
        raise Http404("No such media.") from None
    if variant is ORIGINAL:
        content_type = served_type(kind=asset.kind, declared=asset.mime_type)
        disposition = _disposition(asset, content_type)
        if request.GET.get("download") == "1":  # "Download" on an attached image or video
            disposition = disposition.replace("inline;", "attachment;", 1)
    else:
        content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
        disposition = "inline"
    etag = f'"{asset.sha256}{variant.suffix}"'
    headers = {
        "Content-Type": content_type,
        "Content-Disposition": disposition,
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": MEDIA_CSP,
        "Cross-Origin-Resource-Policy": "same-origin",
        "Cache-Control": CACHE_CONTROL,
        "ETag": etag,
        "Accept-Ranges": "bytes",
        "Vary": "Cookie",
    }
    if etag in _etags(request.headers.get("If-None-Match", "")):
        return _bodiless(304, headers)

    start, end = 0, size - 1
    status = 200
    wanted = _range_header(request, etag)
    if wanted is not None:
        byte_range = parse_range(wanted, size)
        if byte_range == "unsatisfiable":
            return _bodiless(416, {**headers, "Content-Range": f"bytes */{size}"}, length=0)
        if byte_range is not None:
            start, end = byte_range
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
    length = end - start + 1 if size else 0
    if settings.ATRIUM_MEDIA_ACCEL_REDIRECT:
        return _accel_redirect(name, headers)
    if request.method == "HEAD":
        return _bodiless(status, headers, length=length)
    response = StreamingHttpResponse(
        _read_range(name, start, length), status=status, content_type=content_type
    )
    for key, value in headers.items():
        response[key] = value
    response["Content-Length"] = str(length)
    return response


def _accel_redirect(name: str, headers: dict[str, str]) -> HttpResponse:
    """An empty answer that has nginx send the stored file: nginx keeps Content-Type,
    Content-Disposition and Cache-Control, copies the other headers (deploy/nginx), and
    adds Content-Length, Accept-Ranges and, for a range, the 206 and Content-Range."""
    response = HttpResponse(content_type=headers["Content-Type"])
    for key, value in headers.items():
        if key not in ("Accept-Ranges", "Content-Range"):  # nginx's own
            response[key] = value
    response["X-Accel-Redirect"] = settings.ATRIUM_MEDIA_ACCEL_REDIRECT + quote(name)
    return response


def _range_header(request: HttpRequest, etag: str) -> str | None:
    wanted = request.headers.get("Range")
    if not wanted:
        return None
    if_range = request.headers.get("If-Range")
    if if_range and if_range.strip() != etag:
        return None  # the client's copy is another representation: send it all
    return wanted


MAX_RANGE_HEADER = 200
MAX_RANGE_DIGITS = 19  # bytes: 10**19 is more than any file


def parse_range(header: str, size: int) -> tuple[int, int] | str | None:
    """One ``bytes=`` range → (first, last) inclusive; ``"unsatisfiable"``; or None to
    ignore the header (malformed, or several ranges)."""
    if len(header) > MAX_RANGE_HEADER:
        return None  # no real client sends this; never parse thousands of digits
    match = _RANGE_RE.match(header.strip().replace(" ", ""))
    if match is None:
        return None
    first, last = match.groups()
    if len(first) > MAX_RANGE_DIGITS or len(last) > MAX_RANGE_DIGITS:
        return None  # beyond any file size (and past int()'s digit limit): ignored
    if first == "" and last == "":
        return None
    if first == "":
        suffix = int(last)
        if suffix == 0 or size == 0:
            return "unsatisfiable"
        return max(0, size - suffix), size - 1
    start = int(first)
    end = int(last) if last else size - 1
    if last and end < start:
        return None
    if start >= size:
        return "unsatisfiable"
    return start, min(end, size - 1)


async def _read_range(name: str, start: int, length: int) -> AsyncIterator[bytes]:
    handle = await sync_to_async(default_storage.open, thread_sensitive=False)(name, "rb")
    try:
        if start:
            await sync_to_async(handle.seek, thread_sensitive=False)(start)
        remaining = length
        while remaining > 0:
            chunk = await sync_to_async(handle.read, thread_sensitive=False)(
                min(CHUNK_SIZE, remaining)
            )
            if not chunk:
                break
            remaining -= len(chunk)
            yield chunk
    finally:
        await sync_to_async(handle.close, thread_sensitive=False)()


def _bodiless(status: int, headers: dict[str, str], length: int | None = None) -> HttpResponse:
    response = HttpResponse(status=status, content_type=headers["Content-Type"])
    for key, value in headers.items():
        response[key] = value
    if length is not None:
        response["Content-Length"] = str(length)
    return response


def _etags(header: str) -> set[str]:
    return {tag.strip().removeprefix("W/") for tag in header.split(",") if tag.strip()}


def safe_filename(raw: str, fallback: str) -> str:
    """A file name without paths, control or shell-special characters (may be non-ASCII)."""
    name = unicodedata.normalize("NFC", raw or "").replace("\\", "/").rsplit("/", 1)[-1]
    name = _UNSAFE_FILENAME_RE.sub("_", name).strip(" ._")[:120]
    return name or fallback


def content_disposition(kind: str, filename: str) -> str:
    """``inline``/``attachment`` with an ASCII ``filename`` and an RFC 5987 ``filename*``."""
    ascii_name = unicodedata.normalize("NFKD", filename).encode("ascii", "ignore").decode("ascii")
    ascii_name = re.sub(r"[^A-Za-z0-9._ ()+-]", "_", ascii_name).strip()
    stem, dot, extension = ascii_name.rpartition(".")
    if not (stem if dot else ascii_name).strip("._ "):
        ascii_name = "download" + (f".{extension}" if dot and extension else "")
    value = f'{kind}; filename="{ascii_name}"'
    if ascii_name != filename:
        value += f"; filename*=UTF-8''{quote(filename, safe='')}"
    return value


def _disposition(asset: MediaAsset, content_type: str) -> str:
    extension = _EXTENSIONS.get(content_type) or mimetypes.guess_extension(content_type) or ""
    filename = safe_filename(asset.filename, f"{asset.kind}-{asset.pk}{extension}")
    kind = "inline" if asset.kind in INLINE_KINDS else "attachment"
    return content_disposition(kind, filename)


# ------------------------------------------------------------------ files members attach


@require_POST
def upload_begin(request: HttpRequest, thread_id: int) -> JsonResponse:
    """``{filename, size}`` → a ticket URL for the body (``chat.media.uploads``), or the
    reason the file is refused — before any of its bytes are sent."""
    found = (
        thread_with_membership(user=request.user, thread_id=thread_id)
        if request.user.is_authenticated
        else None
    )
    if found is None:
        return JsonResponse(
            {"ok": False, "error": {"code": "not_found", "message": "No such thread."}},
            status=404,
        )
    thread, _membership = found
    try:
        body = json.loads(request.body or b"{}")
        filename, size = body.get("filename"), body.get("size")
        if not isinstance(filename, str) or not isinstance(size, int) or isinstance(size, bool):
            raise ValueError
    except (ValueError, AttributeError):
        return JsonResponse(
            {"ok": False, "error": {"code": "invalid", "message": "Send a file name and size."}},
            status=400,
        )
    try:
        ticket = attachment_begin(thread=thread, actor=request.user, filename=filename, size=size)
    except AttachmentRefused as exc:
        return JsonResponse({"ok": False, "error": exc.to_dict()}, status=exc.status)
    return JsonResponse({"ok": True, **ticket})


@require_safe
def media_file_link(request: HttpRequest, asset_id: int, token: str) -> HttpResponseBase:
    """One file through a short-lived link (``attachments.file_link_mint``): no session;
    the token names this file and has not expired."""
    if asset_id_for_link(token) != asset_id:
        raise Http404("No such media.")
    asset = (
        MediaAsset.objects.select_related("thread")
        .filter(pk=asset_id, status=MediaStatus.READY)
        .first()
    )
    if asset is None:
        raise Http404("No such media.")
    response = _serve(request, asset_id, ORIGINAL, asset=asset)
    response["Cache-Control"] = "private, no-store"
    response["Referrer-Policy"] = "no-referrer"
    # The link is the credential (no cookie is read): an app view on its sandbox origin
    # may fetch it when its CSP allows this origin (docs/files.md "App views and files").
    response["Access-Control-Allow-Origin"] = "*"
    response["Cross-Origin-Resource-Policy"] = "cross-origin"
    return response
