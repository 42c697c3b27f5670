"""Every way a sign-in can go wrong: a clear message, an audit row, nothing half-stored."""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode, urlparse

import httpx
import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient

from audit.models import AuditEvent
from audit.types import AuditEventType
from mcp_bridge import gateway
from mcp_bridge.errors import AuthorizationRequired
from mcp_bridge.models import AuthMode, McpServer, OAuthAuthorization, OAuthGrant
from tests.conftest import make_user
from tests.oauth.support import authorize_url, callback_path, notes_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@database_sync_to_async
def _setup(url: str):
    server = McpServer.objects.create(
        name="Notes",
        slug="notes",
        transport="streamable_http",
        url=url,
        auth_mode=AuthMode.OAUTH_MEMBER,
    )
    return server, make_user("amy"), make_user("ben")


@database_sync_to_async
def _reasons(event_type: AuditEventType) -> list[str]:
    rows = AuditEvent.objects.filter(event_type=int(event_type)).order_by("pk")
    return [row.reason for row in rows]


@database_sync_to_async
def _stored() -> tuple[int, int]:
    return OAuthGrant.objects.count(), OAuthAuthorization.objects.count()


async def _client(user) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(user)
    return client


async def _refused_at_start(options: tuple[str, ...], expected_text: bytes, reason: str):
    async with notes_server(*options) as notes:
        server, amy, _ = await _setup(notes.url)
        client = await _client(amy)
        response = await client.post(f"/oauth/connect/{server.slug}/")
        assert response.status_code == 502
        assert b'data-oauth-result="failed"' in response.content
        assert expected_text in response.content
        assert await _reasons(AuditEventType.OAUTH_CONNECT_FAILED) == [reason]
        assert await _stored() == (0, 0)


async def test_a_server_without_metadata_is_refused_clearly():
    await _refused_at_start(("--no-metadata",), b"does not publish how to sign in", "no_metadata")


async def test_a_refused_registration_is_refused_clearly():
    await _refused_at_start(
        ("--refuse-registration",), b"refused to register Atrium", "registration_refused"
    )


async def test_metadata_for_another_resource_is_refused_clearly():
    await _refused_at_start(("--other-resource",), b"another resource", "wrong_resource")


async def test_unknown_wrong_user_and_replayed_state_and_replayed_code():
    async with notes_server() as notes:
        server, amy, ben = await _setup(notes.url)
        amy_client, ben_client = await _client(amy), await _client(ben)

        # A state nobody issued.
        bogus = await amy_client.get("/oauth/callback/?" + urlencode({"code": "x", "state": "y"}))
        assert bogus.status_code == 400 and b"unknown" in bogus.content

        # Amy starts; Ben brings her callback: refused, and her sign-in is still usable.
        started = await amy_client.post(f"/oauth/connect/{server.slug}/")
        callback = await notes.consent(authorize_url(started), "alice")
        stolen = await ben_client.get(callback_path(callback))
        assert stolen.status_code == 400 and b"someone else" in stolen.content
        finished = await amy_client.get(callback_path(callback))
        assert finished.status_code == 200
        code = parse_qs(urlparse(callback).query)["code"][0]

        # Ben's own sign-in answered with Amy's (used) code: the provider refuses it.
        started = await ben_client.post(f"/oauth/connect/{server.slug}/")
        state = parse_qs(urlparse(authorize_url(started)).query)["state"][0]
        replayed = await ben_client.get(
            "/oauth/callback/?" + urlencode({"code": code, "state": state})
        )
        assert replayed.status_code == 400 and b"did not accept the sign-in" in replayed.content

        assert await _reasons(AuditEventType.OAUTH_CALLBACK_REJECTED) == [
            "unknown_state",
            "other_user",
        ]
        assert await _reasons(AuditEventType.OAUTH_CONNECT_FAILED) == ["token_refused"]
        grants = await database_sync_to_async(
            lambda: list(OAuthGrant.objects.values_list("user__username", flat=True))
        )()
        assert grants == ["amy"]  # nothing stored for Ben


async def test_consent_denied_at_the_provider():
    async with notes_server() as notes:
        server, amy, _ = await _setup(notes.url)
        client = await _client(amy)
        started = await client.post(f"/oauth/connect/{server.slug}/")
        async with httpx.AsyncClient() as http:
            page = await http.get(authorize_url(started), follow_redirects=True)
            request_id = parse_qs(urlparse(str(page.url)).query)["request"][0]
            answer = await http.post(
                f"{notes.base}/consent", data={"request": request_id, "deny": "1"}
            )
        denied = await client.get(callback_path(answer.headers["location"]))
        assert denied.status_code == 400 and b"cancelled or denied" in denied.content
        assert await _reasons(AuditEventType.OAUTH_CONNECT_FAILED) == ["denied"]
        assert (await _stored())[0] == 0


async def test_an_expired_refresh_token_asks_for_a_new_sign_in():
    async with notes_server("--access-ttl", "2") as notes:
        server, amy, _ = await _setup(notes.url)
        client = await _client(amy)
        started = await client.post(f"/oauth/connect/{server.slug}/")
        callback = await notes.consent(authorize_url(started), "alice")
        assert (await client.get(callback_path(callback))).status_code == 200
        tool = await gateway.tool_for(server, "my_notes")
        await gateway.close_all()  # the call starts from the stored grant
        await notes.control("expire-refresh")
        with pytest.raises(AuthorizationRequired) as raised:
            await gateway.call_tool(server, tool, {}, on_behalf_of=amy.pk)
        assert "Connect" in raised.value.user_message
        assert await _reasons(AuditEventType.OAUTH_REFRESH_FAILED)
        assert (await _stored())[0] == 0
        await gateway.close_all()
