"""The body of a member's upload, streamed to staging (issue 26; docs/files.md).

Django's ASGI handler reads a request's whole body (into a spooled temporary file) before
any view runs, so it could neither refuse an oversized body before reading it nor avoid
writing every byte twice. :class:`UploadBodyApp` sits in front of Django (config/asgi.py)
and answers ``PUT /media/uploads/body/<ticket>/`` itself:

- the ticket (``chat.media.attachments.UploadTicket``, minted by ``attachment_begin``
  after the session, CSRF, role and limit checks) names one file, its thread, its
  uploader and its declared size; forged or expired: 403;
- a ``Content-Length`` above the ticket's size: 413 at once, no byte read;
- the body is written to ``MEDIA_STAGING_ROOT/<key>`` chunk by chunk as it arrives
  (memory: one chunk plus the server's flow-control window);
  a body that grows past the ticket's size is stopped there (413), and one cut off
  half-way (the client went away) leaves nothing behind; both are audited;
- the whole body is handed to ``attachment_receive`` (sniff, checks, the ``staged`` row).

``upload_body`` (a Django view at the same URL) does the same for a server without this
wrapper (the test client, WSGI). With ``ATRIUM_BENCH_ENDPOINTS=1`` the wrapper also
answers ``/media/uploads/_sink/`` (a plain upload: each chunk written to a file as it arrives,
kept until the next one) and ``/media/uploads/_sink/discard/`` (the body read and thrown away): the
floors of ``python -m bench.run --only upload``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from ..sandbox_hosts import is_sandbox_host
from .attachments import (
    AttachmentRefused,
    UploadTicket,
    attachment_receive,
    attachment_refuse_body,
)
from .formats import HEAD_BYTES
from .presenters import attachment_part
from .staging import staging_root
from .storage import remove_staging_file

log = logging.getLogger(__name__)

READ_BYTES = 2 * 1024 * 1024  # `upload_body`'s reads of a body Django has already spooled
BODY_PATH_RE = re.compile(r"^/media/uploads/body/([A-Za-z0-9_:.\-]+)/$")
SINK_PATHS = ("/media/uploads/_sink/", "/media/uploads/_sink/discard/")

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def _too_large(ticket: UploadTicket) -> str:
    return (
        f"“{ticket.filename}” is larger than it said it was ({ticket.size:,} bytes); "
        "the upload was stopped and nothing was stored."
    )


CUT_OFF = "The upload of “{name}” was cut off half-way; nothing was stored. Try again."


class StagingWriter:
    """One upload's staging file: exclusive create, written as it arrives, the first bytes
    kept."""

    def __init__(self, ticket: UploadTicket) -> None:
        self.ticket = ticket
        self.path: Path = staging_root() / ticket.key
        self.size = 0
        self.head = b""
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    def account(self, chunk: bytes) -> bool:
        """Count a chunk; False once the body is larger than the ticket allows."""
        if len(self.head) < HEAD_BYTES:
            self.head = (self.head + chunk[: HEAD_BYTES - len(self.head)])[:HEAD_BYTES]
        self.size += len(chunk)
        return self.size <= self.ticket.size

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def finish(self) -> dict[str, Any]:
        """The whole body is here: record it (may refuse).

        Not fsynced: a background fsync of the last upload fought the next one's writes
        for the disk (x0.64 of a plain upload, x0.9 without; bench/README.md "upload"). The
        kernel writes the file back within its dirty expiry (30 s by default), and the stored
        copy the worker makes is no more synced than that; a power loss before then leaves
        a short file, which the worker rejects by its size with a reason to the member."""
        self.close()
        asset = attachment_receive(
            ticket=self.ticket, path=self.path, size=self.size, head=self.head
        )
        return {"ok": True, "attachment": attachment_part(asset)}

    def discard(self) -> None:
        self.close()
        remove_staging_file(self.path)


def _error(exc: AttachmentRefused) -> tuple[int, dict[str, Any]]:
    return exc.status, {"ok": False, "error": exc.to_dict()}


def _declared_length(headers: Iterator[tuple[bytes, bytes]]) -> int | None:
    for key, value in headers:
        if key.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _open_writer(ticket: UploadTicket) -> StagingWriter:
    try:
        return StagingWriter(ticket)
    except FileExistsError:
        raise AttachmentRefused(
            "upload_used", "This upload link was already used.", status=409
        ) from None


class UploadBodyApp:
    """ASGI: upload bodies (and the bench sink) here, everything else to ``app``."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope.get("type") == "http" and scope.get("method") in ("PUT", "POST"):
            path = scope.get("path", "")
            host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin1")
            match = BODY_PATH_RE.match(path)
            if match and not is_sandbox_host(host):
                await self._upload(scope, receive, send, match.group(1))
                return
            if path in SINK_PATHS and settings.ATRIUM_BENCH_ENDPOINTS:
                await self._sink(receive, send, store=path == SINK_PATHS[0])
                return
        await self.app(scope, receive, send)

    async def _upload(
        self, scope: dict[str, Any], receive: Receive, send: Send, token: str
    ) -> None:
        try:
            ticket = UploadTicket.open(token)
        except AttachmentRefused as exc:
            await _respond(send, *_error(exc))
            return
        declared = _declared_length(iter(scope.get("headers") or []))
        if declared is not None and declared > ticket.size:
            refused = await sync_to_async(attachment_refuse_body)(
                ticket=ticket, code="too_large", message=_too_large(ticket)
            )
            await _respond(send, *_error(refused))  # not one byte of the body was read
            return
        try:
            writer = await asyncio.to_thread(_open_writer, ticket)
        except AttachmentRefused as exc:
            await _respond(send, *_error(exc))
            return
        # Each chunk is written as it arrives, on the event loop, as Django's own ASGI
        # handler writes a body into its spooled file and as the plain upload (the floor)
        # does: one socket read's worth into the page cache, tens of microseconds. 2 MiB
        # batches written by a thread while the next arrived measured x0.68-0.77 of a plain
        # upload on session 16's machine, these writes x0.93-1.04 (bench/README.md).
        try:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    await asyncio.to_thread(writer.discard)
                    await sync_to_async(attachment_refuse_body)(
                        ticket=ticket,
                        code="incomplete",
                        message=CUT_OFF.format(name=ticket.filename),
                    )
                    return  # nobody to answer
                chunk = message.get("body", b"")
                if chunk:
                    if not writer.account(chunk):
                        await asyncio.to_thread(writer.discard)
                        refused = await sync_to_async(attachment_refuse_body)(
                            ticket=ticket, code="too_large", message=_too_large(ticket)
                        )
                        await _respond(send, *_error(refused), close=True)
                        return
                    writer.write(chunk)
                if not message.get("more_body", False):
                    break
            result = await sync_to_async(writer.finish)()
        except AttachmentRefused as exc:  # finish() removed the file
            await _respond(send, *_error(exc))
            return
        except BaseException:
            await asyncio.to_thread(writer.discard)
            raise
        await _respond(send, 201, result)

    async def _sink(self, receive: Receive, send: Send, *, store: bool) -> None:
        """The benchmark's floor: a plain upload (each chunk written to a file as it
        comes; the file is kept until the next one, as an upload's would be), or with
        ``store=False`` the body thrown away."""
        size = 0
        path = staging_root() / f"bench-sink-{os.getpid()}"
        if store:
            path.unlink(missing_ok=True)  # the previous one
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600) if store else -1
        try:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                chunk = message.get("body", b"")
                size += len(chunk)
                if store and chunk:
                    os.write(fd, chunk)
                if not message.get("more_body", False):
                    break
        finally:
            if store:
                os.close(fd)
        await _respond(send, 200, {"ok": True, "size": size})


async def _respond(send: Send, status: int, body: dict[str, Any], close: bool = False) -> None:
    data = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
        (b"cache-control", b"no-store"),
        (b"x-content-type-options", b"nosniff"),
    ]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


@csrf_exempt  # the ticket is the credential (minted after the CSRF-checked begin view)
@require_http_methods(["PUT", "POST"])
def upload_body(request: HttpRequest, token: str) -> JsonResponse:
    """The same as :class:`UploadBodyApp`, for servers without it (test client, WSGI)."""
    try:
        ticket = UploadTicket.open(token)
        declared = int(request.headers.get("Content-Length") or 0)
        if declared > ticket.size:
            raise attachment_refuse_body(
                ticket=ticket, code="too_large", message=_too_large(ticket)
            )
        writer = _open_writer(ticket)
        try:
            while chunk := request.read(READ_BYTES):
                if not writer.account(chunk):
                    raise attachment_refuse_body(
                        ticket=ticket, code="too_large", message=_too_large(ticket)
                    )
                writer.write(chunk)
        except BaseException:
            writer.discard()
            raise
        return JsonResponse(writer.finish(), status=201)
    except AttachmentRefused as exc:
        status, body = _error(exc)
        return JsonResponse(body, status=status)
