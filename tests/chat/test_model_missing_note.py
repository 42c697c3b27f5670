"""A plain message in a workspace without a model: the thread is told once why nothing
answers, and where an admin sets a model — through the real websocket path."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from audit.models import AuditEvent
from audit.types import AuditEventType
from chat.agent import turns as agent_turns
from chat.models import Message, MessageRole
from tests import factories
from tests.conftest import open_socket, reply_frame

pytestmark = [pytest.mark.django_db(transaction=True)]


def _is_note(frame) -> bool:
    return (
        frame.get("type") == "event"
        and frame.get("kind") == "message"
        and frame["data"]["role"] == "system"
        and "no model" in frame["data"]["text"]
    )


def _is_help_reply(frame) -> bool:
    return (
        frame.get("type") == "event"
        and frame.get("kind") == "message"
        and frame["data"]["role"] != "user"
        and "/help" in frame["data"]["text"]
        and not _is_note(frame)
    )


async def _frames_until(communicator, stop, limit: int = 50):
    frames = []
    for _ in range(limit):
        frame = await communicator.receive_json_from(timeout=20)
        frames.append(frame)
        if stop(frame):
            return frames
    raise AssertionError("the awaited frame never came")


async def _post(communicator, text: str, rid: int) -> None:
    await communicator.send_json_to({"type": "message.post", "text": text, "rid": rid})


def _notes(thread_id: int) -> list[Message]:
    return list(Message.objects.filter(thread_id=thread_id, role=MessageRole.SYSTEM))


def _noted(thread_id: int) -> int:
    return AuditEvent.objects.filter(
        thread_id=thread_id, event_type=int(AuditEventType.MODEL_MISSING_NOTED)
    ).count()


@pytest.fixture
def direct_workspace(personas):
    personas.workspace.provider = "direct"
    personas.workspace.save()
    return personas.workspace


async def test_a_thread_is_told_once_that_the_workspace_has_no_model(
    personas, direct_workspace, ws_connect, monkeypatch
):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    member = await open_socket(ws_connect, personas.member, personas.thread)

    await _post(owner, "Hello, anyone there?", 1)
    note = (await _frames_until(owner, _is_note))[-1]["data"]
    assert note["authorLabel"] == "Atrium" and note["status"] == "complete"
    where = f"/admin/chat/workspace/{direct_workspace.pk}/change/"
    assert where in note["text"] and f'href="{where}"' in note["html"]
    assert "ATRIUM_MODEL" in note["text"] and "/help" in note["text"]
    await _frames_until(member, _is_note)  # every member sees it, live

    # Later plain messages, by anyone, get no second note: a /help reply comes after them
    # (commands answer in order), and no note came before it.
    await _post(member, "Still nothing?", 2)
    await reply_frame(member, 2)  # its turn (or note) was decided before the reply
    await _post(owner, "/help", 3)
    frames = await _frames_until(owner, _is_help_reply)
    assert not [f for f in frames if _is_note(f)]

    # Another process (no memory of this thread) reads the audit row and stays quiet too.
    monkeypatch.setattr(agent_turns, "_told_no_model", set())
    await _post(owner, "And now?", 4)
    await reply_frame(owner, 4)
    await _post(owner, "/help", 5)
    frames = await _frames_until(owner, _is_help_reply)
    assert not [f for f in frames if _is_note(f)]

    assert len(await database_sync_to_async(_notes)(personas.thread.pk)) == 1
    assert await database_sync_to_async(_noted)(personas.thread.pk) == 1

    # Each thread is told once: a new thread of the workspace hears it on its first message.
    other = await database_sync_to_async(factories.ThreadFactory)(
        workspace=direct_workspace, title="Second", actor=personas.owner
    )
    second = await open_socket(ws_connect, personas.owner, other)
    await _post(second, "Hi?", 6)
    await _frames_until(second, _is_note)
    assert await database_sync_to_async(_noted)(other.pk) == 1


async def test_commands_alone_get_no_note(personas, direct_workspace, ws_connect):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await _post(owner, "/help", 1)
    frames = await _frames_until(owner, _is_help_reply)
    assert not [f for f in frames if _is_note(f)]
    assert await database_sync_to_async(_noted)(personas.thread.pk) == 0
