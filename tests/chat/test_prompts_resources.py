"""Prompts and resources of bound servers (issue 25), through the real socket and the real
``@modelcontextprotocol/server-everything`` over stdio; the model is the fake
OpenAI-compatible server. Pure shaping in chat.server_context.content has plain tests."""

from __future__ import annotations

import json
import sys

import pytest
from channels.db import database_sync_to_async

from audit.models import AuditEvent
from audit.types import AuditEventType, Decision
from chat.actions.commands import parse_prompt
from chat.models import Message
from chat.server_context import content
from chat.server_context.models import MessageResource
from tests import factories
from tests.chat.fake_llm import FakeLLM, openai_text
from tests.conftest import next_frame, open_socket
from tests.fixtures import third_party

API_KEY = "sk-test-prompts"
needs_node = pytest.mark.skipif(not third_party.installed(), reason=third_party.SKIP_REASON)


# ---- pure ------------------------------------------------------------------------------


def test_parse_prompt() -> None:
    assert parse_prompt('/prompt everything.args-prompt city="New York" state=NY') == (
        "everything",
        "args-prompt",
        {"city": "New York", "state": "NY"},
    )
    with pytest.raises(ValueError, match="key=value"):
        parse_prompt("/prompt everything.args-prompt Paris")


def test_prompt_items_embedded_resource_becomes_attachment() -> None:
    items = content.prompt_items(
        {
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "Look:"}},
                {
                    "role": "user",
                    "content": {
                        "type": "resource",
                        "resource": {"uri": "demo://x/1", "mimeType": "text/plain", "text": "hi"},
                    },
                },
            ]
        }
    )
    assert len(items) == 1 and items[0].text == "Look:"
    assert [(r.uri, r.text) for r in items[0].resources] == [("demo://x/1", "hi")]


def test_resource_context_is_cut_with_a_note() -> None:
    class Row:
        name, uri, mime_type, binary_size = "big.txt", "demo://big", "text/plain", None
        text = "x" * (content.MODEL_RESOURCE_BUDGET + 500)
        text_chars = len(text)

        class server:  # noqa: N801
            name = "Everything"

    shown = content.resource_context([Row()])
    assert f"of {Row.text_chars:,} characters shown" in shown
    assert len(shown) < content.MODEL_RESOURCE_BUDGET + 400


def test_ui_resources_are_not_attachable() -> None:
    assert content.is_ui_resource("ui://board/view.html")
    assert not content.is_ui_resource("demo://resource/static/document/features.md")


# ---- through the socket ------------------------------------------------------------------


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
def everything(personas):
    command, *args = third_party.SERVERS["everything"].command("stdio")
    server = factories.McpServerFactory(
        name="Everything", slug="everything", command=command, args=args
    )
    factories.AppBindingFactory(server=server, workspace=personas.workspace)
    return server


@pytest.fixture
def model_workspace(personas, llm):
    workspace = personas.workspace
    workspace.provider = "openai"
    workspace.model = "fake-model"
    workspace.provider_base_url = llm.base_url
    workspace.provider_api_key = API_KEY
    workspace.save()
    return workspace


async def _ask(communicator, payload: dict, rid: str) -> dict:
    await communicator.send_json_to({**payload, "rid": rid})
    return await next_frame(
        communicator, lambda f: f.get("type") == "reply" and f.get("rid") == rid, timeout=60
    )


def _message_event(predicate):
    def match(frame) -> bool:
        return (
            frame.get("type") == "event"
            and frame.get("kind") == "message"
            and predicate(frame["data"])
        )

    return match


@needs_node
@pytest.mark.django_db(transaction=True)
async def test_prompt_listed_completed_and_posted(personas, everything, ws_connect) -> None:
    ws = await open_socket(ws_connect, personas.member, personas.thread)
    listed = await _ask(ws, {"type": "prompts.list"}, "l1")
    names = {p["name"] for p in listed["result"]["prompts"]}
    assert {"simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"} <= names

    completed = await _ask(
        ws,
        {
            "type": "context.complete",
            "server": "everything",
            "ref": {"type": "ref/prompt", "name": "completable-prompt"},
            "argument": {"name": "name", "value": ""},
            "context": {"department": "Sales"},
        },
        "c1",
    )
    assert completed["result"]["values"] == ["David", "Eve", "Frank"]

    used = await _ask(
        ws,
        {
            "type": "prompt.use",
            "server": "everything",
            "name": "resource-prompt",
            "arguments": {"resourceType": "Text", "resourceId": "7"},
        },
        "u1",
    )
    assert used["ok"], used
    event = await next_frame(ws, _message_event(lambda m: m["resources"]), timeout=30)
    message = event["data"]
    assert message["author"]["id"] == personas.member.pk
    assert message["authorLabel"] == "prompt everything.resource-prompt"
    assert message["resources"][0]["uri"] == "demo://resource/dynamic/text/7"
    row = await database_sync_to_async(
        AuditEvent.objects.filter(event_type=AuditEventType.PROMPT_USED).get
    )()
    assert row.extra["prompt"] == "resource-prompt" and row.actor_user_id == personas.member.pk


@needs_node
@pytest.mark.django_db(transaction=True)
async def test_slash_prompt_posts_and_viewer_is_refused(personas, everything, ws_connect) -> None:
    ws = await open_socket(ws_connect, personas.member, personas.thread)
    await ws.send_json_to(
        {
            "type": "message.post",
            "text": '/prompt everything.args-prompt city="New York"',
            "rid": "p",
        }
    )
    event = await next_frame(
        ws, _message_event(lambda m: m["text"] == "What's weather in New York?"), timeout=60
    )
    assert event["data"]["authorLabel"] == "prompt everything.args-prompt"

    viewer = await open_socket(ws_connect, personas.viewer, personas.thread)
    refused = await _ask(
        viewer, {"type": "prompt.use", "server": "everything", "name": "simple-prompt"}, "v1"
    )
    assert refused["ok"] is False and refused["error"]["code"] == "viewer_cannot_act"
    assert await database_sync_to_async(
        AuditEvent.objects.filter(
            event_type=AuditEventType.PROMPT_REFUSED, decision=Decision.DENIED
        ).exists
    )()


@pytest.fixture
def loose_server():
    return factories.McpServerFactory(
        name="Loose", slug="loose", command=sys.executable, args=["-V"]
    )


@pytest.mark.django_db(transaction=True)
async def test_unbound_server_prompt_refused(personas, loose_server, ws_connect) -> None:
    ws = await open_socket(ws_connect, personas.member, personas.thread)
    refused = await _ask(ws, {"type": "prompt.use", "server": "loose", "name": "x"}, "n1")
    assert refused["error"]["code"] == "server_not_bound"


@needs_node
@pytest.mark.django_db(transaction=True)
async def test_resource_attached_seen_by_model_and_refreshed(
    personas, everything, model_workspace, llm, ws_connect
) -> None:
    llm.push(openai_text("Read it."))
    ws = await open_socket(ws_connect, personas.member, personas.thread)
    listed = await _ask(ws, {"type": "resources.list"}, "r1")
    entries = listed["result"]["resources"]
    assert any(e.get("uriTemplate") == "demo://resource/dynamic/text/{resourceId}" for e in entries)
    assert not any(str(e.get("uri", "")).startswith("ui://") for e in entries)

    uri = "demo://resource/dynamic/text/3"
    posted = await _ask(
        ws,
        {
            "type": "message.post_resources",
            "text": "Summarise this",
            "resources": [{"server": "everything", "uri": uri}],
        },
        "a1",
    )
    assert posted["ok"], posted
    attached = await next_frame(ws, _message_event(lambda m: m["resources"]), timeout=30)
    assert attached["data"]["resources"][0]["subscribed"] is True
    # The model's request carries the resource's text with the member's message.
    await next_frame(
        ws, _message_event(lambda m: m["role"] == "assistant" and m["status"] == "complete"), 60
    )
    body = json.loads(llm.bodies()[0])
    user_text = "\n".join(
        str(m.get("content")) for m in body["messages"] if m.get("role") == "user"
    )
    assert "Resource 3: This is a plaintext resource" in user_text
    assert "Summarise this" in user_text
    assert await database_sync_to_async(
        AuditEvent.objects.filter(event_type=AuditEventType.RESOURCE_ATTACHED).exists
    )()

    # The server announces updates of subscribed resources: the copy is re-read.
    await _ask(
        ws, {"type": "tool.call", "server": "everything", "tool": "toggle-subscriber-updates"}, "t"
    )
    updated = await next_frame(
        ws, _message_event(lambda m: m["resources"] and m["resources"][0]["updates"] > 0), 60
    )
    assert updated["data"]["resources"][0]["updatedAt"]
    row = await database_sync_to_async(MessageResource.objects.get)()
    assert row.update_count >= 1 and row.text.startswith("Resource 3:")
    assert await database_sync_to_async(Message.objects.filter(pk=row.message_id).exists)()
