"""The thread websocket: members only, stored-then-broadcast messages, replay by sequence."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


async def _next_of_type(communicator, wanted: str, limit: int = 20):
    for _ in range(limit):
        frame = await communicator.receive_json_from(timeout=5)
        if frame.get("type") == wanted:
            return frame
    raise AssertionError(f"no {wanted} frame")


async def test_outsider_cannot_connect(personas, ws_connect):
    communicator, connected, code = await ws_connect(personas.outsider, personas.thread.pk)
    assert not connected
    assert code == 4403


async def test_anonymous_cannot_connect(personas, ws_connect):
    communicator, connected, code = await ws_connect(None, personas.thread.pk)
    assert not connected


async def test_foreign_origin_is_refused(personas, ws_connect):
    _, connected, _ = await ws_connect(
        personas.owner, personas.thread.pk, origin="http://evil.example"
    )
    assert not connected


@pytest.mark.parametrize("host", ["board.localhost:8000", "Board.LOCALHOST.:8000"])
async def test_sandbox_host_refuses_websockets(personas, ws_connect, host):
    _, connected, _ = await ws_connect(personas.owner, personas.thread.pk, host=host)
    assert not connected


async def test_message_reaches_every_member(personas, ws_connect):
    alice, ok_a, _ = await ws_connect(personas.owner, personas.thread.pk)
    bob, ok_b, _ = await ws_connect(personas.viewer, personas.thread.pk)
    assert ok_a and ok_b
    await _next_of_type(alice, "hello")
    await _next_of_type(bob, "hello")

    await alice.send_json_to({"type": "message.post", "text": "Ship it **today**", "rid": 1})
    reply = await _next_of_type(alice, "reply")
    assert reply["ok"] is True and reply["rid"] == 1

    seen = await _next_of_type(bob, "event")
    assert seen["kind"] == "message"
    assert seen["data"]["text"] == "Ship it **today**"
    assert "<strong>today</strong>" in seen["data"]["html"]
    assert seen["data"]["author"]["name"] == "olivia"
    await alice.disconnect()
    await bob.disconnect()


async def test_viewer_cannot_post(personas, ws_connect):
    from channels.db import database_sync_to_async

    from chat.models import Message

    viewer, ok, _ = await ws_connect(personas.viewer, personas.thread.pk)
    assert ok
    await _next_of_type(viewer, "hello")
    await viewer.send_json_to({"type": "message.post", "text": "hi", "rid": "x"})
    reply = await _next_of_type(viewer, "reply")
    assert reply["ok"] is False
    assert reply["error"]["code"] == "forbidden"
    count = await database_sync_to_async(Message.objects.filter(thread=personas.thread).count)()
    assert count == 0
    await viewer.disconnect()


async def test_reconnect_replays_exactly_what_was_missed(personas, ws_connect):
    sender, _, _ = await ws_connect(personas.owner, personas.thread.pk)
    hello = await _next_of_type(sender, "hello")
    start = hello["lastSeq"]
    for i in range(3):
        await sender.send_json_to({"type": "message.post", "text": f"m{i}", "rid": i})
        await _next_of_type(sender, "reply")

    # m0 (start + 1) is followed by the thread's one note that its workspace has no model.
    late, ok, _ = await ws_connect(personas.member, personas.thread.pk, after=start + 2)
    assert ok
    await _next_of_type(late, "hello")
    frames = [await late.receive_json_from(timeout=5) for _ in range(3)]
    assert [f.get("type") for f in frames] == ["event", "event", "replayed"]
    assert [f["data"]["text"] for f in frames[:2]] == ["m1", "m2"]
    assert [f["seq"] for f in frames[:2]] == [start + 3, start + 4]
    await sender.disconnect()
    await late.disconnect()


async def test_help_command_answers(personas, ws_connect):
    owner, _, _ = await ws_connect(personas.owner, personas.thread.pk)
    await _next_of_type(owner, "hello")
    await owner.send_json_to({"type": "message.post", "text": "/help"})
    texts = []
    for _ in range(6):
        frame = await owner.receive_json_from(timeout=5)
        if frame.get("type") == "event":
            texts.append(frame["data"]["text"])
        if len(texts) == 2:
            break
    assert texts[0] == "/help"
    assert "/call server.tool" in texts[1]
    await owner.disconnect()


@pytest.mark.parametrize(
    "raw, code",
    [
        ("not json", "invalid_json"),
        ("[1, 2]", "invalid_message"),
        ('{"type": "no.such.thing"}', "unknown_type"),
        ('{"type": "message.post", "text": 42}', "invalid_message"),
        ('{"type": "replay", "after": -1}', "invalid_message"),
        # U+0000 or a lone surrogate anywhere (PostgreSQL stores neither): refused alike.
        ('{"type": "message.post", "text": "hi\\u0000"}', "invalid_text"),
        ('{"type": "view.request", "params": {"k\\u0000": 1}}', "invalid_text"),
        ('{"type": "message.post", "text": "half \\ud83d"}', "invalid_text"),
        # A raw NUL byte is valid UTF-8 but not valid JSON inside a string (strict decoding).
        ('{"type": "message.post", "text": "raw \x00"}', "invalid_json"),
    ],
)
async def test_malformed_messages_get_a_clear_error_and_the_socket_stays(
    personas, ws_connect, raw, code
):
    owner, _, _ = await ws_connect(personas.owner, personas.thread.pk)
    await _next_of_type(owner, "hello")
    await owner.send_to(text_data=raw)
    reply = await _next_of_type(owner, "reply")
    assert reply["ok"] is False and reply["error"]["code"] == code
    assert reply["error"]["message"]
    await owner.send_json_to({"type": "ping", "rid": 7})
    assert (await _next_of_type(owner, "pong"))["rid"] == 7
    await owner.disconnect()


async def test_oversized_frame_is_refused(personas, ws_connect, settings):
    settings.ATRIUM_MAX_WS_MESSAGE = 1000
    owner, _, _ = await ws_connect(personas.owner, personas.thread.pk)
    await _next_of_type(owner, "hello")
    await owner.send_json_to({"type": "message.post", "text": "x" * 2000})
    reply = await _next_of_type(owner, "reply")
    assert reply["error"]["code"] == "message_too_large"
    await owner.disconnect()


async def test_demoted_member_is_refused_on_the_next_action(personas, ws_connect):
    from channels.db import database_sync_to_async

    from chat import services

    member, _, _ = await ws_connect(personas.member, personas.thread.pk)
    await _next_of_type(member, "hello")
    await database_sync_to_async(services.membership_set)(
        workspace=personas.workspace, user=personas.member, role="viewer"
    )
    await member.send_json_to({"type": "message.post", "text": "still here?"})
    reply = await _next_of_type(member, "reply")
    assert reply["error"]["code"] == "forbidden"
    await member.disconnect()


async def test_a_backslash_u0000_typed_as_text_is_not_a_nul(personas, ws_connect):
    """Only the JSON escape decodes to U+0000; the six characters themselves are text."""
    owner, _, _ = await ws_connect(personas.owner, personas.thread.pk)
    await _next_of_type(owner, "hello")
    await owner.send_to(text_data='{"type": "message.post", "text": "typed \\\\u0000", "rid": 1}')
    reply = await _next_of_type(owner, "reply")
    assert reply["ok"] is True, reply
    await owner.disconnect()
