"""App views and the thread's files (issue 26 part 4; docs/files.md "App views and files").

Through the real path: a thread socket (the real ASGI application), the fixture Apps SDK
server tests/fixtures/mcp_servers/view_files.py over stdio, the members' upload endpoint
(``PUT /media/uploads/body/<ticket>/``), the worker's own persisting service and the
single-file link. Plus the table's rows and the policy's rule for the four kinds.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from audit.models import AuditEvent
from audit.types import AuditEventType
from bindings.policy import ActionKind
from chat.actions.view_methods import VIEW_FILE_LINKS, VIEW_FILES, view_method
from chat.media.attachments import file_settings_set
from chat.media.models import MediaAsset, MediaOrigin, MediaStatus
from chat.media.services import media_asset_persist
from chat.media.view_files import file_id_for
from chat.models import Message
from chat.presenters import serialize_message
from tests import factories
from tests.conftest import next_frame, open_socket, reply_frame, toolcall_event

ROOT = Path(__file__).resolve().parents[2]
SERVER_PY = ROOT / "tests" / "fixtures" / "mcp_servers" / "view_files.py"
REPORT = "id,title,status\n1,Fix login,open\n"

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


# ------------------------------------------------------------------------ the table


def test_the_four_file_methods_are_rows_with_their_kind_and_bucket():
    rows = {
        "openai/uploadFile": (ActionKind.VIEW_FILE_UPLOAD, VIEW_FILES),
        "openai/getFileDownloadUrl": (ActionKind.VIEW_FILE_LINK, VIEW_FILE_LINKS),
        "openai/selectFiles": (ActionKind.VIEW_FILES_SELECT, VIEW_FILES),
        "ui/download-file": (ActionKind.VIEW_FILE_SAVE, VIEW_FILES),
    }
    for name, (kind, bucket) in rows.items():
        row = view_method(name, "request")
        assert row is not None and row.side == "server", name
        assert row.kind_for({"_compat": "openai"}) is kind
        assert row.bucket is bucket
    assert [k.audit_event_type.value for k in (r[0] for r in rows.values())] == [
        470,
        471,
        472,
        473,
    ]


# ------------------------------------------------------------------------ the path


@pytest.fixture
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


@pytest.fixture
def files_server(personas):
    server = factories.McpServerFactory(
        name="Files app", slug="files", command=sys.executable, args=[str(SERVER_PY)]
    )
    binding = factories.AppBindingFactory(server=server, workspace=personas.workspace)
    return server, binding


async def _open_view(ws_connect, personas, user) -> tuple[Any, str, int]:
    """The owner runs the widget's tool; ``user`` opens its view: (socket, token, call)."""
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "/call files.show_files"})
    done = await next_frame(owner, toolcall_event("success", "show_files"))
    call_id = done["data"]["id"]
    sock = owner if user == personas.owner else await open_socket(ws_connect, user, personas.thread)
    await sock.send_json_to({"type": "view.open", "toolCallId": call_id, "rid": "open"})
    opened = await reply_frame(sock, "open")
    assert opened["ok"], opened
    return sock, opened["result"]["token"], call_id


async def _ask(sock, token: str, method: str, params: dict, rid: str) -> dict:
    await sock.send_json_to(
        {"type": "view.request", "rid": rid, "token": token, "method": method, "params": params}
    )
    return await reply_frame(sock, rid)


def _events(event_type: AuditEventType) -> list[tuple[str, str, dict]]:
    rows = AuditEvent.objects.filter(event_type=event_type).order_by("id")
    return [(r.decision, r.reason, r.extra) for r in rows]


def _put(url: str, body: bytes) -> dict:
    response = Client().generic("PUT", url, body, content_type="application/octet-stream")
    return response.json()


def _persist(asset_id: int) -> str:
    return media_asset_persist(asset_id=asset_id)


def _get(url: str, user: Any = None) -> Any:
    client = Client()
    if user is not None:
        client.force_login(user)
    path = "/" + url.split("//", 1)[1].split("/", 1)[1] if "//" in url else url
    response = client.get(path)
    assert response.status_code == 200, response.status_code
    return response


async def _body(url: str, user: Any = None) -> bytes:
    response = await database_sync_to_async(_get)(url, user)
    return b"".join([chunk async for chunk in response.streaming_content])


@pytest.mark.usefixtures("close_connections")
async def test_upload_then_link_returns_the_same_bytes(personas, files_server, ws_connect):
    sock, token, call_id = await _open_view(ws_connect, personas, personas.member)
    body = b"Notes from the widget: 42\n"
    begin = await _ask(
        sock, token, "openai/uploadFile", {"filename": "notes.txt", "size": len(body)}, "b"
    )
    assert begin["ok"], begin
    stored = await database_sync_to_async(_put)(begin["result"]["uploadUrl"], body)
    assert stored["ok"], stored
    asset_id = stored["attachment"]["asset"]["id"]
    named = await _ask(sock, token, "openai/uploadFile", {"assetId": asset_id}, "n")
    assert named["ok"], named
    file_id = named["result"]["fileId"]
    assert named["result"]["fileName"] == "notes.txt"

    asset = await database_sync_to_async(MediaAsset.objects.get)(pk=asset_id)
    assert (asset.origin, asset.app_view_id, asset.uploaded_by_id) == (
        MediaOrigin.APP_UPLOAD,
        call_id,
        personas.member.pk,
    )
    # Not stored by the worker yet: "not_ready" (the shim asks again), not a refusal.
    early = await _ask(sock, token, "openai/getFileDownloadUrl", {"fileId": file_id}, "e")
    assert early["error"]["code"] == "not_ready"
    assert await database_sync_to_async(_persist)(asset_id) == "ready"
    link = await _ask(sock, token, "openai/getFileDownloadUrl", {"fileId": file_id}, "l")
    assert link["ok"], link
    assert "/link/" in link["result"]["downloadUrl"]
    assert await _body(link["result"]["downloadUrl"]) == body

    uploaded = await database_sync_to_async(_events)(AuditEventType.VIEW_FILE_UPLOADED)
    assert [(d, e.get("step")) for d, _r, e in uploaded] == [
        ("allowed", "begin"),
        ("allowed", "stored"),
    ]
    linked = await database_sync_to_async(_events)(AuditEventType.VIEW_FILE_LINK_ISSUED)
    # Decided each time (the early one too: the policy first, then whether it is stored).
    assert [(d, e.get("asset")) for d, _r, e in linked] == [("allowed", asset_id)] * 2
    assert await database_sync_to_async(_events)(AuditEventType.ATTACHMENT_LINK_ISSUED)
    # A forged, altered or foreign id names nothing (refused, audited).
    forged = await _ask(sock, token, "openai/getFileDownloadUrl", {"fileId": file_id + "x"}, "f")
    assert forged["error"]["code"] == "file_not_found"
    await sock.disconnect()


@pytest.mark.usefixtures("close_connections")
async def test_a_viewers_view_is_refused_and_nothing_is_stored(personas, files_server, ws_connect):
    sock, token, _call = await _open_view(ws_connect, personas, personas.viewer)
    upload = await _ask(sock, token, "openai/uploadFile", {"filename": "a.txt", "size": 3}, "u")
    assert upload["error"]["code"] == "viewer_cannot_act"
    contents = [{"type": "resource", "resource": {"uri": "file:///report.csv", "text": REPORT}}]
    save = await _ask(sock, token, "ui/download-file", {"contents": contents}, "s")
    assert save["error"]["code"] == "viewer_cannot_act"
    select = await _ask(sock, token, "openai/selectFiles", {}, "c")
    assert select["error"]["code"] == "viewer_cannot_act"
    assert not await database_sync_to_async(MediaAsset.objects.exists)()
    for event_type in (
        AuditEventType.VIEW_FILE_UPLOADED,
        AuditEventType.VIEW_FILE_SAVED,
        AuditEventType.VIEW_FILES_SELECTED,
    ):
        rows = await database_sync_to_async(_events)(event_type)
        assert [(d, r) for d, r, _e in rows] == [("denied", "viewer_cannot_act")], event_type
    await sock.disconnect()


def _messages(thread_id: int, viewer: Any) -> list[dict]:
    return [serialize_message(m) for m in Message.objects.filter(thread_id=thread_id)]


@pytest.mark.usefixtures("close_connections")
async def test_download_file_saves_a_file_of_the_thread(personas, files_server, ws_connect):
    sock, token, call_id = await _open_view(ws_connect, personas, personas.owner)
    contents = [
        {
            "type": "resource",
            "resource": {
                "uri": "file:///exports/report.csv",
                "mimeType": "text/csv",
                "text": REPORT,
            },
        }
    ]
    saved = await _ask(sock, token, "ui/download-file", {"contents": contents}, "s")
    assert saved["ok"], saved
    event = await next_frame(
        sock, lambda f: f.get("kind") == "message" and f["data"].get("viaToolCall") == call_id
    )
    message = event["data"]
    assert message["text"] == "Files app saved report.csv"
    assert [(p["filename"], p["asset"]["status"]) for p in message["attachments"]] == [
        ("report.csv", "staged")
    ]
    asset_id = message["attachments"][0]["asset"]["id"]
    assert await database_sync_to_async(_persist)(asset_id) == "ready"

    # A resource link is read from the view's own server.
    link = [{"type": "resource_link", "uri": "file:///exports/summary.txt", "name": "summary.txt"}]
    again = await _ask(sock, token, "ui/download-file", {"contents": link}, "l")
    assert again["ok"], again

    # Every member, after a reload, gets the same line and the same chip (a download link).
    rows = await database_sync_to_async(_messages)(personas.thread.pk, personas.member)
    lines = [
        (m["text"], [p["filename"] for p in m["attachments"]]) for m in rows if m["viaToolCall"]
    ]
    assert lines == [
        ("Files app saved report.csv", ["report.csv"]),
        ("Files app saved summary.txt", ["summary.txt"]),
    ]
    chip = next(m for m in rows if m["viaToolCall"])["attachments"][0]
    assert chip["mimeType"] == "text/csv"
    assert chip["asset"]["downloadUrl"].endswith("?download=1")
    assert (await _body(chip["asset"]["downloadUrl"], personas.member)).decode() == REPORT
    saved_rows = await database_sync_to_async(_events)(AuditEventType.VIEW_FILE_SAVED)
    assert [(d, e["files"]) for d, _r, e in saved_rows] == [
        ("allowed", ["report.csv"]),
        ("allowed", ["summary.txt"]),
    ]
    await sock.disconnect()


@pytest.mark.usefixtures("close_connections")
async def test_bad_input_and_limits_are_refused_and_audited(personas, files_server, ws_connect):
    await database_sync_to_async(file_settings_set)(
        workspace=personas.workspace,
        actor=personas.owner,
        max_file_bytes=10,
        max_total_bytes=10_000,
        retention_days=0,
    )
    sock, token, _call = await _open_view(ws_connect, personas, personas.member)
    big = await _ask(sock, token, "openai/uploadFile", {"filename": "big.txt", "size": 11}, "b")
    assert big["error"]["code"] == "too_large"
    blob = [{"type": "resource", "resource": {"uri": "file:///x.bin", "blob": "%%%not base64"}}]
    bad = await _ask(sock, token, "ui/download-file", {"contents": blob}, "x")
    assert bad["error"]["code"] == "invalid_params"
    large = base64.b64encode(b"x" * 11).decode()
    over = [{"type": "resource", "resource": {"uri": "file:///x.bin", "blob": large}}]
    too_big = await _ask(sock, token, "ui/download-file", {"contents": over}, "o")
    assert too_big["error"]["code"] == "too_large"
    # A file whose content is not what its name says: the members' sniffing refuses it.
    fake = [{"type": "resource", "resource": {"uri": "file:///a.png", "text": "hi"}}]
    sniffed = await _ask(sock, token, "ui/download-file", {"contents": fake}, "p")
    assert sniffed["error"]["code"] == "rejected"
    refused = await database_sync_to_async(_events)(AuditEventType.ATTACHMENT_REFUSED)
    assert {e["code"] for _d, _r, e in refused} == {"too_large", "rejected"}
    saved = await database_sync_to_async(_events)(AuditEventType.VIEW_FILE_SAVED)
    assert ("denied", "invalid_params") in [(d, r) for d, r, _e in saved]
    assert not await database_sync_to_async(
        Message.objects.filter(via_tool_call__isnull=False).exists
    )()
    await sock.disconnect()


def _attached(personas, name: str, *, sent: bool) -> MediaAsset:
    message = (
        Message.objects.create(thread=personas.thread, role="user", author=personas.owner, text="x")
        if sent
        else None
    )
    return MediaAsset.objects.create(
        thread=personas.thread,
        origin=MediaOrigin.ATTACHMENT,
        uploaded_by=personas.owner,
        message=message,
        kind="binary",
        mime_type="text/plain",
        filename=name,
        size=5,
        status=MediaStatus.READY,
    )


@pytest.mark.usefixtures("close_connections")
async def test_select_files_gives_the_view_only_what_its_person_chose(
    personas, files_server, ws_connect
):
    sent = await database_sync_to_async(_attached)(personas, "plan.txt", sent=True)
    other = await database_sync_to_async(_attached)(personas, "budget.txt", sent=True)
    unsent = await database_sync_to_async(_attached)(personas, "draft.txt", sent=False)
    sock, token, call_id = await _open_view(ws_connect, personas, personas.member)
    offer = await _ask(sock, token, "openai/selectFiles", {"multiple": False}, "o")
    assert offer["ok"], offer
    offered = {p["asset"]["id"] for p in offer["result"]["files"]}
    assert offered == {sent.pk, other.pk}  # someone's unsent upload is not the thread's yet
    await sock.send_json_to(
        {"type": "view.files_choose", "rid": "c", "token": token, "assetIds": [sent.pk]}
    )
    chosen = await reply_frame(sock, "c")
    assert chosen["ok"], chosen
    files = chosen["result"]["files"]
    assert [f["fileName"] for f in files] == ["plan.txt"]
    link = await _ask(sock, token, "openai/getFileDownloadUrl", {"fileId": files[0]["fileId"]}, "l")
    assert link["ok"], link
    await sock.send_json_to(
        {"type": "view.files_choose", "rid": "u", "token": token, "assetIds": [unsent.pk]}
    )
    assert (await reply_frame(sock, "u"))["error"]["code"] == "file_not_found"
    rows = await database_sync_to_async(_events)(AuditEventType.VIEW_FILES_SELECTED)
    assert [(d, e.get("step"), e.get("names")) for d, _r, e in rows[:2]] == [
        ("allowed", "asked", None),
        ("allowed", "chosen", ["plan.txt"]),
    ]
    # A fileId minted for another app is no good to this one.
    foreign_call = await database_sync_to_async(factories.ToolCallFactory)(thread=personas.thread)
    foreign = file_id_for(asset=other, view=foreign_call)
    denied = await _ask(sock, token, "openai/getFileDownloadUrl", {"fileId": foreign}, "x")
    assert denied["error"]["code"] == "file_not_found"
    await sock.disconnect()
