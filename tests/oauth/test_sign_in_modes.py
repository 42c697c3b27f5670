"""Every way to sign in (issue 25 part 5), against real servers: the conformance suite's
mock MCP and authorization servers and ``@modelcontextprotocol/server-lazy-auth``; Atrium's
real gateway, connection manager and OAuth sign-in (docs/mcp-client.md, "Signing in")."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from audit.models import AuditEvent
from audit.types import AuditEventType
from mcp_bridge import gateway, oauth
from mcp_bridge.errors import AuthorizationRequired
from mcp_bridge.models import AuthMode, McpServer, OAuthGrant, Tool
from tests.conftest import make_user
from tests.oauth.sign_in_support import (
    LAZY_AUTH,
    NODE22,
    SUITE,
    allow_loopback,
    conformance_mock,
    lazy_auth_server,
    scope_of,
    sign_in,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
needs_suite = pytest.mark.skipif(
    not (SUITE.exists() and NODE22.exists()), reason="run tools/install-conformance.sh"
)
needs_lazy_auth = pytest.mark.skipif(
    not LAZY_AUTH.exists(), reason="run tools/install-mcp-servers.sh (make test does)"
)


@database_sync_to_async
def _server(url: str, mode: str = AuthMode.OAUTH_MEMBER, **fields) -> McpServer:
    return McpServer.objects.create(
        name="Guarded",
        slug="guarded",
        transport="streamable_http",
        url=url,
        auth_mode=mode,
        **fields,
    )


@database_sync_to_async
def _user(name: str):
    return make_user(name)


@database_sync_to_async
def _audit(event_type: AuditEventType) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(event_type=int(event_type)).order_by("pk"))


@database_sync_to_async
def _grants() -> list[OAuthGrant]:
    return list(OAuthGrant.objects.order_by("pk"))


@database_sync_to_async
def _tool_names(server: McpServer) -> list[str]:
    return list(Tool.objects.filter(server=server, present=True).values_list("name", flat=True))


@needs_suite
async def test_scope_step_up_keeps_the_grant_and_the_next_sign_in_asks_for_the_union(
    monkeypatch,
):
    allow_loopback(monkeypatch)
    async with conformance_mock("auth/scope-step-up") as mock:
        server, amy = await _server(mock.url), await _user("amy")
        with pytest.raises(AuthorizationRequired):
            await gateway.refresh_catalogue(server)  # nobody signed in: the server says 401
        first_url = await sign_in(server, amy)
        await gateway.refresh_catalogue(server)
        [grant] = await _grants()
        tool = await gateway.tool_for(server, (await _tool_names(server))[0])

        # The tool needs more scope: a distinct error, the grant kept, the true reason.
        with pytest.raises(AuthorizationRequired) as raised:
            await gateway.call_tool(server, tool, {}, on_behalf_of=amy.pk)
        assert raised.value.details["reason"] == "insufficient_scope"
        assert "needs more access" in raised.value.user_message
        [kept] = await _grants()
        assert kept.pk == grant.pk
        wanted = set(kept.wanted_scope.split())
        assert wanted > scope_of(first_url)  # the union: what it had and what it needs
        [step_up] = await _audit(AuditEventType.OAUTH_SCOPE_STEP_UP)
        assert step_up.reason == "insufficient_scope"
        assert set(step_up.extra["wanted_scope"].split()) == wanted
        assert not await _audit(AuditEventType.OAUTH_REFRESH_FAILED)

        # Connect again: the union is asked for, and the call then runs.
        second_url = await sign_in(server, amy)
        assert scope_of(second_url) == wanted
        raw, _ = await gateway.call_tool(server, tool, {}, on_behalf_of=amy.pk)
        assert not raw.get("isError"), raw
        [replaced] = await _grants()
        assert replaced.wanted_scope == ""
        await gateway.close_all()
    assert mock.checks and set(mock.checks.values()) == {"SUCCESS"}, mock.checks


@needs_suite
async def test_a_sign_in_failure_is_audited_with_its_true_reason(monkeypatch):
    # The 2025-03-26 back-compat mock publishes authorization server metadata whose issuer
    # is not its own origin: that is what Atrium says, not "publishes no way to sign in".
    allow_loopback(monkeypatch)
    async with conformance_mock("auth/2025-03-26-oauth-metadata-backcompat") as mock:
        server, amy = await _server(mock.url), await _user("amy")
        with pytest.raises(oauth.ConnectFailed, match="names another issuer"):
            await oauth.start_connect(server=server, user=amy, shared=False)
    [failed] = await _audit(AuditEventType.OAUTH_CONNECT_FAILED)
    assert failed.reason == "wrong_issuer"


@needs_suite
async def test_machine_to_machine_credentials_refused_are_audited(monkeypatch):
    allow_loopback(monkeypatch)
    async with conformance_mock("auth/client-credentials-basic") as mock:
        client = {"client_id": "atrium-machine", "client_secret": "not-the-secret"}
        server = await _server(mock.url, AuthMode.OAUTH_MACHINE, oauth_client=client)
        with pytest.raises(Exception):  # noqa: B017 - the connection fails; the audit says why
            await gateway.refresh_catalogue(server)
        await gateway.close_all()
    [failed] = await _audit(AuditEventType.OAUTH_MACHINE_TOKEN_FAILED)
    assert failed.reason.startswith("token endpoint answered 4")
    assert "not-the-secret" not in str(failed.extra) + failed.reason


@needs_lazy_auth
async def test_sign_in_on_demand_public_tools_before_anyone_connects(settings):
    # The lazy-auth server lists its tools to anyone and answers 401 only on protected
    # tools; its authorization server refuses dynamic registration and takes client ID
    # metadata documents (Atrium's, served at an https URL).
    settings.ATRIUM_OAUTH_CLIENT_METADATA_URL = "https://atrium.example/oauth/client-metadata.json"
    async with lazy_auth_server() as url:
        server, amy = await _server(url), await _user("amy")
        await gateway.refresh_catalogue(server)  # no grant: read all the same
        names = await _tool_names(server)
        assert {"show_auth_button", "get_secret"} <= set(names)

        public = await gateway.tool_for(server, "show_auth_button")
        raw, _ = await gateway.call_tool(server, public, {}, on_behalf_of=amy.pk)
        assert not raw.get("isError"), raw
        [tried] = await _audit(AuditEventType.OAUTH_CALL_WITHOUT_GRANT)
        assert (tried.actor_user_id, tried.tool_name) == (amy.pk, "show_auth_button")

        protected = await gateway.tool_for(server, "get_secret")
        with pytest.raises(AuthorizationRequired) as raised:
            await gateway.call_tool(server, protected, {}, on_behalf_of=amy.pk)
        assert raised.value.details["reason"] == "server_asked_for_sign_in"
        [asked] = await _audit(AuditEventType.OAUTH_AUTHORIZATION_REQUIRED)
        assert (asked.reason, asked.tool_name) == ("server_asked_for_sign_in", "get_secret")

        # Connect works although a ping is answered (no 401): the server's protected
        # resource metadata says how; Atrium's client id is its metadata document URL.
        authorize_url = await sign_in(server, amy, approve_link=True)
        assert "client_id=https%3A%2F%2Fatrium.example%2Foauth%2Fclient-metadata.json" in (
            authorize_url
        )
        raw, _ = await gateway.call_tool(server, protected, {}, on_behalf_of=amy.pk)
        assert not raw.get("isError"), raw
        await gateway.close_all()


def test_client_metadata_document_is_served_over_https_only(settings, client):
    settings.ATRIUM_APP_ORIGIN = "https://atrium.example"
    settings.ATRIUM_OAUTH_CLIENT_METADATA_URL = ""
    answer = client.get("/oauth/client-metadata.json")
    assert answer.status_code == 200, answer.content
    document = answer.json()
    assert document["client_id"] == "https://atrium.example/oauth/client-metadata.json"
    assert document["redirect_uris"] == ["https://atrium.example/oauth/callback/"]
    assert document["token_endpoint_auth_method"] == "none"
    assert "authorization_code" in document["grant_types"]

    settings.ATRIUM_APP_ORIGIN = "http://localhost:8000"
    assert client.get("/oauth/client-metadata.json").status_code == 404
    assert oauth.client_metadata_url() is None  # then dynamic registration


def test_a_pre_registered_client_is_sealed_and_never_shown_back(client):
    admin = make_user("root", staff=True)
    admin.is_superuser = True
    admin.save()
    server = McpServer.objects.create(
        name="Corp", slug="corp", transport="streamable_http", url="https://mcp.corp.example/mcp"
    )
    client.force_login(admin)
    page = client.get(f"/admin/mcp_bridge/mcpserver/{server.pk}/change/")
    assert page.status_code == 200
    form = {
        "name": "Corp",
        "slug": "corp",
        "transport": "streamable_http",
        "url": "https://mcp.corp.example/mcp",
        "args": "[]",
        "auth_mode": AuthMode.OAUTH_MEMBER,
        "enabled": "on",
        "call_timeout": "60",
        "connect_timeout": "20",
        "oauth_client_id": "corp-client-7",
        "oauth_client_secret": "s3cret-corp-value",
        "oauth_token_auth": "client_secret_post",
        "tools-TOTAL_FORMS": "0",
        "tools-INITIAL_FORMS": "0",
    }
    saved = client.post(f"/admin/mcp_bridge/mcpserver/{server.pk}/change/", form)
    assert saved.status_code == 302, saved.content.decode()[-3000:]
    server.refresh_from_db()
    assert server.oauth_client == {
        "client_id": "corp-client-7",
        "client_secret": "s3cret-corp-value",
    }
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT oauth_client FROM mcp_bridge_mcpserver WHERE id = %s", [server.pk])
        (raw,) = cursor.fetchone()
    assert "s3cret" not in raw and "corp-client-7" not in raw  # sealed at rest

    page = client.get(f"/admin/mcp_bridge/mcpserver/{server.pk}/change/").content.decode()
    assert "s3cret-corp-value" not in page and "corp-client-7" not in page
    assert "One is stored" in page
    changed = AuditEvent.objects.filter(event_type=int(AuditEventType.SERVER_CHANGED)).last()
    assert changed is not None and "oauth_client" in changed.extra["changed"]
    assert "s3cret" not in str(changed.extra)

    # Left empty, the stored client stays; the sign-in uses it (no registration).
    client.post(
        f"/admin/mcp_bridge/mcpserver/{server.pk}/change/",
        {**form, "oauth_client_id": "", "oauth_client_secret": ""},
    )
    server.refresh_from_db()
    registered = oauth.preregistered_client(server)
    assert registered is not None
    assert (registered.client_id, registered.client_secret) == (
        "corp-client-7",
        "s3cret-corp-value",
    )
    assert registered.token_endpoint_auth_method == "client_secret_post"
