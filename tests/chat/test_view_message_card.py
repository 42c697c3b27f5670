"""A view's ui/message that would start a model turn waits for its person (F11).

Through the real websocket path with the real `board` example server and the fake
OpenAI-compatible model (tests/chat/fake_llm.py): the view's request gets the card's
content (the frozen text, signed); only `view.message_decide` with Send posts it and
starts the turn, as the member deciding (membership and role re-read, audited).
"""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from django.core import signing

from audit.types import AuditEventType
from tests import factories
from tests.chat.fake_llm import FakeLLM, openai_text
from tests.conftest import next_frame, open_socket, reply_frame, toolcall_event

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


@pytest.fixture
def llm():
    with FakeLLM("openai") as fake:
        yield fake


@pytest.fixture
def model_workspace(personas, llm):
    workspace = personas.workspace
    workspace.provider = "openai"
    workspace.model = "fake-model"
    workspace.provider_base_url = llm.base_url
    workspace.provider_api_key = "sk-test-card"
    workspace.save()
    return workspace


async def _view(ws_connect, user, thread):
    sock = await open_socket(ws_connect, user, thread)
    await sock.send_json_to({"type": "message.post", "text": "/call board.list_items"})
    done = await next_frame(sock, toolcall_event("success", "list_items"))
    await sock.send_json_to({"type": "view.open", "toolCallId": done["data"]["id"], "rid": "open"})
    opened = await reply_frame(sock, "open")
    assert opened["ok"], opened
    return sock, opened["result"]["token"]


async def _ask(sock, token, text, rid="ask"):
    await sock.send_json_to(
        {
            "type": "view.request",
            "rid": rid,
            "token": token,
            "method": "ui/message",
            "params": {"role": "user", "content": [{"type": "text", "text": text}]},
        }
    )
    return await reply_frame(sock, rid)


async def _decide(sock, proposal, decision, rid="decide", **extra):
    await sock.send_json_to(
        {
            "type": "view.message_decide",
            "rid": rid,
            "proposal": proposal,
            "decision": decision,
            **extra,
        }
    )
    return await reply_frame(sock, rid)


def _assistant_message(frame) -> bool:
    data = frame.get("data") or {}
    return frame.get("kind") == "message" and data.get("role") == "assistant"


@database_sync_to_async
def _posted(text: str) -> list[str]:
    from chat.models import Message

    return list(Message.objects.filter(text=text).values_list("author_label", flat=True))


@database_sync_to_async
def _events(event_type: AuditEventType) -> list[dict]:
    from audit.models import AuditEvent

    return [
        {"decision": e.decision, "reason": e.reason, "extra": e.extra, "user": e.actor_user_id}
        for e in AuditEvent.objects.filter(event_type=event_type).order_by("id")
    ]


async def test_the_view_gets_a_card_and_send_posts_the_frozen_text(
    personas, board_server, model_workspace, llm, ws_connect
):
    llm.push(openai_text("On it."))
    sock, token = await _view(ws_connect, personas.owner, personas.thread)
    asked = await _ask(sock, token, "Summarise the board")
    assert asked["ok"], asked
    card = asked["result"]["confirm"]
    assert card["text"] == "Summarise the board"
    assert card["appName"] == "Board" and card["canRemember"] is True
    # Nothing is posted and no turn starts until the member presses Send.
    assert await _posted("Summarise the board") == []
    asks = await _events(AuditEventType.UI_MESSAGE)
    assert asks[-1]["extra"]["confirmation"] == "asked", asks
    assert llm.requests == []

    sent = await _decide(sock, card["proposal"], "send")
    assert sent["ok"] and sent["result"]["sent"] is True, sent
    assert await _posted("Summarise the board") == ["Board (via view)"]
    # The turn the view's message would have started: the model is asked.
    await next_frame(sock, _assistant_message)
    assert "Summarise the board" in llm.requests[0].raw
    rows = await _events(AuditEventType.VIEW_MESSAGE_SENT)
    assert [(r["decision"], r["user"]) for r in rows] == [("approved", personas.owner.pk)]

    # A card is answered once: Send again is refused (audited), nothing more is posted.
    again = await _decide(sock, card["proposal"], "send", rid="again")
    assert again["ok"] is False and again["error"]["code"] == "already_answered", again
    assert await _posted("Summarise the board") == ["Board (via view)"]
    refused = await _events(AuditEventType.VIEW_MESSAGE_REFUSED)
    assert [r["reason"] for r in refused] == ["already_answered"]
    await sock.disconnect()


async def test_dismiss_posts_nothing_and_is_audited(
    personas, board_server, model_workspace, llm, ws_connect
):
    sock, token = await _view(ws_connect, personas.owner, personas.thread)
    card = (await _ask(sock, token, "Do not send this"))["result"]["confirm"]
    dismissed = await _decide(sock, card["proposal"], "dismiss")
    assert dismissed["ok"] and dismissed["result"]["sent"] is False, dismissed
    assert await _posted("Do not send this") == []
    rows = await _events(AuditEventType.VIEW_MESSAGE_DISMISSED)
    assert [r["decision"] for r in rows] == ["rejected"]
    late = await _decide(sock, card["proposal"], "send", rid="late")
    assert late["ok"] is False and late["error"]["code"] == "already_answered"
    assert await _posted("Do not send this") == []
    assert llm.requests == []
    await sock.disconnect()


async def test_a_forged_or_foreign_card_is_refused(
    personas, board_server, model_workspace, llm, ws_connect
):
    sock, token = await _view(ws_connect, personas.owner, personas.thread)
    card = (await _ask(sock, token, "Owner's words"))["result"]["confirm"]
    # The text is frozen: a proposal re-signed by anyone else (another key) is refused.
    values = signing.loads(card["proposal"], salt="atrium.view-message-proposal")
    values[5] = "Something else entirely"
    forged = signing.dumps(
        values, salt="atrium.view-message-proposal", key="not-the-key", compress=True
    )
    reply = await _decide(sock, forged, "send", rid="forged")
    assert reply["ok"] is False and reply["error"]["code"] == "invalid_proposal", reply
    # Another member cannot send the owner's card from their own socket.
    member = await open_socket(ws_connect, personas.member, personas.thread)
    reply = await _decide(member, card["proposal"], "send", rid="foreign")
    assert reply["ok"] is False and reply["error"]["code"] == "invalid_proposal", reply
    bad = await _decide(sock, card["proposal"], "maybe", rid="bad")
    assert bad["ok"] is False and bad["error"]["code"] == "invalid_message"
    assert await _posted("Owner's words") == []
    assert await _posted("Something else entirely") == []
    await sock.disconnect()
    await member.disconnect()


async def test_send_is_decided_as_the_member_is_now(
    personas, board_server, model_workspace, llm, ws_connect
):
    from chat import services

    sock, token = await _view(ws_connect, personas.member, personas.thread)
    card = (await _ask(sock, token, "Member's words"))["result"]["confirm"]
    # Demoted to viewer before pressing Send: the role is re-read and the send refused.
    await database_sync_to_async(services.membership_set)(
        workspace=personas.workspace, user=personas.member, role="viewer", actor=personas.owner
    )
    reply = await _decide(sock, card["proposal"], "send")
    assert reply["ok"] is False, reply
    assert await _posted("Member's words") == []
    assert llm.requests == []
    await sock.disconnect()


async def test_always_allow_is_remembered_in_this_thread_only(
    personas, board_server, model_workspace, llm, ws_connect
):
    llm.push(openai_text("First."), openai_text("Second."))
    sock, token = await _view(ws_connect, personas.owner, personas.thread)
    card = (await _ask(sock, token, "First words"))["result"]["confirm"]
    sent = await _decide(sock, card["proposal"], "send", remember=True)
    assert sent["ok"], sent
    allowances = await _events(AuditEventType.ALLOWANCE_CREATED)
    assert [r["extra"].get("kind") for r in allowances] == ["view_messages"]
    # Remembered: the app's next message in this thread is posted at once.
    again = await _ask(sock, token, "Second words", rid="again")
    assert again["ok"] and again["result"] == {}, again
    assert await _posted("Second words") == ["Board (via view)"]

    # Another thread of the workspace: its view still asks.
    other = await database_sync_to_async(factories.ThreadFactory)(
        workspace=personas.workspace, title="Other", actor=personas.owner
    )
    sock2, token2 = await _view(ws_connect, personas.owner, other)
    elsewhere = await _ask(sock2, token2, "Elsewhere")
    assert "confirm" in elsewhere["result"], elsewhere
    await sock.disconnect()
    await sock2.disconnect()


async def test_a_direct_workspace_posts_the_view_message_at_once(
    personas, board_server, ws_connect
):
    """No model, no turn: the message is posted labelled with the app, without a card."""
    sock, token = await _view(ws_connect, personas.owner, personas.thread)
    reply = await _ask(sock, token, "Direct words")
    assert reply["ok"] and reply["result"] == {}, reply
    assert await _posted("Direct words") == ["Board (via view)"]
    await sock.disconnect()
