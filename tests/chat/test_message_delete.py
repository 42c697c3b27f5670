"""Deleting a message (issue 26, docs/files.md "Deleting a message"): the service
``message_delete`` and the ``message.delete`` websocket action through the real ASGI
application — the author deletes (files gone from storage, 705 and 111 audited, a
``message.deleted`` event for every member, gone from the snapshot and from replays); a
viewer, another member, the assistant's message, a message that started a tool call, one
already deleted and another thread's are refused with their own codes; an owner may delete
anyone's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from channels.db import database_sync_to_async
from django.core.files.storage import default_storage

from audit.models import AuditEvent
from audit.types import AuditEventType
from chat import services
from chat.media.models import MediaAsset
from chat.media.services import media_asset_persist
from chat.models import Message, MessageRole, ThreadEvent
from chat.selectors import thread_snapshot
from chat.services.messages import message_delete
from tests import factories
from tests.chat import attachment_samples as samples
from tests.chat.test_attachments import attach, client_for
from tests.conftest import next_frame, open_socket, reply_frame

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "the launch date is the 14th"


@pytest.fixture(autouse=True)
def media_settings(settings, tmp_path: Path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.MEDIA_STAGING_ROOT = str(tmp_path / "staging")
    return settings


def audits(event_type: AuditEventType) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(event_type=int(event_type)).order_by("id"))


def post_with_file(personas, author) -> tuple[Message, MediaAsset, list[str]]:
    """``author`` posts SECRET with a PNG the worker stored (and its thumbnail)."""
    asset = attach(client_for(author), personas.thread, "plan.png", samples.png())
    media_asset_persist(asset_id=asset.pk)
    asset.refresh_from_db()
    stored = [p for p in (asset.storage_path, asset.thumbnail_path) if p]
    assert stored and all(default_storage.exists(p) for p in stored)
    message = services.message_post(
        thread=personas.thread, author=author, text=SECRET, attachment_ids=[asset.pk]
    )
    return message, asset, stored


def post(thread, author, text: str = "hello") -> Message:
    return services.message_post(thread=thread, author=author, text=text)


def deleted_event(message_id: int):
    def match(frame) -> bool:
        return (
            frame.get("type") == "event"
            and frame.get("kind") == "message.deleted"
            and frame["data"] == {"id": message_id}
        )

    return match


# ---- the service --------------------------------------------------------------------------


def test_the_author_deletes_a_message_with_its_files(personas):
    message, asset, stored = post_with_file(personas, personas.member)

    assert message_delete(message=message, actor=personas.member) == 1

    assert not Message.objects.filter(pk=message.pk).exists()
    assert not MediaAsset.objects.filter(pk=asset.pk).exists()
    assert not any(default_storage.exists(p) for p in stored)  # removed on commit
    [file_row] = audits(AuditEventType.ATTACHMENT_DELETED)
    assert (file_row.extra["asset_id"], file_row.actor_user_id) == (asset.pk, personas.member.pk)
    [row] = audits(AuditEventType.MESSAGE_DELETED)
    assert (row.actor_user_id, row.thread_id, row.workspace_id) == (
        personas.member.pk,
        personas.thread.pk,
        personas.workspace.pk,
    )
    assert row.extra["message_id"] == message.pk
    assert (row.extra["files"], row.extra["own"]) == (1, True)
    assert SECRET not in json.dumps(row.extra) and "plan.png" not in json.dumps(row.extra)
    # Every member's page hears it; a reload (the snapshot) and a replay no longer have it.
    last = ThreadEvent.objects.filter(thread=personas.thread).order_by("-seq").first()
    assert (last.kind, last.payload) == ("message.deleted", {"id": message.pk})
    snapshot = json.dumps(thread_snapshot(thread=personas.thread))
    assert SECRET not in snapshot and "plan.png" not in snapshot
    stored_events = json.dumps(
        list(ThreadEvent.objects.filter(thread=personas.thread).values("kind", "payload"))
    )
    assert SECRET not in stored_events and "plan.png" not in stored_events


def test_an_owner_deletes_a_members_message(personas):
    message = post(personas.thread, personas.member)
    assert message_delete(message=message, actor=personas.owner) == 0
    [row] = audits(AuditEventType.MESSAGE_DELETED)
    assert (row.actor_user_id, row.extra["author_id"], row.extra["own"]) == (
        personas.owner.pk,
        personas.member.pk,
        False,
    )


def test_refusals_leave_the_message_and_write_no_deletion(personas):
    mine = post(personas.thread, personas.owner, "the owner's")
    assistant = services.message_post_system(thread=personas.thread, text="hi", role="assistant")
    cases = [
        (mine, personas.viewer, "viewer"),
        (mine, personas.member, "not_yours"),
        (mine, personas.outsider, "forbidden"),
        (assistant, personas.owner, "not_deletable"),
    ]
    for message, actor, code in cases:
        with pytest.raises(services.ChatError) as refused:
            message_delete(message=message, actor=actor)
        assert refused.value.code == code, (actor, code)
    assert Message.objects.filter(pk__in=[mine.pk, assistant.pk]).count() == 2
    assert audits(AuditEventType.MESSAGE_DELETED) == []


def test_a_message_that_started_a_tool_call_stays(personas):
    message = post(personas.thread, personas.member, "/call board.list_items {}")
    server = factories.McpServerFactory(name="Board", slug="board")
    factories.ToolCallFactory(
        thread=personas.thread, server=server, tool_name="list_items", message=message
    )
    with pytest.raises(services.ChatError) as refused:
        message_delete(message=message, actor=personas.member)
    assert refused.value.code == "has_tool_calls"
    assert Message.objects.filter(pk=message.pk).exists()


# ---- the websocket action -----------------------------------------------------------------


async def test_the_author_deletes_and_every_member_sees_it_go(personas, ws_connect):
    message, asset, stored = await database_sync_to_async(post_with_file)(personas, personas.member)
    marco = await open_socket(ws_connect, personas.member, personas.thread)
    olivia = await open_socket(ws_connect, personas.owner, personas.thread)
    vera = await open_socket(ws_connect, personas.viewer, personas.thread)

    await marco.send_json_to({"type": "message.delete", "rid": "d", "messageId": message.pk})
    reply = await reply_frame(marco, "d")
    assert reply["ok"] and reply["result"] == {"messageId": message.pk, "files": 1}, reply
    for sock in (marco, olivia, vera):
        await next_frame(sock, deleted_event(message.pk))
    assert not await database_sync_to_async(MediaAsset.objects.filter(pk=asset.pk).exists)()
    assert not any(default_storage.exists(p) for p in stored)
    assert len(await database_sync_to_async(audits)(AuditEventType.MESSAGE_DELETED)) == 1
    assert len(await database_sync_to_async(audits)(AuditEventType.ATTACHMENT_DELETED)) == 1

    # Twice: already deleted.
    await olivia.send_json_to({"type": "message.delete", "rid": "again", "messageId": message.pk})
    error = (await reply_frame(olivia, "again"))["error"]
    assert error["code"] == "already_deleted", error
    for sock in (marco, olivia, vera):
        await sock.disconnect()


async def test_the_action_refuses_with_clear_errors(personas, ws_connect):
    owners = await database_sync_to_async(post)(personas.thread, personas.owner, "owner's")
    elsewhere = await database_sync_to_async(post)(
        personas.other_thread, personas.outsider, "secret"
    )
    marco = await open_socket(ws_connect, personas.member, personas.thread)
    vera = await open_socket(ws_connect, personas.viewer, personas.thread)

    async def refused(sock, rid, message_id) -> dict:
        await sock.send_json_to({"type": "message.delete", "rid": rid, "messageId": message_id})
        reply = await reply_frame(sock, rid)
        assert not reply["ok"], reply
        return reply["error"]

    assert (await refused(vera, "v", owners.pk))["code"] == "viewer"
    error = await refused(marco, "n", owners.pk)
    assert error["code"] == "not_yours" and "your own messages" in error["message"]
    assert (await refused(marco, "t", elsewhere.pk))["code"] == "not_in_thread"
    assert (await refused(marco, "x", "7"))["code"] == "invalid_message"
    assert (
        await database_sync_to_async(
            Message.objects.filter(pk__in=[owners.pk, elsewhere.pk]).count
        )()
        == 2
    )
    # Each refusal is audited (ACTION_REFUSED, bounded per person), none as a deletion.
    reasons = await database_sync_to_async(
        lambda: list(
            AuditEvent.objects.filter(
                event_type=int(AuditEventType.ACTION_REFUSED), action="message.delete"
            ).values_list("reason", flat=True)
        )
    )()
    assert {"viewer", "not_yours", "not_in_thread"} <= set(reasons), reasons
    assert await database_sync_to_async(audits)(AuditEventType.MESSAGE_DELETED) == []
    for sock in (marco, vera):
        await sock.disconnect()


async def test_an_owner_deletes_a_members_message_through_the_socket(personas, ws_connect):
    message = await database_sync_to_async(post)(personas.thread, personas.member)
    olivia = await open_socket(ws_connect, personas.owner, personas.thread)
    marco = await open_socket(ws_connect, personas.member, personas.thread)
    await olivia.send_json_to({"type": "message.delete", "rid": "o", "messageId": message.pk})
    assert (await reply_frame(olivia, "o"))["ok"]
    await next_frame(marco, deleted_event(message.pk))
    # A replay from before it no longer carries the message.
    replay = await open_socket(ws_connect, personas.member, personas.thread)
    await replay.send_json_to({"type": "replay", "after": 0, "rid": "r"})
    frames = []
    await next_frame(
        replay, lambda f: frames.append(f) or (f.get("type") == "replayed" and f.get("rid") == "r")
    )
    kinds = [(f["kind"], f["data"].get("id")) for f in frames if f.get("type") == "event"]
    assert ("message", message.pk) not in kinds and ("message.deleted", message.pk) in kinds
    for sock in (olivia, marco, replay):
        await sock.disconnect()


def test_only_people_write_deletable_messages(personas):
    """The assistant's, Atrium's and tool messages are never deletable, even by an owner."""
    for role in (MessageRole.ASSISTANT, MessageRole.SYSTEM, MessageRole.TOOL):
        message = Message.objects.create(thread=personas.thread, role=role, text="x")
        with pytest.raises(services.ChatError) as refused:
            message_delete(message=message, actor=personas.owner)
        assert refused.value.code == "not_deletable"
