"""Files members attach (issue 26): the upload path (the begin view, the streaming ASGI body
endpoint, its Django stand-in), the worker's pipeline for them (thumbnails, PDF text),
limits, bad input, messages, deletion, retention, single-file links, the admin and audit."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.files.storage import default_storage
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditEvent
from audit.types import AuditEventType
from chat import services
from chat.media import attachments
from chat.media.attachments import (
    AttachmentRefused,
    asset_id_for_link,
    clean_filename,
    dedupe_names,
    file_link_mint,
    file_link_token,
    file_settings_set,
)
from chat.media.models import MediaAsset, MediaOrigin, MediaStatus
from chat.media.services import media_asset_persist
from chat.media.uploads import UploadBodyApp
from chat.models import Message
from chat.presenters import serialize_message
from tests import factories
from tests.chat import attachment_samples as samples

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def media_settings(settings, tmp_path: Path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.MEDIA_STAGING_ROOT = str(tmp_path / "staging")
    return settings


def staging_files(settings) -> list[str]:
    root = Path(settings.MEDIA_STAGING_ROOT)
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def body(response: Any) -> bytes:
    """A streamed media response's bytes (its content is an async iterator)."""

    async def read() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return asyncio.run(read())


def audits(event_type: AuditEventType) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(event_type=int(event_type)).order_by("id"))


def client_for(user) -> Client:
    """A session with CSRF checks on, and its CSRF cookie (the thread page sets it)."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    for membership in user.memberships.select_related("workspace"):
        thread = membership.workspace.threads.first()
        if thread is not None:
            client.get(f"/w/{membership.workspace.slug}/t/{thread.pk}/")
            break
    else:
        client.get("/login/")
    return client


def begin(client: Client, thread, name: str, size: int) -> Any:
    token = client.cookies["csrftoken"].value if "csrftoken" in client.cookies else ""
    return client.post(
        reverse("media-upload-begin", kwargs={"thread_id": thread.pk}),
        data=json.dumps({"filename": name, "size": size}),
        content_type="application/json",
        headers={"X-CSRFToken": token},
    )


def upload(client: Client, thread, name: str, data: bytes) -> Any:
    """Begin + body through the Django stand-in; the JSON answer of the last step."""
    started = begin(client, thread, name, len(data))
    if started.status_code != 200:
        return started
    return client.put(
        started.json()["uploadUrl"], data=data, content_type="application/octet-stream"
    )


def attach(client: Client, thread, name: str, data: bytes) -> MediaAsset:
    answer = upload(client, thread, name, data)
    assert answer.status_code == 201, answer.content
    return MediaAsset.objects.get(pk=answer.json()["attachment"]["asset"]["id"])


# ------------------------------------------------------------------------- the happy path


def test_an_image_and_a_pdf_are_staged_then_stored_with_thumbnails(personas, settings):
    client = client_for(personas.member)
    image = attach(client, personas.thread, "diagram.png", samples.png())
    pdf = attach(
        client, personas.thread, "report.pdf", samples.pdf_with_text("Quarterly report", "Up 12")
    )
    assert (image.kind, image.mime_type, image.status) == ("image", "image/png", "staged")
    assert (pdf.kind, pdf.mime_type, pdf.origin) == ("binary", "application/pdf", "attachment")
    assert image.uploaded_by == personas.member and image.message is None
    assert len(staging_files(settings)) == 2
    assert [e.extra["filename"] for e in audits(AuditEventType.ATTACHMENT_UPLOADED)] == [
        "diagram.png",
        "report.pdf",
    ]

    assert media_asset_persist(asset_id=image.pk) == "ready"  # what the worker runs
    assert media_asset_persist(asset_id=pdf.pk) == "ready"
    image.refresh_from_db()
    pdf.refresh_from_db()
    assert (image.width, image.height) == (640, 400) and image.thumbnail_path
    assert pdf.thumbnail_path and pdf.pages == 1  # page 1 rendered by PDFium
    with default_storage.open(pdf.text_path) as handle:
        assert "Quarterly report" in handle.read().decode()
    assert staging_files(settings) == []  # staging emptied once stored

    message = services.message_post(
        thread=personas.thread,
        author=personas.member,
        text="Here are the numbers",
        attachment_ids=[image.pk, pdf.pk],
    )
    payload = serialize_message(Message.objects.get(pk=message.pk))
    names = [(p["filename"], p["type"], p["asset"]["status"]) for p in payload["attachments"]]
    assert names == [("diagram.png", "image", "ready"), ("report.pdf", "file", "ready")]
    served = client.get(payload["attachments"][1]["asset"]["downloadUrl"])
    assert served.status_code == 200 and served["Content-Type"] == "application/pdf"
    assert served["Content-Disposition"].startswith("attachment;")
    thumb = client.get(payload["attachments"][1]["asset"]["thumbnailUrl"])
    assert thumb.status_code == 200
    assert "report.pdf" in payload["attachments"][1]["text"]  # a text client's fallback
    ranged = client.get(payload["attachments"][0]["asset"]["url"], headers={"Range": "bytes=0-7"})
    assert ranged.status_code == 206 and body(ranged) == b"\x89PNG\r\n\x1a\n"


def test_a_message_may_carry_files_without_text_and_duplicate_names_are_renamed(personas):
    client = client_for(personas.member)
    first = attach(client, personas.thread, "notes.txt", b"alpha\n")
    second = attach(client, personas.thread, "Notes.txt", b"beta\n")
    message = services.message_post(
        thread=personas.thread,
        author=personas.member,
        text="",
        attachment_ids=[first.pk, second.pk],
    )
    assert sorted(message.attachments.values_list("filename", flat=True)) == [
        "Notes (2).txt",
        "notes.txt",
    ]
    assert dedupe_names(["a.png", "a.png", "A.png", "b"]) == [
        "a.png",
        "a (2).png",
        "A (3).png",
        "b",
    ]


def test_files_are_claimed_only_by_their_uploader_once(personas):
    mine = attach(client_for(personas.member), personas.thread, "a.txt", b"text")
    with pytest.raises(services.ChatError) as refused:
        services.message_post(
            thread=personas.thread, author=personas.owner, text="hi", attachment_ids=[mine.pk]
        )
    assert refused.value.code == "attachment_gone"
    assert not Message.objects.filter(text="hi").exists()  # nothing half-stored
    services.message_post(
        thread=personas.thread, author=personas.member, text="x", attachment_ids=[mine.pk]
    )
    with pytest.raises(services.ChatError):
        services.message_post(
            thread=personas.thread, author=personas.member, text="y", attachment_ids=[mine.pk]
        )


# --------------------------------------------------------------------------- refusals


def test_a_viewer_and_an_outsider_cannot_attach(personas):
    answer = begin(client_for(personas.viewer), personas.thread, "a.png", 100)
    assert answer.status_code == 403
    assert "Viewers" in answer.json()["error"]["message"]
    assert begin(client_for(personas.outsider), personas.thread, "a.png", 100).status_code == 404
    assert [e.extra["code"] for e in audits(AuditEventType.ATTACHMENT_REFUSED)] == ["forbidden"]
    assert not MediaAsset.objects.exists()


def test_zero_bytes_and_limits_are_refused_before_any_byte_is_sent(personas, settings):
    client = client_for(personas.member)
    empty = begin(client, personas.thread, "empty.txt", 0)
    assert empty.status_code == 400 and "empty" in empty.json()["error"]["message"]
    file_settings_set(
        workspace=personas.workspace,
        actor=personas.owner,
        max_file_bytes=1000,
        max_total_bytes=1500,
        retention_days=0,
    )
    big = begin(client, personas.thread, "big.bin", 1001)
    assert big.status_code == 413 and "1000 B limit per file" in big.json()["error"]["message"]
    attach(client, personas.thread, "a.txt", b"x" * 900)
    full = begin(client, personas.thread, "b.txt", 700)
    assert full.status_code == 413 and "does not fit" in full.json()["error"]["message"]
    codes = [e.extra["code"] for e in audits(AuditEventType.ATTACHMENT_REFUSED)]
    assert codes == ["empty_file", "too_large", "workspace_full"]
    assert len(audits(AuditEventType.ATTACHMENT_LIMITS_CHANGED)) == 1


@pytest.mark.parametrize(
    ("name", "data", "words"),
    [
        ("photo.png", samples.ZIP, "content (ZIP archive) does not match its name (photo.png)"),
        ("report.pdf", samples.ELF, "content (Linux executable) does not match its name"),
        ("song.mp3", b"just some text\n", "content (text) does not match its name (song.mp3)"),
        ("huge.png", samples.png_bomb(), "larger than 50 megapixels"),
    ],
)
def test_type_mismatches_and_image_bombs_are_refused_with_a_reason(
    personas, settings, name, data, words
):
    answer = upload(client_for(personas.member), personas.thread, name, data)
    assert answer.status_code == 400
    assert words in answer.json()["error"]["message"]
    assert not MediaAsset.objects.exists() and staging_files(settings) == []


def test_types_atrium_cannot_check_are_kept_as_downloads(personas):
    client = client_for(personas.member)
    heic = attach(
        client, personas.thread, "IMG_0001.heic", b"\x00\x00\x00\x18ftypheic" + b"\0" * 64
    )
    svg = attach(client, personas.thread, "logo.svg", b"<svg xmlns='http://www.w3.org/2000/svg'/>")
    notes = attach(client, personas.thread, "notes.md", b"# Plan\n")
    assert (heic.kind, heic.mime_type) == ("binary", "application/octet-stream")
    assert (svg.kind, svg.mime_type) == ("binary", "application/octet-stream")
    assert (notes.kind, notes.mime_type) == ("binary", "text/markdown")


def test_a_pdf_bomb_is_rejected_by_the_worker_with_a_reason(personas, settings):
    asset = attach(client_for(personas.member), personas.thread, "bomb.pdf", samples.pdf_bomb())
    assert media_asset_persist(asset_id=asset.pk) == "rejected"
    asset.refresh_from_db()
    assert "decompression bomb" in asset.reason and not asset.storage_path
    assert staging_files(settings) == []


def test_names_lose_path_separators_control_and_bidi_characters():
    assert clean_filename("../../etc/passwd") == (
        "_.._etc_passwd",
        "Saved as “_.._etc_passwd”: path separators were replaced.",
    )
    name, note = clean_filename("invoice\u202efdp.exe")
    assert name == "invoicefdp.exe" and "text-direction" in (note or "")
    assert clean_filename("a\x00b\x1f.txt")[0] == "ab.txt"
    assert clean_filename("report.pdf") == ("report.pdf", None)
    assert clean_filename("\u202e")[0] == "file"


def test_the_cleaned_name_is_what_is_stored(personas):
    # A JSON "\\ud800" decodes to a lone surrogate, which neither database stores.
    name = "a/b\u202e\ud800\x00.txt"
    asset = attach(client_for(personas.member), personas.thread, name, b"hello")
    assert asset.filename == "a_b.txt"


# --------------------------------------------------------------- the streaming endpoint


class Wire:
    """An ASGI client for UploadBodyApp: scripted body messages, the answer recorded."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.messages = list(messages)
        self.read = 0
        self.sent: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        self.read += 1
        if not self.messages:
            raise AssertionError("the app read past the end of the body")
        return self.messages.pop(0)

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int | None:
        starts = [m for m in self.sent if m["type"] == "http.response.start"]
        return starts[0]["status"] if starts else None

    @property
    def body(self) -> dict[str, Any]:
        return json.loads(b"".join(m.get("body", b"") for m in self.sent if "body" in m))


async def never_called(scope, receive, send):  # the wrapped Django app
    raise AssertionError("the upload was passed on to Django")


def put_scope(url: str, length: int | None) -> dict[str, Any]:
    headers = [(b"host", b"localhost:8000")]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    return {"type": "http", "method": "PUT", "path": url, "headers": headers}


async def ticket_url(personas, name: str, size: int) -> str:
    answer = await sync_to_async(attachments.attachment_begin)(
        thread=personas.thread, actor=personas.member, filename=name, size=size
    )
    return answer["uploadUrl"]


async def test_the_body_streams_to_staging_in_chunks(personas, settings):
    data = samples.png()
    url = await ticket_url(personas, "pic.png", len(data))
    chunks = [data[i : i + 4096] for i in range(0, len(data), 4096)]
    wire = Wire(
        [
            {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
            for i, c in enumerate(chunks)
        ]
    )
    await UploadBodyApp(never_called)(put_scope(url, len(data)), wire.receive, wire.send)
    assert wire.status == 201, wire.body
    asset = await MediaAsset.objects.aget(pk=wire.body["attachment"]["asset"]["id"])
    assert (asset.size, asset.kind, asset.status) == (len(data), "image", "staged")
    assert (Path(settings.MEDIA_STAGING_ROOT) / asset.staging_path).read_bytes() == data

    replay = Wire([{"type": "http.request", "body": data, "more_body": False}])
    await UploadBodyApp(never_called)(put_scope(url, len(data)), replay.receive, replay.send)
    assert replay.status == 409  # a ticket is good for one body


async def test_a_declared_length_over_the_ticket_is_refused_before_reading(personas, settings):
    url = await ticket_url(personas, "a.bin", 10)
    wire = Wire([])
    await UploadBodyApp(never_called)(put_scope(url, 11), wire.receive, wire.send)
    assert wire.status == 413 and wire.read == 0
    assert "larger than it said" in wire.body["error"]["message"]


async def test_a_body_growing_past_its_ticket_is_stopped_mid_stream(personas, settings):
    url = await ticket_url(personas, "a.bin", 10)
    wire = Wire(
        [
            {"type": "http.request", "body": b"x" * 8, "more_body": True},
            {"type": "http.request", "body": b"x" * 8, "more_body": True},
            {"type": "http.request", "body": b"x" * 8, "more_body": False},
        ]
    )
    await UploadBodyApp(never_called)(put_scope(url, None), wire.receive, wire.send)
    assert wire.status == 413 and wire.read == 2  # stopped at the chunk that overflowed
    assert staging_files(settings) == [] and not await MediaAsset.objects.aexists()


async def test_an_upload_cut_off_half_way_leaves_nothing(personas, settings):
    url = await ticket_url(personas, "a.bin", 100)
    wire = Wire(
        [
            {"type": "http.request", "body": b"x" * 40, "more_body": True},
            {"type": "http.disconnect"},
        ]
    )
    await UploadBodyApp(never_called)(put_scope(url, 100), wire.receive, wire.send)
    assert wire.sent == []  # nobody left to answer
    assert staging_files(settings) == [] and not await MediaAsset.objects.aexists()
    refused = await sync_to_async(audits)(AuditEventType.ATTACHMENT_REFUSED)
    assert [e.extra["code"] for e in refused] == ["incomplete"]


async def test_a_short_body_is_refused_as_incomplete(personas, settings):
    url = await ticket_url(personas, "a.txt", 100)
    wire = Wire([{"type": "http.request", "body": b"x" * 40, "more_body": False}])
    await UploadBodyApp(never_called)(put_scope(url, None), wire.receive, wire.send)
    assert wire.status == 400 and "arrived incomplete" in wire.body["error"]["message"]
    assert staging_files(settings) == []


async def test_forged_tickets_and_sandbox_hosts_get_nothing(personas):
    wire = Wire([])
    await UploadBodyApp(never_called)(
        put_scope("/media/uploads/body/forged/", 5), wire.receive, wire.send
    )
    assert wire.status == 403

    passed: list[str] = []

    async def django(scope, receive, send):
        passed.append(scope["path"])

    url = await ticket_url(personas, "a.txt", 5)
    scope = put_scope(url, 5)
    scope["headers"] = [(b"host", b"board.sandbox.localhost:8000")]
    await UploadBodyApp(django)(scope, Wire([]).receive, Wire([]).send)
    assert passed == [url]  # not handled as an upload on a sandbox host


# ------------------------------------------------- the worker down, deletion, retention


def test_with_no_worker_a_file_waits_staged_and_the_message_says_so(personas, settings):
    asset = attach(client_for(personas.member), personas.thread, "a.txt", b"hello")
    message = services.message_post(
        thread=personas.thread, author=personas.member, text="x", attachment_ids=[asset.pk]
    )
    payload = serialize_message(Message.objects.get(pk=message.pk))
    assert payload["attachments"][0]["asset"]["status"] == "staged"
    assert payload["attachments"][0]["asset"]["url"] is None
    assert media_asset_persist(asset_id=asset.pk) == "ready"  # the worker comes back
    assert Message.objects.get(pk=message.pk).attachments.get().status == "ready"


def test_deleting_a_message_deletes_its_files(personas, settings):
    client = client_for(personas.member)
    asset = attach(client, personas.thread, "a.png", samples.png())
    media_asset_persist(asset_id=asset.pk)
    asset.refresh_from_db()
    stored = [asset.storage_path, asset.thumbnail_path]
    message = services.message_post(
        thread=personas.thread, author=personas.member, text="x", attachment_ids=[asset.pk]
    )
    Message.objects.get(pk=message.pk).delete()
    assert not MediaAsset.objects.filter(pk=asset.pk).exists()
    assert not any(default_storage.exists(name) for name in stored)
    deleted = audits(AuditEventType.ATTACHMENT_DELETED)
    assert [(e.extra["asset_id"], e.reason) for e in deleted] == [(asset.pk, "message deleted")]


def test_content_shared_with_another_file_is_kept(personas):
    client = client_for(personas.member)
    data = samples.png()
    first, second = attach(client, personas.thread, "a.png", data), None
    media_asset_persist(asset_id=first.pk)
    second = attach(client, personas.thread, "b.png", data)
    media_asset_persist(asset_id=second.pk)
    first.refresh_from_db()
    attachments.attachment_delete(asset=first, actor=personas.owner)
    assert default_storage.exists(first.storage_path)  # b.png still uses it


def test_the_retention_sweep_deletes_expired_and_unsent_files(personas, settings):
    client = client_for(personas.member)
    old, fresh, unsent = (attach(client, personas.thread, f"{n}.txt", b"x") for n in "abc")
    message = services.message_post(
        thread=personas.thread, author=personas.member, text="x", attachment_ids=[old.pk, fresh.pk]
    )
    file_settings_set(
        workspace=personas.workspace,
        actor=personas.owner,
        max_file_bytes=10**6,
        max_total_bytes=10**7,
        retention_days=30,
    )
    now = timezone.now()
    MediaAsset.objects.filter(pk=old.pk).update(created_at=now - timedelta(days=31))
    MediaAsset.objects.filter(pk=unsent.pk).update(created_at=now - timedelta(days=2))
    assert attachments.attachments_expire() == 2
    assert list(MediaAsset.objects.values_list("pk", flat=True)) == [fresh.pk]
    expired = audits(AuditEventType.ATTACHMENT_EXPIRED)
    assert sorted(e.extra["asset_id"] for e in expired) == sorted([old.pk, unsent.pk])
    assert all(e.actor_label == "retention" for e in expired)
    assert [p["filename"] for p in serialize_message(message)["attachments"]] == ["b.txt"]
    assert attachments.attachments_expire() == 0  # idempotent


def test_the_beat_schedule_runs_the_sweep(settings):
    from chat.media.tasks import expire_attachments

    entries = [e["task"] for e in settings.CELERY_BEAT_SCHEDULE.values()]
    assert "chat.tasks.expire_attachments" in entries
    assert expire_attachments.name == "chat.tasks.expire_attachments"


# ------------------------------------------------------------------ single-file links


def test_a_file_link_serves_one_file_without_a_session_until_it_expires(personas):
    asset = attach(client_for(personas.member), personas.thread, "a.txt", b"hello link")
    with pytest.raises(AttachmentRefused):
        file_link_mint(asset=asset, purpose="tool")  # not stored yet
    media_asset_persist(asset_id=asset.pk)
    asset.refresh_from_db()
    url = file_link_mint(asset=asset, actor=personas.member, purpose="tool argument", max_age=60)
    assert url.startswith(personas.thread and "http://")
    path = url.split("://", 1)[1].split("/", 1)[1]
    anonymous = Client()
    answer = anonymous.get("/" + path)
    assert answer.status_code == 200 and body(answer) == b"hello link"
    assert answer["Cache-Control"] == "private, no-store"
    token = path.rstrip("/").rsplit("/", 1)[1]
    assert asset_id_for_link(token) == asset.pk
    assert asset_id_for_link(token, now=time.time() + 61) is None  # expired
    other = anonymous.get(f"/media/{asset.pk + 1}/link/{token}/")
    assert other.status_code == 404  # the token names one file
    stale = file_link_token(asset_id=asset.pk, max_age=-1)
    assert anonymous.get(f"/media/{asset.pk}/link/{stale}/").status_code == 404
    assert anonymous.get(f"/media/{asset.pk}/link/forged/").status_code == 404
    issued = audits(AuditEventType.ATTACHMENT_LINK_ISSUED)
    assert [(e.extra["asset_id"], e.reason) for e in issued] == [(asset.pk, "tool argument")]


# ----------------------------------------------------------------------------- admin


def test_the_admin_lists_files_per_workspace_and_deletes_them_audited(personas):
    from tests.conftest import make_user

    asset = attach(
        client_for(personas.member), personas.thread, "plan.pdf", samples.pdf_with_text("x")
    )
    services.message_post(
        thread=personas.thread, author=personas.member, text="x", attachment_ids=[asset.pk]
    )
    admin = make_user("root", staff=True)
    admin.is_superuser = True
    admin.save()
    client = Client()
    client.force_login(admin)
    page = client.get("/admin/chat/attachedfile/")
    assert page.status_code == 200
    html = page.content.decode()
    for expected in ("plan.pdf", "Acme", "marco", "application/pdf", "Launch plan"):
        assert expected in html
    answer = client.post(
        "/admin/chat/attachedfile/",
        {"action": "delete_files", "_selected_action": [asset.pk]},
    )
    assert answer.status_code == 302
    assert not MediaAsset.objects.filter(origin=MediaOrigin.ATTACHMENT).exists()
    assert audits(AuditEventType.ATTACHMENT_DELETED)[0].actor_user_id == admin.pk


def test_audit_labels_exist():
    for number in range(703, 709):
        assert AuditEventType(number).label


def test_media_status_of_tool_results_is_unchanged(personas):
    assert MediaStatus.READY == "ready" and MediaOrigin.TOOL_RESULT == "tool_result"


def test_a_message_with_server_resources_keeps_its_files_too(personas):
    """Files and a server resource on one message: both are the message's (none is left
    for the retention sweep to delete as never sent)."""
    from chat.server_context.content import ResourceCopy
    from chat.server_context.services import message_resources_post

    client = client_for(personas.member)
    file = attach(client, personas.thread, "notes.txt", b"alpha\n")
    server = factories.McpServerFactory()
    message = message_resources_post(
        thread=personas.thread,
        author=personas.member,
        text="Both",
        attachments=[(server, ResourceCopy(uri="file:///a.txt", name="a.txt", text="a"), False)],
        attachment_ids=[file.pk],
    )
    assert list(message.attachments.values_list("filename", flat=True)) == ["notes.txt"]
    assert message.server_resources.count() == 1
