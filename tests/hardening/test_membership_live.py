"""Issue 23, F1 and F9: membership is live on open sockets, and `replay` is bounded.

Through the real websocket path (the ASGI application with its auth middleware, the
channel layer, the services): a removed member's socket ends at once and nothing of the
thread reaches it afterwards; a re-roled member's socket takes the new role (and tells the
client); a replay checks the membership first; `replay` frames are rate-limited without
closing the socket.
"""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from channels.layers import InMemoryChannelLayer, get_channel_layer

from tests.conftest import next_frame, open_socket, reply_frame
from tests.waiting import apoll, frames_until

pytestmark = [pytest.mark.django_db(transaction=True)]


def _db(fn):
    return database_sync_to_async(fn)()


async def _rows(**filters) -> list[dict]:
    from audit.models import AuditEvent

    return await _db(
        lambda: list(
            AuditEvent.objects.filter(**filters)
            .order_by("pk")
            .values("event_type", "decision", "reason", "actor_user_id", "extra")
        )
    )


def _membership(personas, user):
    from chat.models import Membership

    return Membership.objects.get(workspace=personas.workspace, user=user)


def _is_event_with(text: str):
    return lambda f: f.get("type") == "event" and f["data"].get("text") == text


async def _closed(communicator) -> dict:
    """Every frame up to the socket's close, which must come (code 4403)."""
    frames = []
    while True:
        output = await communicator.receive_output(timeout=10)
        if output["type"] == "websocket.close":
            assert output["code"] == 4403
            return {"frames": frames}
        frames.append(json.loads(output["text"]))


async def test_removing_a_member_ends_their_socket_and_nothing_after_it_reaches_them(
    personas, ws_connect
):
    from chat.models import Message
    from chat.realtime.groups import user_group
    from chat.services import message_post
    from chat.services.workspaces import membership_remove

    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    member = await open_socket(ws_connect, personas.member, personas.thread)
    layer = get_channel_layer()
    in_memory = isinstance(layer, InMemoryChannelLayer)
    member_channels = list(layer.groups[user_group(personas.member.pk)]) if in_memory else []

    def remove_between_two_messages():
        from django.db import transaction

        with transaction.atomic():
            # Broadcast on commit in this order: one event, the removal, another event.
            message_post(thread=personas.thread, author=personas.owner, text="before removal")
            membership_remove(membership=_membership(personas, personas.member), actor=None)
            message_post(thread=personas.thread, author=personas.owner, text="after removal")

    await _db(remove_between_two_messages)

    seen = (await _closed(member))["frames"]
    texts = [f["data"].get("text") for f in seen if f.get("type") == "event"]
    assert texts == ["before removal"], seen
    notice = seen[-1]
    assert notice["type"] == "reply" and notice["ok"] is False
    assert notice["error"] == {
        "code": "membership_removed",
        "message": "You no longer have access to this workspace.",
    }
    # The owner (still a member) gets both messages; the later one was queued on the
    # member's channel too, behind the removal: it must be dropped, never sent.
    await next_frame(owner, _is_event_with("after removal"))
    if in_memory:
        await apoll(
            lambda: all(
                c not in layer.channels or layer.channels[c].empty() for c in member_channels
            ),
            reason="a dropped event announces nothing: the member's channel queue drains",
        )
    await member.send_input({"type": "websocket.disconnect", "code": 1000})
    await member.wait(timeout=5)
    while not member.output_queue.empty():
        late = member.output_queue.get_nowait()
        assert late["type"] != "websocket.send", late
    assert await _db(lambda: Message.objects.filter(text="after removal").exists())

    closed = await _rows(event_type=107, actor_user_id=personas.member.pk)
    assert len(closed) == 1 and closed[0]["reason"] == "membership_removed"
    removed = await _rows(event_type=103)
    assert removed[0]["extra"] == {"user_id": personas.member.pk, "role": "member"}
    await owner.disconnect()


async def test_a_role_change_reroles_the_open_socket_and_tells_the_client(personas, ws_connect):
    from chat.services import membership_set

    member = await open_socket(ws_connect, personas.member, personas.thread)
    await _db(
        lambda: membership_set(
            workspace=personas.workspace, user=personas.member, role="viewer", actor=personas.owner
        )
    )
    role = await next_frame(member, lambda f: f.get("type") == "role", timeout=10)
    assert role == {"type": "role", "role": "viewer", "canAct": False}

    await member.send_json_to({"type": "message.post", "rid": "p", "text": "as a viewer?"})
    refused = await reply_frame(member, "p")
    assert refused["ok"] is False and refused["error"]["code"] == "forbidden"
    assert "Viewers" in refused["error"]["message"]

    # Promoted back: the same socket takes the role again and acts.
    await _db(
        lambda: membership_set(
            workspace=personas.workspace, user=personas.member, role="member", actor=personas.owner
        )
    )
    role = await next_frame(member, lambda f: f.get("type") == "role", timeout=10)
    assert role["role"] == "member" and role["canAct"] is True
    await member.send_json_to({"type": "message.post", "rid": "q", "text": "a member again"})
    assert (await reply_frame(member, "q"))["ok"]
    changes = await _rows(event_type=101, actor_user_id=personas.owner.pk)
    assert [c["extra"]["previous_role"] for c in changes] == ["member", "viewer"]
    await member.disconnect()


async def test_a_replay_after_an_unannounced_removal_serves_nothing(personas, ws_connect):
    """A removal the socket was not told of (a raw delete; with the in-memory layer, one
    made in another process): the replay reads the membership before any event."""
    from chat.models import Membership
    from chat.services import message_post

    member = await open_socket(ws_connect, personas.member, personas.thread)
    for n in range(3):
        await _db(
            lambda n=n: message_post(thread=personas.thread, author=personas.owner, text=f"m{n}")
        )
        await next_frame(member, _is_event_with(f"m{n}"))
    await _db(
        lambda: Membership.objects.filter(
            workspace=personas.workspace, user=personas.member
        )._raw_delete(using="default")
    )
    await member.send_json_to({"type": "replay", "rid": "r", "after": 0})
    seen = (await _closed(member))["frames"]
    assert [f["type"] for f in seen] == ["reply"], seen
    assert seen[0]["rid"] == "r" and seen[0]["error"]["code"] == "forbidden"


async def test_a_connect_replay_checks_the_membership_too(personas, ws_connect):
    """`?after=` replays on connect with the same check (the member still in: served)."""
    from chat.services import message_post

    await _db(lambda: message_post(thread=personas.thread, author=personas.owner, text="hi"))
    member, ok, _ = await ws_connect(personas.member, personas.thread.pk, after=0)
    assert ok
    frames = await frames_until(member, lambda f: f.get("type") == "replayed")
    assert [f["type"] for f in frames] == ["hello", "event", "replayed"]
    await member.disconnect()


async def test_replay_frames_are_rate_limited_and_the_socket_stays_open(
    personas, ws_connect, settings
):
    settings.ATRIUM_RATE_LIMITS = {**settings.ATRIUM_RATE_LIMITS, "replay": (2, 0.001)}
    member = await open_socket(ws_connect, personas.member, personas.thread)
    for rid in ("r1", "r2"):
        await member.send_json_to({"type": "replay", "rid": rid, "after": 0})
        done = await next_frame(member, lambda f: f.get("type") == "replayed")
        assert done["rid"] == rid
    await member.send_json_to({"type": "replay", "rid": "r3", "after": 0})
    refused = await reply_frame(member, "r3")
    assert refused["ok"] is False and refused["error"]["code"] == "rate_limited"
    assert refused["error"]["message"].startswith("Too many replay requests")
    assert refused["error"]["details"]["retryAfter"] > 0
    await member.send_json_to({"type": "ping", "rid": "alive"})
    assert (await next_frame(member, lambda f: f.get("type") == "pong"))["rid"] == "alive"
    rows = await _rows(event_type=132, actor_user_id=personas.member.pk)
    assert len(rows) == 1 and rows[0]["extra"]["bucket"] == "replay"
    await member.disconnect()
