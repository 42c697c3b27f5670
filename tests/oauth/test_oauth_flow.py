"""Signing in to a real OAuth-protected MCP server (examples/oauth_server), end to end
through Atrium's connect and callback views, the SDK's client flow and the gateway."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient

from audit.models import AuditEvent
from audit.types import AuditEventType
from mcp_bridge import gateway
from mcp_bridge.errors import AuthorizationRequired
from mcp_bridge.models import AuthMode, McpServer, OAuthGrant, Tool
from mcp_bridge.services.oauth_grants import grant_disconnect
from tests.conftest import make_user
from tests.oauth.support import TOKEN_PREFIX, authorize_url, callback_path, notes_server
from tests.waiting import apoll, frames_until, next_frame

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@database_sync_to_async
def _setup(url: str, mode: str = AuthMode.OAUTH_MEMBER):
    server = McpServer.objects.create(
        name="Notes", slug="notes", transport="streamable_http", url=url, auth_mode=mode
    )
    return server, make_user("amy"), make_user("ben")


@database_sync_to_async
def _audit(event_type: AuditEventType) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(event_type=int(event_type)).order_by("pk"))


@database_sync_to_async
def _grants() -> list[OAuthGrant]:
    return list(OAuthGrant.objects.select_related("user").order_by("pk"))


async def _tool(server: McpServer, name: str) -> Tool:
    # Loaded after the first sign-in, or here with the grant (whichever comes first).
    return await gateway.tool_for(server, name)


async def _connect(client: AsyncClient, server, notes, account: str) -> str:
    response = await client.post(f"/oauth/connect/{server.slug}/")
    callback = await notes.consent(authorize_url(response), account)
    answer = await client.get(callback_path(callback))
    assert answer.status_code == 200, answer.content
    assert b'data-oauth-result="connected"' in answer.content
    return callback


async def test_members_connect_call_with_their_own_grant_and_lose_it_on_revocation():
    async with notes_server() as notes:
        server, amy, ben = await _setup(notes.url)
        amy_client, ben_client = AsyncClient(), AsyncClient()
        await amy_client.aforce_login(amy)
        await ben_client.aforce_login(ben)

        callback = await _connect(amy_client, server, notes, "alice")
        await _connect(ben_client, server, notes, "bob")

        grants = await _grants()
        assert [g.user.username for g in grants] == ["amy", "ben"]
        # Sealed at rest: no token in the stored columns.
        assert all(TOKEN_PREFIX not in g.sealed_tokens + g.sealed_client for g in grants)
        assert len(await _audit(AuditEventType.OAUTH_CONNECTED)) == 2

        tool = await _tool(server, "my_notes")
        raw, _ = await gateway.call_tool(server, tool, {}, on_behalf_of=amy.pk)
        assert "Notes of Alice" in raw["content"][0]["text"]
        raw, _ = await gateway.call_tool(server, tool, {}, on_behalf_of=ben.pk)
        assert "Notes of Bob" in raw["content"][0]["text"]
        used = await _audit(AuditEventType.OAUTH_CALL_AUTHORIZED)
        assert [e.extra["grant_user_id"] for e in used] == [amy.pk, ben.pk]
        assert all(e.extra["auth_mode"] == "oauth_member" for e in used)

        # The same callback again: refused, audited, nothing changed.
        replay = await amy_client.get(callback_path(callback))
        assert replay.status_code == 400
        assert b"already used" in replay.content
        rejected = await _audit(AuditEventType.OAUTH_CALLBACK_REJECTED)
        assert [e.reason for e in rejected] == ["replayed_state"]
        assert len(await _grants()) == 2

        # The provider revokes Alice's tokens: Amy's next call asks her to connect again.
        await notes.control("revoke?account=alice")
        with pytest.raises(AuthorizationRequired):
            await gateway.call_tool(server, tool, {}, on_behalf_of=amy.pk)
        assert [g.user.username for g in await _grants()] == ["ben"]
        assert len(await _audit(AuditEventType.OAUTH_REFRESH_FAILED)) == 1
        raw, _ = await gateway.call_tool(server, tool, {}, on_behalf_of=ben.pk)
        assert "Notes of Bob" in raw["content"][0]["text"]

        # Someone who never connected gets the same answer, audited as not connected.
        with pytest.raises(AuthorizationRequired):
            await gateway.call_tool(server, tool, {}, on_behalf_of=None)
        assert await _audit(AuditEventType.OAUTH_AUTHORIZATION_REQUIRED)
        await gateway.close_all()


async def test_expired_access_token_is_refreshed_silently():
    # A lifetime shorter than REFRESH_MARGIN_SECONDS: every stored token is due for a
    # refresh when it is next used (no waiting on the clock).
    async with notes_server("--access-ttl", "2") as notes:
        server, amy, _ = await _setup(notes.url)
        client = AsyncClient()
        await client.aforce_login(amy)
        await _connect(client, server, notes, "alice")
        tool = await _tool(server, "my_notes")
        await gateway.close_all()  # the call opens a new connection from the stored grant
        (before,) = await _grants()
        refreshes = (await notes.control("stats"))["refresh_token"]
        raw, _ = await gateway.call_tool(server, tool, {}, on_behalf_of=amy.pk)
        assert "Notes of Alice" in raw["content"][0]["text"]
        assert (await notes.control("stats"))["refresh_token"] > refreshes
        (grant,) = await _grants()
        assert grant.pk == before.pk and grant.sealed_tokens != before.sealed_tokens
        assert not await _audit(AuditEventType.OAUTH_REFRESH_FAILED)
        await gateway.close_all()


async def test_disconnecting_revokes_the_tokens_at_the_provider():
    async with notes_server() as notes:
        server, amy, _ = await _setup(notes.url)
        client = AsyncClient()
        await client.aforce_login(amy)
        await _connect(client, server, notes, "alice")
        assert (await notes.control("stats"))["live"]["alice"] == 2  # access + refresh
        (grant,) = await _grants()
        await database_sync_to_async(grant_disconnect)(grant=grant, actor=amy, reason="admin")
        assert await _grants() == []

        # The revocation runs in the background after the commit. Polled: the fake
        # provider's token counters announce nothing to the test.
        async def revoked() -> bool:
            return (await notes.control("stats"))["live"]["alice"] == 0

        await apoll(revoked, timeout=10, interval=0.1, reason="the provider's live tokens")
        (row,) = await _audit(AuditEventType.OAUTH_DISCONNECTED)
        assert row.reason == "admin" and row.extra["grant_user_id"] == amy.pk


async def test_the_first_call_before_anyone_connected_asks_to_connect(personas, ws_connect):
    """No grant, so no catalogue yet: a /call says "connect", not "no such tool"."""
    from tests.conftest import open_socket

    async with notes_server() as notes:
        server = await database_sync_to_async(McpServer.objects.create)(
            name="Notes",
            slug="notes",
            transport="streamable_http",
            url=notes.url,
            auth_mode=AuthMode.OAUTH_MEMBER,
        )
        from bindings.services.bindings import binding_create

        await database_sync_to_async(binding_create)(server=server, workspace=personas.workspace)
        socket = await open_socket(ws_connect, personas.member, personas.thread)
        await socket.send_json_to(
            {"type": "tool.call", "server": "notes", "tool": "my_notes", "arguments": {}, "rid": 7}
        )
        # Every frame up to the action's reply (the call's events come first).
        frames = await frames_until(
            socket, lambda f: f.get("type") == "reply" and f.get("rid") == 7
        )
        reply = frames[-1]
        assert reply["ok"] and reply["result"]["error"]["code"] == "authorization_required"
        call_id = reply["result"]["toolCallId"]

        def connect_error(frame) -> bool:
            if frame.get("kind") != "toolcall":
                return False
            data = frame["data"]
            error = data.get("error") or {}
            return data["id"] == call_id and error.get("code") == "authorization_required"

        # The thread's events (broadcast on commit) may also follow the reply.
        seen = [f for f in frames if connect_error(f)]
        if not seen:
            seen = [await next_frame(socket, connect_error)]
        (last,) = [f["data"] for f in seen]
        assert last["error"]["details"]["slug"] == "notes"
        await socket.disconnect()
