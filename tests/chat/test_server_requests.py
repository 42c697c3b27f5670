"""Server requests to a person (issue 25 part 1): elicitation forms and web pages, through
the real websocket path against the real `asks` example server; the schema checks."""

from __future__ import annotations

import json
import sys
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone

from audit.models import AuditEvent
from audit.types import AuditEventType
from chat.server_requests.schema import SchemaRefused, answer_check, form_fields
from tests import factories
from tests.conftest import ROOT_DIR, next_frame, open_socket, reply_frame, toolcall_event

EXAMPLE = str(ROOT_DIR / "examples" / "asks" / "server.py")
PROFILE = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 5},
        "email": {"type": "string", "format": "email"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150, "default": 30},
        "role": {"type": "string", "oneOf": [{"const": "dev", "title": "Developer"}]},
        "size": {"type": "string", "enum": ["s", "m"], "enumNames": ["Small", "Medium"]},
        "tags": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}]}},
        "when": {"type": "string", "format": "date"},
        "ok": {"type": "boolean", "default": False},
    },
    "required": ["name", "email"],
}


# ---- the schema (pure) -----------------------------------------------------------------


def test_form_fields_read_every_primitive_kind_with_defaults_and_titles() -> None:
    fields = {f["name"]: f for f in form_fields(PROFILE)}
    assert fields["email"]["format"] == "email" and fields["email"]["required"]
    assert fields["age"]["type"] == "integer" and fields["age"]["default"] == 30
    assert fields["role"]["options"] == [{"value": "dev", "title": "Developer"}]
    assert fields["size"]["options"][1] == {"value": "m", "title": "Medium"}
    assert fields["tags"]["type"] == "multi"
    assert fields["ok"]["default"] is False


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"x": {"type": "object", "properties": {}}}},
        {"type": "object", "properties": {"x": {"type": "string", "format": "ipv4"}}},
        {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["y"]},
        {"type": "array"},
        {"type": "object", "properties": {f"f{i}": {"type": "boolean"} for i in range(51)}},
    ],
)
def test_form_fields_refuse_what_is_not_a_flat_primitive_form(schema) -> None:
    with pytest.raises(SchemaRefused):
        form_fields(schema)


def test_answer_check_validates_and_fills_defaults() -> None:
    fields = form_fields(PROFILE)
    clean, problems = answer_check(fields, {"name": "Ana", "email": "ana@example.com"})
    assert problems == []
    assert clean == {"name": "Ana", "email": "ana@example.com", "age": 30, "ok": False}
    _, problems = answer_check(
        fields,
        {
            "name": "Anastasia",
            "email": "nope",
            "age": 3.5,
            "role": "boss",
            "tags": ["a", "z"],
            "when": "31/12/2026",
        },
    )
    assert {p.field for p in problems} == {"name", "email", "age", "role", "tags", "when"}
    _, problems = answer_check(fields, {"email": "a@b.co"})
    assert [p.field for p in problems] == ["name"]


# ---- through the websocket, with the real asks server ---------------------------------

pytestmark_db = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def asks_server(personas):
    server = factories.McpServerFactory(
        name="Asks", slug="asks", command=sys.executable, args=[EXAMPLE], call_timeout=30.0
    )
    binding = factories.AppBindingFactory(server=server, workspace=personas.workspace)
    return server, binding


@pytest.fixture
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


def request_event(status: str | None = None, kind: str | None = None):
    def match(frame) -> bool:
        if frame.get("type") != "event" or frame.get("kind") != "serverrequest":
            return False
        data = frame["data"]
        return (status is None or data["status"] == status) and (
            kind is None or data["kind"] == kind
        )

    return match


def _events(kinds: set[int]) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(event_type__in=kinds).order_by("id"))


async def _send(sock, rid: str, **msg):
    await sock.send_json_to({"rid": rid, **msg})
    return await reply_frame(sock, rid)


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
async def test_a_form_is_answered_by_the_person_the_call_runs_for_only(
    personas, asks_server, ws_connect, close_connections
):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    member = await open_socket(ws_connect, personas.member, personas.thread)
    text_client = await open_socket(ws_connect, personas.viewer, personas.thread, caps="")
    await owner.send_json_to({"type": "message.post", "text": "/call asks.ask_name"})

    seen = await next_frame(member, request_event("pending", "elicitation_form"))
    card = seen["data"]
    assert card["forUser"]["id"] == personas.owner.pk
    assert card["server"]["name"] == "Asks"
    assert [f["name"] for f in card["fields"]] == ["name", "email", "age", "role", "newsletter"]
    assert card["fields"][3]["options"][1] == {"value": "pm", "title": "Product manager"}
    # A text client gets the question as text.
    text = (await next_frame(text_client, request_event("pending")))["data"]["text"]
    assert "Asks asks" in text and "Email: email (required)" in text and "Developer" in text

    # Someone else may not answer (audited); a viewer neither.
    refused = await _send(
        member,
        "m1",
        type="serverrequest.answer",
        requestId=card["id"],
        answer="accept",
        content={"name": "Bob", "email": "bob@example.com"},
    )
    assert not refused["ok"] and refused["error"]["code"] == "forbidden"
    viewer_reply = await _send(
        text_client, "v1", type="serverrequest.answer", requestId=card["id"], answer="decline"
    )
    assert not viewer_reply["ok"]

    # Checked on the server against the schema.
    bad = await _send(
        owner,
        "o1",
        type="serverrequest.answer",
        requestId=card["id"],
        answer="accept",
        content={"name": "Ana", "email": "not-an-address"},
    )
    assert not bad["ok"] and bad["error"]["code"] == "invalid_answer"
    assert bad["error"]["details"]["problems"][0]["field"] == "email"

    ok = await _send(
        owner,
        "o2",
        type="serverrequest.answer",
        requestId=card["id"],
        answer="accept",
        content={"name": "Ana", "email": "ana@example.com", "role": "pm", "newsletter": True},
    )
    assert ok["ok"], ok
    done = await next_frame(member, toolcall_event("success", "ask_name"))
    texts = [p["text"] for p in done["data"]["result"]["parts"] if p["type"] == "text"]
    # The default (age 30, SEP-1034) was sent for the field left empty.
    assert texts == ["Hello Ana <ana@example.com>, 30, product manager, with the newsletter."]

    answered = await next_frame(member, request_event("accepted"), timeout=5) if False else None
    del answered
    rows = await database_sync_to_async(_events)(
        {
            AuditEventType.SERVER_REQUEST_OPENED,
            AuditEventType.SERVER_REQUEST_ANSWERED,
            AuditEventType.SERVER_REQUEST_REFUSED,
        }
    )
    kinds = [(r.event_type, r.decision, r.actor_user_id) for r in rows]
    assert (AuditEventType.SERVER_REQUEST_OPENED, "pending", None) in kinds
    assert (AuditEventType.SERVER_REQUEST_REFUSED, "denied", personas.member.pk) in kinds
    assert (AuditEventType.SERVER_REQUEST_REFUSED, "denied", personas.viewer.pk) in kinds
    answer_row = next(r for r in rows if r.event_type == AuditEventType.SERVER_REQUEST_ANSWERED)
    assert answer_row.actor_user_id == personas.owner.pk and answer_row.decision == "approved"
    assert answer_row.extra["fields"] == ["age", "email", "name", "newsletter", "role"]

    # The values are nowhere: not in the audit log, the stored request or its events.
    from chat.models import ThreadEvent
    from chat.server_requests.models import ServerRequest

    def stored_text() -> str:
        audit = [r.extra for r in AuditEvent.objects.all()]
        events = [e.payload for e in ThreadEvent.objects.filter(kind="serverrequest")]
        requests = [(r.params, r.outcome) for r in ServerRequest.objects.all()]
        return json.dumps([audit, events, requests])

    assert "ana@example.com" not in await database_sync_to_async(stored_text)()
    for sock in (owner, member, text_client):
        await sock.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
async def test_a_declined_form_tells_the_server_and_the_snapshot_keeps_pending_cards(
    personas, asks_server, ws_connect, close_connections
):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "/call asks.ask_name"})
    card = (await next_frame(owner, request_event("pending")))["data"]

    from chat.selectors import thread_snapshot

    snapshot = await database_sync_to_async(thread_snapshot)(thread=personas.thread)
    assert [r["id"] for r in snapshot["serverRequests"] if r["status"] == "pending"] == [card["id"]]
    reply = await _send(
        owner, "d1", type="serverrequest.answer", requestId=card["id"], answer="decline"
    )
    assert reply["ok"]
    done = await next_frame(owner, toolcall_event("success", "ask_name"))
    assert done["data"]["result"]["parts"][0]["text"] == "No answer: the person chose decline."
    snapshot = await database_sync_to_async(thread_snapshot)(thread=personas.thread)
    assert snapshot["serverRequests"][-1]["status"] == "declined"
    await owner.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
async def test_a_url_card_names_the_domain_and_finishing_it_answers_the_server(
    personas, asks_server, ws_connect, close_connections
):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "/call asks.ask_url"})
    card = (await next_frame(owner, request_event("pending", "elicitation_url")))["data"]
    assert card["domain"] == "example.com"
    assert card["url"].startswith("https://example.com/asks/connect?session=asks-connect-")
    assert card["url"] in card["text"]
    reply = await _send(owner, "f1", type="serverrequest.finish", requestId=card["id"])
    assert reply["ok"] and reply["result"]["completed"]
    done = await next_frame(owner, toolcall_event("success", "ask_url"))
    assert done["data"]["result"]["parts"][0]["text"] == "Connected: the page is finished."
    completed = await database_sync_to_async(_events)({AuditEventType.SERVER_REQUEST_COMPLETED})
    assert [r.reason for r in completed] == ["person"]
    await owner.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
async def test_a_call_refused_with_url_elicitation_required_is_retried_once_finished(
    personas, asks_server, ws_connect, close_connections
):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "/call asks.needs_url"})
    card = (await next_frame(owner, request_event("pending", "elicitation_url")))["data"]
    assert card["retriesCall"] is True
    assert card["url"].startswith("https://example.com/asks/setup?session=asks-setup-")
    reply = await _send(owner, "f1", type="serverrequest.finish", requestId=card["id"])
    assert reply["ok"]
    done = await next_frame(owner, toolcall_event("success", "needs_url"))
    assert done["data"]["result"]["parts"][0]["text"].startswith("Set up: the page was finished")
    await owner.disconnect()


@pytest.mark.django_db(transaction=True)
def test_pending_requests_per_thread_are_capped_and_the_refusal_audited(personas) -> None:
    from chat.server_requests.models import ServerRequest
    from chat.server_requests.services import (
        MAX_PENDING_PER_THREAD,
        ServerRequestRefused,
        server_request_open,
    )

    call = factories.ToolCallFactory(
        thread=personas.thread, requested_by=personas.owner, status="running"
    )
    for _ in range(MAX_PENDING_PER_THREAD):
        ServerRequest.objects.create(
            kind="elicitation_form",
            thread=personas.thread,
            workspace_id=personas.workspace.pk,
            tool_call=call,
            server=call.server,
            for_user=personas.owner,
            expires_at=timezone.now() + timedelta(minutes=1),
        )
    with pytest.raises(ServerRequestRefused) as refused:
        server_request_open(
            call_id=call.pk,
            kind="elicitation_form",
            params={"message": "?", "requestedSchema": PROFILE},
            key="k",
            expires_in=60,
        )
    assert refused.value.code == "too_many_pending"
    row = AuditEvent.objects.get(event_type=AuditEventType.SERVER_REQUEST_REFUSED)
    assert row.reason == "too_many_pending" and row.thread_id == personas.thread.pk


@pytest.mark.django_db(transaction=True)
def test_a_schema_that_is_not_a_form_and_a_javascript_url_are_refused(personas) -> None:
    from chat.server_requests.services import ServerRequestRefused, server_request_open

    call = factories.ToolCallFactory(
        thread=personas.thread, requested_by=personas.owner, status="running"
    )
    with pytest.raises(ServerRequestRefused) as form:
        server_request_open(
            call_id=call.pk,
            kind="elicitation_form",
            params={
                "message": "?",
                "requestedSchema": {"type": "object", "properties": {"x": {"type": "object"}}},
            },
            key="k1",
            expires_in=60,
        )
    assert form.value.code == "schema_refused"
    with pytest.raises(ServerRequestRefused) as url:
        server_request_open(
            call_id=call.pk,
            kind="elicitation_url",
            params={
                "message": "?",
                "url": "javascript://example.com/%0aalert(1)",
                "elicitationId": "e",
            },
            key="k2",
            expires_in=60,
        )
    assert url.value.code == "bad_url"
    assert AuditEvent.objects.filter(event_type=AuditEventType.SERVER_REQUEST_REFUSED).count() == 2


# ---- sampling: the consent card, then the workspace's model -------------------------


@pytest.fixture
def model_workspace(personas):
    from tests.chat.fake_llm import FakeLLM

    with FakeLLM("openai") as fake:
        workspace = personas.workspace
        workspace.provider = "openai"
        workspace.model = "fake-model"
        workspace.provider_base_url = fake.base_url
        workspace.provider_api_key = "sk-test-sampling"
        workspace.save()
        yield fake


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
async def test_sampling_asks_consent_once_then_is_allowed_in_the_thread(
    personas, asks_server, model_workspace, ws_connect, close_connections
):
    from tests.chat.fake_llm import openai_text

    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    member = await open_socket(ws_connect, personas.member, personas.thread)
    model_workspace.push(openai_text("Hello from the model"))
    await owner.send_json_to({"type": "message.post", "text": "/call asks.ask_model"})
    card = (await next_frame(member, request_event("pending", "sampling")))["data"]
    assert card["sampling"]["maxTokens"] == 60
    assert card["sampling"]["systemPrompt"] == "Answer in one short line."
    assert card["sampling"]["messages"][0]["content"]["text"] == "Say hello."
    assert not model_workspace.bodies()  # nothing reaches the model before consent
    refused = await _send(
        member, "m1", type="serverrequest.answer", requestId=card["id"], answer="accept"
    )
    assert not refused["ok"]
    ok = await _send(
        owner,
        "o1",
        type="serverrequest.answer",
        requestId=card["id"],
        answer="accept",
        remember="thread",
    )
    assert ok["ok"], ok
    done = await next_frame(owner, toolcall_event("success", "ask_model"))
    assert done["data"]["result"]["parts"][0]["text"] == "The model says: Hello from the model"

    # Allowed in this thread: the next request runs without a card (audited as allowed).
    model_workspace.push(openai_text("Again"))
    await owner.send_json_to({"type": "message.post", "text": "/call asks.ask_model"})
    again = await next_frame(owner, request_event(None, "sampling"))
    assert again["data"]["status"] == "accepted" and again["data"]["outcome"]["allowance"]
    done = await next_frame(owner, toolcall_event("success", "ask_model"))
    assert done["data"]["result"]["parts"][0]["text"] == "The model says: Again"
    granted = await database_sync_to_async(_events)({AuditEventType.SAMPLING_ALLOWANCE_CREATED})
    assert [r.actor_user_id for r in granted] == [personas.owner.pk]
    await owner.disconnect()
    await member.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
async def test_a_rejected_sampling_request_reaches_no_model(
    personas, asks_server, model_workspace, ws_connect, close_connections
):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "/call asks.ask_model"})
    card = (await next_frame(owner, request_event("pending", "sampling")))["data"]
    reply = await _send(
        owner, "o1", type="serverrequest.answer", requestId=card["id"], answer="decline"
    )
    assert reply["ok"]
    done = await next_frame(owner, toolcall_event(None, "ask_model"))
    while done["data"]["status"] == "running":
        done = await next_frame(owner, toolcall_event(None, "ask_model"))
    assert "rejected" in json.dumps(done["data"]).lower()
    assert not model_workspace.bodies()
    await owner.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
async def test_sampling_without_a_model_asks_nobody_and_tells_the_thread(
    personas, asks_server, ws_connect, close_connections
):
    from chat.server_requests.models import ServerRequest

    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "/call asks.ask_model"})
    note = await next_frame(
        owner, lambda f: f.get("kind") == "message" and f["data"].get("role") == "system"
    )
    assert "has no model" in note["data"]["text"]
    done = await next_frame(owner, toolcall_event(None, "ask_model"))
    while done["data"]["status"] == "running":
        done = await next_frame(owner, toolcall_event(None, "ask_model"))
    assert "no model" in json.dumps(done["data"]).lower()
    # No consent card was opened for something that cannot run; the refusal is audited.
    assert not await database_sync_to_async(ServerRequest.objects.exists)()
    refused = await database_sync_to_async(_events)({AuditEventType.SERVER_REQUEST_REFUSED})
    assert [r.reason for r in refused] == ["no_model"]
    await owner.disconnect()


@pytest.mark.django_db(transaction=True)
def test_a_request_left_pending_past_its_time_is_expired_by_the_sweep(personas, settings) -> None:
    from chat import tasks
    from chat.server_requests.models import ServerRequest

    call = factories.ToolCallFactory(
        thread=personas.thread, requested_by=personas.owner, status="running"
    )

    def pending(minutes: int) -> ServerRequest:
        return ServerRequest.objects.create(
            kind="elicitation_form",
            thread=personas.thread,
            workspace_id=personas.workspace.pk,
            tool_call=call,
            server=call.server,
            for_user=personas.owner,
            expires_at=timezone.now() + timedelta(minutes=minutes),
        )

    late, current = pending(-5), pending(5)
    # Celery beat runs the sweep (the web process that waited for the answer may be gone).
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert "chat.tasks.expire_server_requests" in scheduled
    assert tasks.expire_server_requests.apply().get() == 1
    late.refresh_from_db()
    current.refresh_from_db()
    assert (late.status, current.status) == ("expired", "pending")
    row = AuditEvent.objects.get(event_type=AuditEventType.SERVER_REQUEST_EXPIRED)
    assert row.extra["serverRequest"] == late.pk


@pytest.mark.django_db
def test_an_admin_revokes_a_sampling_allowance_and_it_is_audited(personas, admin_client) -> None:
    from chat.server_requests.models import SamplingAllowance
    from chat.server_requests.services import sampling_allowance_for

    server = factories.McpServerFactory()
    allowance = SamplingAllowance.objects.create(
        thread=personas.thread, server=server, granted_by=personas.owner
    )
    assert sampling_allowance_for(thread_id=personas.thread.pk, server_id=server.pk)
    listing = admin_client.get("/admin/chat/samplingallowance/")
    assert listing.status_code == 200 and server.name in listing.content.decode()
    admin_client.post(
        "/admin/chat/samplingallowance/",
        {"action": "revoke_selected", "_selected_action": [allowance.pk]},
    )
    assert sampling_allowance_for(thread_id=personas.thread.pk, server_id=server.pk) is None
    row = AuditEvent.objects.get(event_type=AuditEventType.SAMPLING_ALLOWANCE_REVOKED)
    assert row.extra["allowance"] == allowance.pk and row.thread_id == personas.thread.pk
    assert admin_client.get("/admin/chat/serverrequest/").status_code == 200


@pytest.mark.django_db
def test_a_form_accepted_moments_ago_waits_for_its_values_not_answered_without_them(personas):
    """The waiter may read the row between the answer's commit and the mail carrying the
    form's values: that read must not answer the server with an empty form."""
    from chat.server_requests.models import ServerRequest
    from chat.server_requests.services import request_state

    call = factories.ToolCallFactory(
        thread=personas.thread, requested_by=personas.owner, status="running"
    )
    row = ServerRequest.objects.create(
        kind="elicitation_form",
        thread=personas.thread,
        workspace_id=personas.workspace.pk,
        tool_call=call,
        server=call.server,
        for_user=personas.owner,
        status="accepted",
        decided_at=timezone.now(),
        expires_at=timezone.now() + timedelta(minutes=1),
    )
    assert request_state(request_id=row.pk) is None
    row.decided_at = timezone.now() - timedelta(seconds=30)
    row.save(update_fields=["decided_at"])
    assert request_state(request_id=row.pk)["result"] == {"action": "cancel"}
