"""Websocket fuzzing (DESIGN §6, §8.9): malformed, oversized, unknown, deeply nested and
wrong-typed messages each get a clear error, the socket stays open, and no stored data
changes (row counts and the thread's sequence number)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.conf import settings

from tests.conftest import next_frame

pytestmark = [pytest.mark.django_db(transaction=True)]

TYPES = [
    "ping",
    "replay",
    "message.post",
    "tool.call",
    "tool.cancel",
    "approval.decide",
    "allowance.revoke",
    "view.open",
    "view.request",
    "view.notify",
    "tools.list",
]


def _deep(depth: int) -> Any:
    value: Any = "x"
    for n in range(depth):
        value = {"a": value} if n % 2 else [value]
    return value


# (frame, expected error code or None for "any clear error")
TEXT_CASES: list[tuple[str, str | None]] = [
    ("{", "invalid_json"),
    ("nul", "invalid_json"),
    ("\x00\x01", "invalid_json"),
    ('{"type": "ping"', "invalid_json"),
    ("[" * 100_000 + "]" * 100_000, "invalid_json"),  # nesting beyond the parser
    ('{"type": "ping", "rid": 1e999999}', None),  # overflowing number (inf)
    ("1", "invalid_message"),
    ('"ping"', "invalid_message"),
    ("[]", "invalid_message"),
    ("null", "invalid_message"),
    ("{}", "invalid_message"),
    ('{"type": 5}', "invalid_message"),
    ('{"type": null}', "invalid_message"),
    ('{"type": ["ping"]}', "invalid_message"),
    ('{"type": "nope"}', "unknown_type"),
    (json.dumps({"type": "x" * 5000}), "unknown_type"),
    (json.dumps({"type": "\u202eevil"}), "unknown_type"),
    (json.dumps({"type": "\u202eevil\u0000"}), "invalid_text"),  # NUL: PostgreSQL stores none
]
WRONG_TYPED: list[dict[str, Any]] = [
    {"type": "replay", "after": -1},
    {"type": "replay", "after": "3"},
    {"type": "replay", "after": True},
    {"type": "replay", "after": 1.5},
    {"type": "replay"},
    {"type": "message.post", "text": 123},
    {"type": "message.post", "text": None},
    {"type": "message.post", "text": ["hi"]},
    {"type": "message.post", "text": {"a": 1}},
    {"type": "message.post", "text": _deep(500)},
    {"type": "message.post"},
    {"type": "tool.call", "server": 1, "tool": "x", "arguments": {}},
    {"type": "tool.call", "server": "nope", "tool": "x", "arguments": {}},
    {"type": "tool.call", "server": "nope", "tool": [], "arguments": "x"},
    {"type": "tool.call", "server": None},
    {"type": "tool.cancel", "toolCallId": "1"},
    {"type": "tool.cancel", "toolCallId": None},
    {"type": "tool.cancel", "toolCallId": 10**12},
    {"type": "approval.decide", "approvalId": "a", "decision": "approve"},
    {"type": "approval.decide", "approvalId": 1, "decision": "maybe"},
    {"type": "approval.decide", "approvalId": 10**12, "decision": "approve"},
    {"type": "approval.decide", "approvalId": 1, "decision": ["allow_thread"]},
    {"type": "approval.decide", "approvalId": 1, "decision": {"scope": "workspace"}},
    {"type": "allowance.revoke", "allowanceId": "1"},
    {"type": "allowance.revoke", "allowanceId": True},
    {"type": "allowance.revoke", "allowanceId": 10**12},
    {"type": "allowance.revoke"},
    {"type": "view.open", "toolCallId": "1"},
    {"type": "view.open", "toolCallId": {}},
    {"type": "view.open", "toolCallId": 10**12},
    {"type": "view.open"},
    {"type": "view.request", "token": 1, "method": "ping"},
    {"type": "view.request", "token": None, "method": None},
    {"type": "view.request", "token": "garbage", "method": "tools/call", "params": []},
    {"type": "view.request", "token": "x" * 10_000, "method": "ping", "params": _deep(300)},
    {"type": "view.notify", "token": "garbage", "method": "notifications/message"},
    {"type": "view.notify", "token": [], "method": 5, "params": "x"},
    {"type": "ping", "rid": {"nested": True}},
]


async def _counts(thread) -> dict[str, int]:
    from bindings.models import ApprovalRequest
    from chat.media.models import MediaAsset
    from chat.models import Message, Thread, ThreadEvent, ToolCall

    def read() -> dict[str, int]:
        return {
            "messages": Message.objects.count(),
            "calls": ToolCall.objects.count(),
            "events": ThreadEvent.objects.count(),
            "approvals": ApprovalRequest.objects.count(),
            "media": MediaAsset.objects.count(),
            "seq": Thread.objects.get(pk=thread.pk).last_seq,
        }

    return await database_sync_to_async(read)()


async def _answers(sock, rid: str) -> list[dict[str, Any]]:
    """Every frame up to the pong of a ping sent right after the message under test."""
    await sock.send_json_to({"type": "ping", "rid": rid})
    frames = []
    while True:
        frame = await sock.receive_json_from(timeout=20)
        if frame.get("type") == "pong" and frame.get("rid") == rid:
            return frames
        frames.append(frame)


def _clear_error(frames: list[dict[str, Any]], expected: str | None) -> dict[str, Any]:
    replies = [f for f in frames if f.get("type") == "reply"]
    assert len(replies) == 1, frames
    reply = replies[0]
    assert reply["ok"] is False, reply
    code, message = reply["error"]["code"], reply["error"]["message"]
    assert isinstance(code, str) and code and code != "internal_error", reply
    assert isinstance(message, str) and 0 < len(message) < 500, reply
    if expected:
        assert code == expected, reply
    return reply


async def _open(ws_connect, personas):
    sock, ok, _ = await ws_connect(personas.member, personas.thread.pk)
    assert ok
    await next_frame(sock, lambda f: f.get("type") == "hello")
    return sock


async def test_malformed_frames_get_clear_errors_and_the_socket_stays_open(personas, ws_connect):
    sock = await _open(ws_connect, personas)
    before = await _counts(personas.thread)
    for n, (text, expected) in enumerate(TEXT_CASES):
        await sock.send_to(text_data=text)
        frames = await _answers(sock, f"after-{n}")
        if expected is None:  # e.g. a ping whose rid is not usable: a pong or an error
            assert all(f.get("type") in ("reply", "pong") for f in frames), frames
        else:
            _clear_error(frames, expected)
    await sock.send_to(bytes_data=b"\x00\x01binary")
    _clear_error(await _answers(sock, "after-binary"), "binary_not_supported")
    oversized = json.dumps({"type": "message.post", "text": "x" * settings.ATRIUM_MAX_WS_MESSAGE})
    await sock.send_to(text_data=oversized)
    _clear_error(await _answers(sock, "after-oversized"), "message_too_large")
    assert await _counts(personas.thread) == before
    await sock.disconnect()


async def test_wrong_typed_fields_get_clear_errors_and_store_nothing(personas, ws_connect):
    sock = await _open(ws_connect, personas)
    before = await _counts(personas.thread)
    for n, message in enumerate(WRONG_TYPED):
        await sock.send_to(text_data=json.dumps({"rid": f"m{n}", **message}))
        frames = await _answers(sock, f"after-{n}")
        if message["type"] == "ping":  # an unusable rid is dropped, the ping still answered
            assert any(f.get("type") == "pong" and f.get("rid") is None for f in frames), frames
            continue
        _clear_error(frames, None)
    assert await _counts(personas.thread) == before
    await sock.disconnect()


def _random_json(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 1, 2**31, -(2**63), 10**30, rng.randrange(-1000, 1000)])
    if kind == 3:
        return rng.choice([0.5, -1e308, 1e-308, float(rng.randrange(100))])
    if kind in (4, 5):
        alphabet = "ab/\\\"'<>{}[]\u0000\u202e\U0001f600 é"
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30)))
    if kind in (6, 7):
        return {
            rng.choice(["type", "rid", "text", "token", "method", "params", "after", "x"]): (
                _random_json(rng, depth + 1)
            )
            for _ in range(rng.randrange(0, 5))
        }
    return [_random_json(rng, depth + 1) for _ in range(rng.randrange(0, 5))]


async def test_random_messages_never_break_the_socket_or_the_data(personas, ws_connect):
    """A seeded random run of 400 messages with real and made-up types and random fields.

    Nothing here can legitimately store anything: posts never carry string text, there is
    no server to call, and ids and tokens are random."""
    rng = random.Random(20261122)
    sock = await _open(ws_connect, personas)
    before = await _counts(personas.thread)
    for n in range(400):
        message = _random_json(rng, 1)
        message = message if isinstance(message, dict) else {"x": message}
        if rng.random() < 0.8:
            message["type"] = rng.choice(TYPES + ["", "nope", "message", "view"])
        if message.get("type") == "message.post" and isinstance(message.get("text"), str):
            message["text"] = [message["text"]]
        if message.get("type") == "replay" and rng.random() < 0.5:
            message.pop("after", None)
        await sock.send_to(text_data=json.dumps(message))
        frames = await _answers(sock, f"r{n}")
        for frame in frames:
            assert frame.get("type") in ("reply", "pong", "replayed", "event"), frame
            if frame.get("type") == "reply" and not frame["ok"]:
                assert frame["error"]["code"] != "internal_error", (message, frame)
                assert frame["error"]["message"], frame
    assert await _counts(personas.thread) == before
    await sock.disconnect()
