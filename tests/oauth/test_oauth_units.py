"""Sealing and key rotation, grant lifecycle services, admin Disconnect, member departure."""

from __future__ import annotations

from io import StringIO

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.test import Client, override_settings

from audit.models import AuditEvent
from audit.types import AuditEventType
from chat.models import Membership
from mcp_bridge.models import AuthMode, McpServer, OAuthGrant
from mcp_bridge.sealing import derived_key, seal, unseal
from mcp_bridge.services.oauth_grants import grant_connect, grant_for
from mcp_bridge.services.servers import ServerConfigError, server_add
from tests.conftest import make_user

SECRET = {"access_token": "atrium-oauth-sentinel-unit", "refresh_token": "r"}


def test_sealed_values_round_trip_and_hide_their_content():
    sealed = seal(SECRET)
    assert "sentinel" not in sealed
    assert unseal(sealed) == SECRET
    assert unseal("") is None
    assert unseal("not a fernet token") is None


def test_the_default_key_is_derived_from_the_secret_key_and_stable():
    assert derived_key("a") == derived_key("a") != derived_key("b")
    Fernet(derived_key("a"))  # a valid Fernet key


def test_rotation_new_key_first_reads_old_values_and_reseal_moves_them():
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    with override_settings(ATRIUM_OAUTH_KEYS=[old]):
        sealed = seal(SECRET)
    with override_settings(ATRIUM_OAUTH_KEYS=[new]):
        assert unseal(sealed) is None  # the old key is gone: unreadable, never an error
    with override_settings(ATRIUM_OAUTH_KEYS=[new, old]):
        assert unseal(sealed) == SECRET
        from mcp_bridge.sealing import reseal

        moved = reseal(sealed)
    with override_settings(ATRIUM_OAUTH_KEYS=[new]):
        assert unseal(moved) == SECRET


def _server(mode=AuthMode.OAUTH_MEMBER, slug: str = "notes") -> McpServer:
    return McpServer.objects.create(
        name="Notes", slug=slug, transport="streamable_http", url="http://x/mcp", auth_mode=mode
    )


def _grant(server, user, *, shared=False) -> OAuthGrant:
    return grant_connect(
        server=server,
        user=user,
        shared=shared,
        client_info={"client_id": "c", "client_secret": "s"},
        tokens=SECRET,
        expires_at=None,
    )


@pytest.mark.django_db
def test_reseal_command_reencrypts_every_grant():
    user = make_user("amy")
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    with override_settings(ATRIUM_OAUTH_KEYS=[old]):
        _grant(_server(), user)
    with override_settings(ATRIUM_OAUTH_KEYS=[new, old]):
        out = StringIO()
        call_command("mcp", "reseal-grants", stdout=out)
        assert "Resealed 1" in out.getvalue()
    with override_settings(ATRIUM_OAUTH_KEYS=[new]):
        assert unseal(OAuthGrant.objects.get().sealed_tokens) == SECRET


@pytest.mark.django_db
def test_connect_replaces_the_owners_grant_and_grant_for_picks_whose():
    amy, ben = make_user("amy"), make_user("ben")
    server = _server()
    first = _grant(server, amy)
    second = _grant(server, amy)
    _grant(server, ben)
    assert not OAuthGrant.objects.filter(pk=first.pk).exists()
    assert grant_for(server=server, user_id=amy.pk).pk == second.pk
    assert grant_for(server=server, user_id=make_user("cy").pk) is None
    shared = _server(AuthMode.OAUTH_SHARED, slug="shared")
    grant = _grant(shared, amy, shared=True)
    assert grant.user_id is None and grant.connected_by_id == amy.pk
    assert grant_for(server=shared, user_id=ben.pk).pk == grant.pk
    rows = AuditEvent.objects.filter(event_type=int(AuditEventType.OAUTH_CONNECTED))
    assert rows.count() == 4
    assert "client_secret" not in str(list(rows.values()))


@pytest.mark.django_db
def test_leaving_a_workspace_disconnects_the_members_own_grants(personas):
    server = _server()
    _grant(server, personas.member)
    shared = McpServer.objects.create(
        name="Shared",
        slug="shared",
        transport="streamable_http",
        url="http://y/mcp",
        auth_mode=AuthMode.OAUTH_SHARED,
    )
    _grant(shared, personas.member, shared=True)
    Membership.objects.filter(user=personas.member, workspace=personas.workspace).delete()
    assert list(OAuthGrant.objects.values_list("server__slug", flat=True)) == ["shared"]
    (row,) = AuditEvent.objects.filter(event_type=int(AuditEventType.OAUTH_DISCONNECTED))
    assert row.reason == "left_workspace" and row.extra["grant_user_id"] == personas.member.pk


@pytest.mark.django_db
def test_admin_lists_grants_without_secrets_and_disconnects_them():
    admin_user = make_user("root", staff=True)
    amy = make_user("amy")
    server = _server()
    grant = _grant(server, amy)
    client = Client()
    client.force_login(admin_user)
    listing = client.get("/admin/mcp_bridge/oauthgrant/").content.decode()
    assert "amy" in listing and grant.sealed_tokens not in listing
    page = client.get(f"/admin/mcp_bridge/mcpserver/{server.pk}/change/").content.decode()
    assert "Connect my account" in page and "1 member(s) connected" in page
    response = client.post(
        "/admin/mcp_bridge/oauthgrant/",
        {"action": "disconnect", "_selected_action": [grant.pk]},
        follow=True,
    )
    assert "Disconnected 1 grant" in response.content.decode()
    assert not OAuthGrant.objects.exists()
    (row,) = AuditEvent.objects.filter(event_type=int(AuditEventType.OAUTH_DISCONNECTED))
    assert row.reason == "admin" and row.actor_user_id == admin_user.pk


@pytest.mark.django_db
def test_removing_a_server_disconnects_its_grants_audited():
    admin_user = make_user("root", staff=True)
    server = _server()
    _grant(server, make_user("amy"))
    client = Client()
    client.force_login(admin_user)
    client.post(f"/admin/mcp_bridge/mcpserver/{server.pk}/delete/", {"post": "yes"})
    assert not McpServer.objects.exists() and not OAuthGrant.objects.exists()
    reasons = AuditEvent.objects.filter(event_type=int(AuditEventType.OAUTH_DISCONNECTED))
    assert list(reasons.values_list("reason", flat=True)) == ["server_removed"]


@pytest.mark.django_db
def test_oauth_needs_an_http_server_and_shared_sign_in_needs_staff():
    with pytest.raises(ServerConfigError, match="HTTP server"):
        server_add(name="S", transport="stdio", command="x", auth_mode="oauth_member")
    with pytest.raises(ServerConfigError, match="Unknown auth mode"):
        server_add(name="S", transport="stdio", command="x", auth_mode="magic")
    _server(AuthMode.OAUTH_SHARED)
    client = Client()
    client.force_login(make_user("amy"))
    response = client.post("/oauth/connect/notes/")
    assert response.status_code == 403
    assert b"Only an administrator" in response.content
    assert client.post("/oauth/connect/nope/").status_code == 404
    anonymous = Client().post("/oauth/connect/notes/")
    assert anonymous.status_code == 403
