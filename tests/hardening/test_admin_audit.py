"""Issue 23, F6: admin edits write audit rows, through the real admin over HTTP.

Memberships and roles (the membership admin and the workspace's inline), the workspace's
provider settings (never the key's value in the audit), deletes of threads and
workspaces go through the audited services; messages, tool calls and media assets are
viewable and never changed from the admin. A member removed in the admin loses their open
socket at once.
"""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from tests import factories
from tests.conftest import make_user, open_socket

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def admin_client(personas) -> Client:
    """Olivia (owner of Acme) is also a superuser."""
    personas.owner.is_staff = personas.owner.is_superuser = True
    personas.owner.save()
    client = Client()
    client.force_login(personas.owner)
    return client


def _events(event_type, **filters) -> list:
    from audit.models import AuditEvent

    rows = AuditEvent.objects.filter(event_type=int(event_type), **filters)
    return list(rows.order_by("id"))


def _membership(personas, user):
    from chat.models import Membership

    return Membership.objects.filter(workspace=personas.workspace, user=user).first()


def _ok(response) -> None:
    assert response.status_code == 302, response.content.decode()[:3000]


# ---- memberships and roles ------------------------------------------------------------------


def test_membership_add_role_change_and_remove_in_the_membership_admin_are_audited(
    admin_client, personas
):
    from audit.types import AuditEventType as T

    newcomer = make_user("nina")
    _ok(
        admin_client.post(
            "/admin/chat/membership/add/",
            {"workspace": personas.workspace.pk, "user": newcomer.pk, "role": "viewer"},
        )
    )
    membership = _membership(personas, newcomer)
    assert membership.role == "viewer"
    (added,) = _events(T.MEMBERSHIP_CHANGED, actor_user_id=personas.owner.pk)
    assert added.extra == {"user_id": newcomer.pk, "role": "viewer", "previous_role": None}

    # The person and the workspace of a membership are not re-pointed: only its role.
    url = f"/admin/chat/membership/{membership.pk}/change/"
    _ok(
        admin_client.post(
            url, {"workspace": personas.other_workspace.pk, "user": personas.owner.pk,
                  "role": "member"}
        )
    )  # fmt: skip
    membership.refresh_from_db()
    assert (membership.workspace_id, membership.user_id, membership.role) == (
        personas.workspace.pk,
        newcomer.pk,
        "member",
    )
    changed = _events(T.MEMBERSHIP_CHANGED)[-1]
    assert changed.extra == {"user_id": newcomer.pk, "role": "member", "previous_role": "viewer"}

    _ok(admin_client.post(f"/admin/chat/membership/{membership.pk}/delete/", {"post": "yes"}))
    assert _membership(personas, newcomer) is None
    (removed,) = _events(T.MEMBERSHIP_REMOVED)
    assert removed.actor_user_id == personas.owner.pk
    assert removed.workspace_id == personas.workspace.pk
    assert removed.extra == {"user_id": newcomer.pk, "role": "member"}

    # Bulk removal: one row per membership.
    _ok(
        admin_client.post(
            "/admin/chat/membership/",
            {
                "action": "delete_selected",
                "_selected_action": [
                    _membership(personas, personas.member).pk,
                    _membership(personas, personas.viewer).pk,
                ],
                "post": "yes",
            },
        )
    )
    users = sorted(e.extra["user_id"] for e in _events(T.MEMBERSHIP_REMOVED)[1:])
    assert users == sorted([personas.member.pk, personas.viewer.pk])


def _workspace_form(workspace, memberships, **fields) -> dict:
    data = {
        "name": workspace.name,
        "slug": workspace.slug,
        "provider": workspace.provider,
        "model": workspace.model,
        "provider_base_url": workspace.provider_base_url,
        "provider_api_key": "",
        "system_prompt": workspace.system_prompt,
        "memberships-TOTAL_FORMS": str(len(memberships)),
        "memberships-INITIAL_FORMS": str(sum(1 for m in memberships if m.get("id"))),
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
    }
    for i, row in enumerate(memberships):
        for key, value in row.items():
            data[f"memberships-{i}-{key}"] = value
        data[f"memberships-{i}-workspace"] = workspace.pk
    data.update(fields)
    return data


def _rows(personas, **changes) -> list[dict]:
    rows = []
    for user in (personas.owner, personas.member, personas.viewer):
        m = _membership(personas, user)
        row = {"id": m.pk, "user": user.pk, "role": m.role}
        row.update(changes.get(user.username, {}))
        rows.append(row)
    return rows


def test_the_workspace_membership_inline_goes_through_the_audited_services(admin_client, personas):
    from audit.types import AuditEventType as T

    newcomer = make_user("nina")
    rows = _rows(personas, marco={"role": "viewer"}, vera={"DELETE": "on"})
    rows.append({"user": newcomer.pk, "role": "member"})
    url = f"/admin/chat/workspace/{personas.workspace.pk}/change/"
    _ok(admin_client.post(url, _workspace_form(personas.workspace, rows)))

    assert _membership(personas, personas.member).role == "viewer"
    assert _membership(personas, personas.viewer) is None
    assert _membership(personas, newcomer).role == "member"
    by_owner = _events(T.MEMBERSHIP_CHANGED, actor_user_id=personas.owner.pk)
    changes = {e.extra["user_id"]: e.extra for e in by_owner}
    assert changes == {
        personas.member.pk: {"user_id": personas.member.pk, "role": "viewer",
                             "previous_role": "member"},
        newcomer.pk: {"user_id": newcomer.pk, "role": "member", "previous_role": None},
    }  # fmt: skip
    (removed,) = _events(T.MEMBERSHIP_REMOVED)
    assert removed.extra == {"user_id": personas.viewer.pk, "role": "viewer"}
    assert removed.actor_user_id == personas.owner.pk
    # Nothing else changed, nothing else audited (the owner's row was left as it was).
    assert not _events(T.WORKSPACE_PROVIDER_CHANGED)


@pytest.mark.django_db(transaction=True)
async def test_a_member_removed_in_the_admin_loses_their_open_socket(
    personas, ws_connect, fast_passwords
):
    from audit.types import AuditEventType as T
    from tests.hardening.test_membership_live import _closed

    def staff_client() -> Client:
        personas.owner.is_staff = personas.owner.is_superuser = True
        personas.owner.save()
        client = Client()
        client.force_login(personas.owner)
        return client

    client = await database_sync_to_async(staff_client)()
    member = await open_socket(ws_connect, personas.member, personas.thread)
    pk = await database_sync_to_async(lambda: _membership(personas, personas.member).pk)()
    response = await database_sync_to_async(client.post)(
        f"/admin/chat/membership/{pk}/delete/", {"post": "yes"}
    )
    _ok(response)
    seen = (await _closed(member))["frames"]
    assert seen[-1]["error"]["code"] == "membership_removed"
    assert await database_sync_to_async(lambda: len(_events(T.MEMBERSHIP_REMOVED)))() == 1
    assert (
        await database_sync_to_async(lambda: len(_events(T.SOCKET_CLOSED_MEMBERSHIP_REMOVED)))()
        == 1
    )


# ---- the workspace's provider ----------------------------------------------------------------


def test_provider_url_and_key_changes_are_audited_without_the_key(admin_client, personas):
    from audit.types import AuditEventType as T
    from chat.models import Workspace

    workspace = personas.workspace
    url = f"/admin/chat/workspace/{workspace.pk}/change/"
    secret = "sk-very-secret-value-123"
    _ok(
        admin_client.post(
            url,
            _workspace_form(
                workspace,
                _rows(personas),
                provider="openai",
                provider_base_url="https://llm.example/v1",
                provider_api_key=secret,
                name="Acme Corp",
            ),
        )
    )
    stored = Workspace.objects.get(pk=workspace.pk)
    assert (stored.name, stored.provider_base_url, stored.provider_api_key) == (
        "Acme Corp",
        "https://llm.example/v1",
        secret,
    )
    (row,) = _events(T.WORKSPACE_PROVIDER_CHANGED)
    assert row.actor_user_id == personas.owner.pk and row.workspace_id == workspace.pk
    assert row.extra["fields"] == ["provider", "provider_base_url", "provider_api_key"]
    assert row.extra["provider_base_url"] == "https://llm.example/v1"
    assert row.extra["previous_base_url"] == ""
    assert row.extra["key_set"] is True
    assert secret not in json.dumps(row.extra) and secret not in str(row.__dict__)

    # An empty key field keeps the key: a name-only edit changes no provider setting.
    stored.refresh_from_db()
    _ok(admin_client.post(url, _workspace_form(stored, _rows(personas), name="Acme")))
    assert len(_events(T.WORKSPACE_PROVIDER_CHANGED)) == 1
    # The name changes are audited as the workspace's settings: both renames, in order.
    renames = [row.extra["name"] for row in _events(T.WORKSPACE_CHANGED)]
    assert renames == [["Acme", "Acme Corp"], ["Acme Corp", "Acme"]], renames
    assert Workspace.objects.get(pk=workspace.pk).provider_api_key == secret

    # Only the key changed: audited as such, still without any value.
    _ok(
        admin_client.post(
            url, _workspace_form(stored, _rows(personas), provider_api_key="sk-rotated-456")
        )
    )
    last = _events(T.WORKSPACE_PROVIDER_CHANGED)[-1]
    assert last.extra["fields"] == ["provider_api_key"]
    assert "sk-rotated-456" not in json.dumps(last.extra) and secret not in json.dumps(last.extra)


def test_a_workspace_added_in_the_admin_is_audited(admin_client, personas):
    from audit.types import AuditEventType as T
    from chat.models import Workspace

    secret = "sk-new-workspace-key"
    data = _workspace_form(
        Workspace(name="Initech", slug="initech"),
        [{"user": personas.member.pk, "role": "owner"}],
        provider="anthropic",
        provider_api_key=secret,
    )
    data.pop("memberships-0-workspace")
    _ok(admin_client.post("/admin/chat/workspace/add/", data))
    created = _events(T.WORKSPACE_CREATED)[-1]
    assert created.actor_user_id == personas.owner.pk
    assert created.extra["name"] == "Initech" and created.extra["provider"] == "anthropic"
    assert created.extra["key_set"] is True and secret not in json.dumps(created.extra)
    owner_row = _events(T.MEMBERSHIP_CHANGED)[-1]
    assert owner_row.workspace_id == created.workspace_id
    assert owner_row.extra["user_id"] == personas.member.pk and owner_row.extra["role"] == "owner"


# ---- records of what happened are read-only --------------------------------------------------


@pytest.mark.parametrize("model", ["message", "toolcall", "mediaasset"])
def test_messages_tool_calls_and_media_are_viewable_but_never_changed(
    admin_client, personas, model
):
    from chat.media.models import MediaAsset
    from chat.models import Message, ToolCall

    if model == "message":
        row = factories.MessageFactory(thread=personas.thread, text="the original")
        fields = {"thread": personas.thread.pk, "role": "user", "text": "rewritten"}
    elif model == "toolcall":
        row = factories.ToolCallFactory(thread=personas.thread)
        other = factories.McpServerFactory(name="Elsewhere", slug="elsewhere", command="x")
        fields = {"thread": personas.thread.pk, "server": other.pk, "tool_name": "rm"}
    else:
        row = factories.MediaAssetFactory(thread=personas.thread)
        fields = {"thread": personas.thread.pk, "kind": "image", "mime_type": "text/html"}
    base = f"/admin/chat/{model}/"
    before = type(row).objects.filter(pk=row.pk).values().get()

    page = admin_client.get(f"{base}{row.pk}/change/")
    assert page.status_code == 200  # viewable
    html = page.content.decode()
    assert 'name="_save"' not in html and "Delete" not in html.split('id="content"')[1]
    assert admin_client.post(f"{base}{row.pk}/change/", fields).status_code == 403
    assert admin_client.get(f"{base}add/").status_code == 403
    assert admin_client.post(f"{base}add/", fields).status_code == 403
    assert admin_client.post(f"{base}{row.pk}/delete/", {"post": "yes"}).status_code == 403
    assert admin_client.get(base).status_code == 200
    bulk = admin_client.post(
        base, {"action": "delete_selected", "_selected_action": [row.pk], "post": "yes"}
    )
    assert bulk.status_code in (200, 302)  # no such action: nothing happens
    assert type(row).objects.filter(pk=row.pk).values().get() == before
    assert {Message, ToolCall, MediaAsset}  # the three models this covers


# ---- deletes ---------------------------------------------------------------------------------


def test_thread_deletes_in_the_admin_are_audited(admin_client, personas):
    from audit.types import AuditEventType as T
    from chat.models import Thread

    factories.MessageFactory(thread=personas.thread)
    second = factories.ThreadFactory(
        workspace=personas.workspace, title="Second", actor=personas.owner
    )
    third = factories.ThreadFactory(
        workspace=personas.workspace, title="Third", actor=personas.owner
    )
    _ok(admin_client.post(f"/admin/chat/thread/{personas.thread.pk}/delete/", {"post": "yes"}))
    (one,) = _events(T.THREAD_DELETED)
    assert one.thread_id == personas.thread.pk and one.workspace_id == personas.workspace.pk
    assert one.actor_user_id == personas.owner.pk
    assert one.extra["title"] == "Launch plan" and one.extra["messages"] == 1
    _ok(
        admin_client.post(
            "/admin/chat/thread/",
            {"action": "delete_selected", "_selected_action": [second.pk, third.pk],
             "post": "yes"},
        )
    )  # fmt: skip
    assert sorted(e.thread_id for e in _events(T.THREAD_DELETED)[1:]) == sorted(
        [second.pk, third.pk]
    )
    assert not Thread.objects.filter(workspace=personas.workspace).exists()


def test_workspace_deletes_in_the_admin_are_audited(admin_client, personas):
    from audit.types import AuditEventType as T
    from chat.models import Workspace

    _ok(
        admin_client.post(f"/admin/chat/workspace/{personas.workspace.pk}/delete/", {"post": "yes"})
    )
    (row,) = _events(T.WORKSPACE_DELETED)
    assert row.workspace_id == personas.workspace.pk and row.actor_user_id == personas.owner.pk
    assert row.extra == {"name": "Acme", "slug": personas.workspace.slug, "threads": 1,
                         "members": 3}  # fmt: skip
    _ok(
        admin_client.post(
            "/admin/chat/workspace/",
            {"action": "delete_selected", "_selected_action": [personas.other_workspace.pk],
             "post": "yes"},
        )
    )  # fmt: skip
    assert [e.workspace_id for e in _events(T.WORKSPACE_DELETED)] == [
        personas.workspace.pk,
        personas.other_workspace.pk,
    ]
    assert not Workspace.objects.exists()
