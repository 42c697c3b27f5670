"""Files passed to tools (issue 26 part 3): which schemas take a file (pure), and the real
path — a member's `/call` through the websocket, the `examples/files` server over stdio
fetching Atrium's single-file link from a live server, embedded files, refusals, audit."""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

import httpx
import pytest
from channels.db import database_sync_to_async
from django.conf import settings

from audit.models import AuditEvent
from audit.types import AuditEventType
from chat import services
from chat.media.attachments import asset_id_for_link
from chat.media.models import MediaAsset
from chat.media.services import media_asset_persist
from chat.media.tool_files import file_url, tool_files_hand_over
from chat.media.tool_inputs import (
    EMBED_MAX_BYTES,
    FileInfo,
    FileShape,
    atrium_file_id,
    choose_shape,
    file_fields,
    server_value,
    stored_value,
)
from chat.models import ToolCall
from tests import factories
from tests.chat.test_attachments import attach, client_for
from tests.conftest import ROOT_DIR, next_frame, reply_frame, toolcall_event

EXAMPLE = str(ROOT_DIR / "examples" / "files" / "server.py")
BODY = b"first line\nsecond line\nthird line\n"
LINK = {
    "type": "object",
    "properties": {
        "type": {"const": "resource_link", "type": "string"},
        "uri": {"type": "string"},
        "name": {"type": "string"},
    },
}
EMBEDDED = {
    "type": "object",
    "properties": {
        "type": {"const": "resource"},
        "resource": {"anyOf": [{"$ref": "#/$defs/Text"}, {"$ref": "#/$defs/Blob"}]},
    },
}
DEFS = {
    "Link": LINK,
    "Text": {"type": "object", "properties": {"uri": {}, "text": {"type": "string"}}},
    "Blob": {"type": "object", "properties": {"uri": {}, "blob": {"type": "string"}}},
}


# ---- which schema takes a file (pure) ------------------------------------------------------


def test_file_fields_read_the_shapes_real_servers_declare() -> None:
    schema = {
        "$defs": DEFS,
        "type": "object",
        "properties": {
            "doc": {"anyOf": [{"$ref": "#/$defs/Link"}, EMBEDDED, {"type": "null"}]},
            "url": {"type": "string", "format": "uri"},
            "sourceUrl": {"type": "string"},
            "photo": {"type": "string", "x-mcp-file": {"accept": ["image/png"]}},
            "title": {"type": "string"},
            "count": {"type": "integer"},
            "blob": EMBEDDED,
        },
        "required": ["doc"],
    }
    fields = file_fields(schema)
    assert {k: [str(s) for s in f.shapes] for k, f in fields.items()} == {
        "doc": ["resource_link", "embedded"],
        "url": ["uri"],
        "sourceUrl": ["uri"],
        "photo": ["data_uri"],
        "blob": ["embedded"],
    }
    assert fields["doc"].required and not fields["url"].required
    assert fields["blob"].encodings == {"text", "blob"}
    assert file_fields({"type": "object"}) == {} and file_fields(None) == {}


def test_a_link_is_preferred_and_only_small_files_are_embedded() -> None:
    fields = file_fields({"$defs": DEFS, "properties": {"a": {"anyOf": [LINK, EMBEDDED]}}})
    both = fields["a"]
    assert choose_shape(both, size=10**9) == (FileShape.RESOURCE_LINK, "")
    assert choose_shape(both, size=10, wanted="embedded") == (FileShape.EMBEDDED, "")
    only = file_fields({"properties": {"b": EMBEDDED}})["b"]
    assert choose_shape(only, size=EMBED_MAX_BYTES)[0] is FileShape.EMBEDDED
    shape, why = choose_shape(only, size=EMBED_MAX_BYTES + 1)
    assert shape is None and "256 KB" in why
    assert choose_shape(only, size=1, wanted="link")[0] is None


def test_atrium_file_urls_are_recognised_exactly() -> None:
    prefix = "https://chat.example.com/media/"
    assert atrium_file_id(prefix + "12/", prefix) == 12
    assert atrium_file_id(prefix + "12/link/eyJh:1x:abc_-/", prefix) == 12
    for other in (
        "https://chat.example.com/media/12/thumbnail/",
        "https://evil.example.com/media/12/",
        prefix + "12/../13/",
        prefix + "12",
        None,
    ):
        assert atrium_file_id(other, prefix) is None


def test_stored_values_name_the_file_and_server_values_carry_it() -> None:
    info = FileInfo(id=3, name="a.txt", mime_type="text/plain", size=4)
    url = "https://chat.example.com/media/3/"
    link = stored_value(FileShape.RESOURCE_LINK, info, file_url=url, encoding="text")
    assert link == {
        "type": "resource_link",
        "uri": url,
        "name": "a.txt",
        "mimeType": "text/plain",
        "size": 4,
    }
    assert server_value(FileShape.RESOURCE_LINK, link, info, link="L")["uri"] == "L"
    embedded = stored_value(FileShape.EMBEDDED, info, file_url=url, encoding="blob")
    assert "embedded when the call runs" in embedded["resource"]["blob"]
    sent = server_value(FileShape.EMBEDDED, embedded, info, content=b"abcd")
    assert sent["resource"] == {"uri": url, "mimeType": "text/plain", "blob": "YWJjZA=="}
    data_uri = server_value(FileShape.DATA_URI, url, info, content=b"abcd")
    assert data_uri == "data:text/plain;base64,YWJjZA=="


# ---- the real path: websocket → decision → examples/files over stdio → live link -------------


@pytest.fixture
def files_world(personas, settings, tmp_path: Path, live_server):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.MEDIA_STAGING_ROOT = str(tmp_path / "staging")
    settings.ATRIUM_APP_ORIGIN = live_server.url  # where the server fetches the link
    server = factories.McpServerFactory(
        name="Files", slug="files", command=sys.executable, args=[EXAMPLE], call_timeout=30.0
    )
    factories.AppBindingFactory(server=server, workspace=personas.workspace)
    second = factories.ThreadFactory(
        workspace=personas.workspace, title="Elsewhere", actor=personas.owner
    )
    client = client_for(personas.member)

    def posted(thread, name: str, data: bytes) -> MediaAsset:
        asset = attach(client, thread, name, data)
        services.message_post(
            thread=thread, author=personas.member, text="", attachment_ids=[asset.pk]
        )
        media_asset_persist(asset_id=asset.pk)
        asset.refresh_from_db()
        assert asset.status == "ready"
        return asset

    return {
        "notes": posted(personas.thread, "notes.txt", BODY),
        "big": posted(personas.thread, "big.txt", b"x" * (EMBED_MAX_BYTES + 10) + b"\n"),
        "elsewhere": posted(second, "secret.txt", b"not for this thread\n"),
    }


@pytest.fixture
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


async def _socket(ws_connect, user, thread):
    """A thread socket, opened from the live server's origin (the app origin here)."""
    origin = settings.ATRIUM_APP_ORIGIN
    communicator, ok, _ = await ws_connect(
        user, thread.pk, origin=origin, host=origin.split("://", 1)[1]
    )
    assert ok
    await next_frame(communicator, lambda f: f.get("type") == "hello")
    return communicator


def _audits(kind: AuditEventType) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(event_type=int(kind)).order_by("id"))


async def _call(sock, rid: str, tool: str, arguments: dict):
    await sock.send_json_to({"rid": rid, "type": "tool.call", "server": "files", "tool": tool,
                             "arguments": arguments})  # fmt: skip
    return await reply_frame(sock, rid)


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
async def test_a_members_file_goes_as_a_link_the_server_fetches_exactly(
    personas, files_world, ws_connect, close_connections
):
    notes = files_world["notes"]
    sock = await _socket(ws_connect, personas.member, personas.thread)
    listed = await _send_files(sock)
    # The thread's files, newest first: not another thread's (secret.txt).
    assert [(f["name"], f["size"], f["mimeType"]) for f in listed] == [
        ("big.txt", EMBED_MAX_BYTES + 11, "text/plain"),
        ("notes.txt", len(BODY), "text/plain"),
    ]

    command = "/call files.file_stats " + json.dumps({"file": {"$file": notes.pk}, "lines": 2})
    await sock.send_json_to({"type": "message.post", "text": command})
    done = await next_frame(sock, toolcall_event(None, "file_stats"))
    while done["data"]["status"] not in ("success", "error"):
        done = await next_frame(sock, toolcall_event(None, "file_stats"))
    data = done["data"]
    assert data["status"] == "success", data
    assert data["result"]["structured"] == {
        "name": "notes.txt",
        "mimeType": "text/plain",
        "size": len(BODY),
        "sha256": hashlib.sha256(BODY).hexdigest(),
        "lines": 3,
        "firstLines": ["first line", "second line"],
        "via": "link",
    }
    # What the call stores and shows (its card, an approval card): the name and the
    # authenticated URL; the link the server got is nowhere in the thread.
    assert data["arguments"]["file"] == {
        "type": "resource_link",
        "uri": file_url(notes.pk),
        "name": "notes.txt",
        "mimeType": "text/plain",
        "size": len(BODY),
    }
    assert "/link/" not in json.dumps(data)
    # The result's link back to the file is the file itself (part 2): the file chip.
    files = [p for p in data["result"]["parts"] if p["type"] == "file"]
    assert [(p["filename"], p["asset"]["id"], p["asset"]["url"]) for p in files] == [
        ("notes.txt", notes.pk, f"/media/{notes.pk}/")
    ]

    issued = await database_sync_to_async(_audits)(AuditEventType.ATTACHMENT_LINK_ISSUED)
    passed = await database_sync_to_async(_audits)(AuditEventType.FILE_PASSED_TO_TOOL)
    assert [e.extra["asset_id"] for e in issued] == [notes.pk]
    assert issued[0].reason == "tool files.file_stats"
    assert [(e.reason, e.extra["asset_id"], e.extra["name"], e.actor_user_id) for e in passed] == [
        ("link", notes.pk, "notes.txt", personas.member.pk)
    ]

    # The link handed over serves that one file, without a session, until it expires.
    call = await database_sync_to_async(
        lambda: ToolCall.objects.select_related("thread", "server").get(pk=data["id"])
    )()
    tool = await database_sync_to_async(lambda: call.server.tools.get(name="file_stats"))()
    sent = await database_sync_to_async(tool_files_hand_over)(
        call=call, input_schema=tool.input_schema
    )
    link = sent["file"]["uri"]
    assert link.startswith(file_url(notes.pk) + "link/")
    async with httpx.AsyncClient() as http:
        fetched = await http.get(link)
        assert fetched.status_code == 200 and fetched.content == BODY
        token = link.rstrip("/").rsplit("/", 1)[1]
        other = link.replace(f"/media/{notes.pk}/", f"/media/{files_world['big'].pk}/")
        assert (await http.get(other)).status_code == 404  # one file only
    assert asset_id_for_link(token) == notes.pk
    assert asset_id_for_link(token, now=time.time() + 601) is None  # expires (10 minutes)


async def _send_files(sock) -> list[dict]:
    await sock.send_json_to({"rid": "files", "type": "tools.files"})
    reply = await reply_frame(sock, "files")
    assert reply["ok"], reply
    return list(reply["result"]["files"])


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
async def test_small_files_go_embedded_and_plain_urls_as_links(
    personas, files_world, ws_connect, close_connections
):
    notes = files_world["notes"]
    sock = await _socket(ws_connect, personas.member, personas.thread)
    expected = hashlib.sha256(BODY).hexdigest()

    reply = await _call(sock, "e1", "file_stats", {"file": {"$file": notes.pk, "as": "embedded"}})
    assert reply["ok"], reply
    done = await next_frame(sock, toolcall_event("success", "file_stats"))
    assert done["data"]["result"]["structured"]["via"] == "embedded"
    assert done["data"]["result"]["structured"]["sha256"] == expected
    stored = done["data"]["arguments"]["file"]["resource"]
    assert stored["uri"] == file_url(notes.pk) and "embedded when the call runs" in stored["text"]

    # By name, into a tool that takes only embedded files.
    reply = await _call(sock, "e2", "embedded_stats", {"file": {"$file": "NOTES.txt"}})
    assert reply["ok"], reply
    done = await next_frame(sock, toolcall_event("success", "embedded_stats"))
    assert done["data"]["result"]["structured"]["sha256"] == expected

    # A string with format "uri".
    reply = await _call(sock, "u1", "url_stats", {"url": {"$file": notes.pk}})
    assert reply["ok"], reply
    done = await next_frame(sock, toolcall_event("success", "url_stats"))
    assert done["data"]["result"]["structured"]["sha256"] == expected
    assert done["data"]["arguments"]["url"] == file_url(notes.pk)

    passed = await database_sync_to_async(_audits)(AuditEventType.FILE_PASSED_TO_TOOL)
    assert [(e.tool_name, e.reason) for e in passed] == [
        ("file_stats", "embedded"),
        ("embedded_stats", "embedded"),
        ("url_stats", "link"),
    ]


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
async def test_other_threads_files_viewers_and_oversized_embeds_are_refused(
    personas, files_world, ws_connect, close_connections
):
    sock = await _socket(ws_connect, personas.member, personas.thread)
    elsewhere, big = files_world["elsewhere"], files_world["big"]

    reply = await _call(sock, "x1", "file_stats", {"file": {"$file": elsewhere.pk}})
    assert not reply["ok"] and reply["error"]["code"] == "file_not_in_thread"
    assert f"no file #{elsewhere.pk} in this thread" in reply["error"]["message"]
    reply = await _call(sock, "x2", "embedded_stats", {"file": {"$file": big.pk}})
    assert not reply["ok"] and reply["error"]["code"] == "file_shape_refused"
    assert "only files up to 256 KB are embedded" in reply["error"]["message"]
    reply = await _call(sock, "x3", "file_stats", {"lines": {"$file": big.pk}})
    assert not reply["ok"] and reply["error"]["code"] == "not_a_file_argument"

    viewer = await _socket(ws_connect, personas.viewer, personas.thread)
    reply = await _call(viewer, "v1", "file_stats", {"file": {"$file": files_world["notes"].pk}})
    assert not reply["ok"] and reply["error"]["code"] == "forbidden"
    await viewer.send_json_to({"rid": "v2", "type": "tools.files"})
    assert not (await reply_frame(viewer, "v2"))["ok"]

    refused = await database_sync_to_async(_audits)(AuditEventType.FILE_TO_TOOL_REFUSED)
    assert [(e.reason, e.decision) for e in refused] == [
        ("file_not_in_thread", "denied"),
        ("file_shape_refused", "denied"),
        ("not_a_file_argument", "denied"),
    ]
    assert await database_sync_to_async(ToolCall.objects.count)() == 0  # nothing recorded
    assert not await database_sync_to_async(
        AuditEvent.objects.filter(event_type=int(AuditEventType.ATTACHMENT_LINK_ISSUED)).exists
    )()


@pytest.mark.django_db(transaction=True)
def test_a_call_from_the_model_or_a_view_gets_no_file(personas, files_world) -> None:
    """Only a person's own call hands files over; the same arguments from the model are
    sent as they are stored (no link minted, nothing read)."""
    notes = files_world["notes"]
    server = factories.McpServerFactory(slug="other-files", command=sys.executable, args=[])
    url = file_url(notes.pk)
    call = factories.ToolCallFactory(
        thread=personas.thread,
        server=server,
        tool_name="url_stats",
        arguments={"url": url},
        origin="model",
        requested_by=personas.member,
    )
    schema = {"properties": {"url": {"type": "string", "format": "uri"}}}
    assert tool_files_hand_over(call=call, input_schema=schema) == {"url": url}
    assert not AuditEvent.objects.filter(event_type=int(AuditEventType.FILE_PASSED_TO_TOOL))
    call.origin = "user"
    sent = tool_files_hand_over(call=call, input_schema=schema)
    assert asset_id_for_link(sent["url"].rstrip("/").rsplit("/", 1)[1]) == notes.pk
