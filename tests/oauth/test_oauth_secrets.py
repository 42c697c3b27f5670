"""Tokens never leave the sealed columns: not into logs, thread events, audit rows, the
admin, or the model's requests. A model turn runs the OAuth tool with the grant of the
member whose message started it; a member without a grant gets "connect first", and the
model is told so (in words, never with a token)."""

from __future__ import annotations

import json
import logging

import pytest
from channels.db import database_sync_to_async
from django.core import serializers
from django.test import AsyncClient

from audit.models import AuditEvent
from audit.types import AuditEventType
from chat.models import ThreadEvent
from mcp_bridge.models import AuthMode, McpServer, OAuthGrant
from mcp_bridge.sealing import unseal
from tests.chat.fake_llm import FakeLLM, openai_text, openai_tool_calls
from tests.conftest import open_socket
from tests.oauth.support import TOKEN_PREFIX, authorize_url, callback_path, notes_server

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


@database_sync_to_async
def _setup(personas, url: str, llm: FakeLLM) -> McpServer:
    from bindings.services.bindings import binding_create
    from bindings.services.policies import tool_policy_set

    workspace = personas.workspace
    workspace.provider, workspace.model = "openai", "fake-model"
    workspace.provider_base_url, workspace.provider_api_key = llm.base_url, "sk-test"
    workspace.save()
    server = McpServer.objects.create(
        name="Notes",
        slug="notes",
        transport="streamable_http",
        url=url,
        auth_mode=AuthMode.OAUTH_MEMBER,
    )
    binding = binding_create(server=server, workspace=workspace)
    tool_policy_set(binding=binding, tool_name="my_notes", approval="auto")
    return server


@database_sync_to_async
def _secrets() -> list[str]:
    """Every token and client secret Atrium holds (the needles of the grep)."""
    found = []
    for grant in OAuthGrant.objects.all():
        tokens, client = unseal(grant.sealed_tokens), unseal(grant.sealed_client)
        found += [tokens["access_token"], tokens.get("refresh_token", "")]
        found.append(client.get("client_secret") or "")
    return [value for value in found if value]


@database_sync_to_async
def _dump(model) -> str:
    return serializers.serialize("json", model.objects.all())


async def _turn(communicator, text: str, rid: int, answer: str) -> None:
    await communicator.send_json_to({"type": "message.post", "text": text, "rid": rid})
    for _ in range(400):
        frame = await communicator.receive_json_from(timeout=30)
        data = frame.get("data") or {}
        if (
            frame.get("kind") == "message"
            and data.get("role") == "assistant"
            and data.get("status") == "complete"
            and answer in data.get("text", "")
        ):
            return
    raise AssertionError("the turn never completed")


async def test_no_token_anywhere_and_the_model_is_told_to_connect(
    personas, llm, ws_connect, caplog, capfd
):
    caplog.set_level(logging.DEBUG)
    async with notes_server() as notes:
        server = await _setup(personas, notes.url, llm)
        owner = AsyncClient()
        await owner.aforce_login(personas.owner)
        started = await owner.post(f"/oauth/connect/{server.slug}/")
        callback = await notes.consent(authorize_url(started), "alice")
        assert (await owner.get(callback_path(callback))).status_code == 200

        llm.push(
            openai_tool_calls(("call_a", "notes__my_notes", ["{}"])),
            openai_text("Your notes are in."),
            openai_tool_calls(("call_b", "notes__my_notes", ["{}"])),
            openai_text("Please connect Notes."),
        )
        socket = await open_socket(ws_connect, personas.owner, personas.thread)
        await _turn(socket, "What are my notes?", 1, "Your notes are in.")
        member = await open_socket(ws_connect, personas.member, personas.thread)
        await _turn(member, "And mine?", 2, "Please connect Notes.")

        # The owner's turn ran with her grant; the member's was refused, audited as such.
        authorized = await database_sync_to_async(
            lambda: list(
                AuditEvent.objects.filter(
                    event_type__in=[
                        int(AuditEventType.OAUTH_CALL_AUTHORIZED),
                        int(AuditEventType.OAUTH_AUTHORIZATION_REQUIRED),
                    ]
                ).order_by("pk")
            )
        )()
        assert [(e.event_type, e.actor_user_id) for e in authorized if e.tool_name] == [
            (int(AuditEventType.OAUTH_CALL_AUTHORIZED), personas.owner.pk),
            (int(AuditEventType.OAUTH_AUTHORIZATION_REQUIRED), personas.member.pk),
        ]
        bodies = llm.bodies()
        assert any("Notes of Alice" in body for body in bodies)
        assert any("needs a sign-in" in body for body in bodies[2:])

        # Admin pages an administrator would open.
        staff = AsyncClient()
        personas.owner.is_staff = personas.owner.is_superuser = True
        await database_sync_to_async(personas.owner.save)()
        await staff.aforce_login(personas.owner)
        grant = await database_sync_to_async(OAuthGrant.objects.first)()
        pages = []
        for path in (
            "/admin/mcp_bridge/oauthgrant/",
            f"/admin/mcp_bridge/oauthgrant/{grant.pk}/change/",
            f"/admin/mcp_bridge/mcpserver/{server.pk}/change/",
            "/admin/audit/auditevent/",
        ):
            response = await staff.get(path)
            assert response.status_code == 200, path
            pages.append(response.content.decode())
        assert "olivia" in pages[0]  # who connected is shown...

        needles = await _secrets()
        assert len(needles) >= 2 and all(n.startswith(TOKEN_PREFIX) for n in needles[:2])
        needles.append(TOKEN_PREFIX)  # ...and no token at all, whichever it was
        out, err = capfd.readouterr()
        haystacks = {
            "logs": "\n".join(record.getMessage() for record in caplog.records)
            + caplog.text
            + out
            + err,
            "thread events": await _dump(ThreadEvent),
            "audit rows": await _dump(AuditEvent),
            "admin pages": "\n".join(pages),
            "model requests": json.dumps(bodies),
            "sealed columns": await database_sync_to_async(
                lambda: json.dumps(list(OAuthGrant.objects.values()), default=str)
            )(),
        }
        for where, text in haystacks.items():
            for needle in needles:
                assert needle not in text, f"a token reached the {where}"
