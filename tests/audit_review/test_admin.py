"""The audit log in the admin (audit_review/admin.py): read-only, event types labelled, and
the rows an event names by id shown by name."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def admin_client(personas) -> Client:
    """Olivia (owner of Acme) is also staff."""
    personas.owner.is_staff = personas.owner.is_superuser = True
    personas.owner.save()
    client = Client()
    client.force_login(personas.owner)
    return client


def test_audit_log_admin_is_read_only_and_labels_event_types(admin_client, personas):
    from audit.models import AuditEvent
    from audit.types import AuditEventType as T

    threads = AuditEvent.objects.filter(event_type=int(T.THREAD_CREATED))
    event = threads.get(thread_id=personas.thread.pk)
    page = admin_client.get("/admin/audit/auditevent/").content.decode()
    assert "Thread created (102)" in page
    filtered = admin_client.get("/admin/audit/auditevent/", {"event_type": "102"})
    assert set(filtered.context["cl"].queryset) == set(threads) and threads.count() == 2
    by_category = admin_client.get("/admin/audit/auditevent/", {"category": "foundation"})
    assert by_category.context["cl"].queryset.count() == AuditEvent.objects.count()
    assert admin_client.get("/admin/audit/auditevent/add/").status_code == 403
    detail = admin_client.get(f"/admin/audit/auditevent/{event.pk}/change/")
    assert detail.status_code == 200 and "Launch plan" in detail.content.decode()
    assert (
        admin_client.post(
            f"/admin/audit/auditevent/{event.pk}/change/", {"reason": "x"}
        ).status_code
        == 403
    )
    assert (
        admin_client.post(
            f"/admin/audit/auditevent/{event.pk}/delete/", {"post": "yes"}
        ).status_code
        == 403
    )
    response = admin_client.post(
        "/admin/audit/auditevent/", {"action": "delete_selected", "_selected_action": [event.pk]}
    )
    assert AuditEvent.objects.filter(pk=event.pk).exists()
    assert response.status_code in (200, 302, 403)


def test_audit_events_are_read_only_in_the_admin(personas):
    from audit.models import AuditEvent

    staff = personas.owner
    staff.is_staff = staff.is_superuser = True
    staff.save()
    client = Client()
    client.force_login(staff)
    event = AuditEvent.objects.first()
    assert event is not None
    change_url = f"/admin/audit/auditevent/{event.pk}/change/"
    assert client.get("/admin/audit/auditevent/").status_code == 200
    assert client.get("/admin/audit/auditevent/add/").status_code == 403
    before = AuditEvent.objects.get(pk=event.pk)
    response = client.post(change_url, {"reason": "tampered", "decision": "denied"})
    assert response.status_code == 403
    assert (
        client.post(f"/admin/audit/auditevent/{event.pk}/delete/", {"post": "yes"}).status_code
        == 403
    )
    after = AuditEvent.objects.get(pk=event.pk)
    assert (after.reason, after.decision) == (before.reason, before.decision)


def test_the_rows_an_event_names_by_id_are_shown_by_name_and_outlive_their_rows(
    admin_client, personas
):
    """The log keeps workspaces, threads, bindings and servers as ids: the admin names them
    (list and filters by name, the event's page links each row) and, once a row is
    deleted, still shows which id the event named."""
    from audit.models import AuditEvent
    from audit.types import AuditEventType, Decision
    from audit.writer import record
    from mcp_bridge.models import McpServer

    server = McpServer.objects.create(name="Ledger", slug="ledger", transport="stdio", command="x")
    gone = McpServer.objects.create(name="Gone", slug="gone", transport="stdio", command="x")
    kept, lost = (
        record(
            event_type=AuditEventType.TOOL_CALL_USER,
            decision=Decision.ALLOWED,
            workspace_id=personas.workspace.pk,
            thread_id=personas.thread.pk,
            server_id=row.pk,
            tool_name="audit_probe",
        )
        for row in (server, gone)
    )
    gone_id = gone.pk
    gone.delete()

    listed = admin_client.get("/admin/audit/auditevent/", {"q": "audit_probe"})
    names = {(r.server_name, r.workspace_name) for r in listed.context["cl"].result_list}
    assert names == {("Ledger", personas.workspace.name), (None, personas.workspace.name)}
    page = listed.content.decode()
    assert "Ledger" in page and f"#{gone_id} (deleted)" in page
    by_server = admin_client.get("/admin/audit/auditevent/", {"server_id": str(server.pk)})
    assert list(by_server.context["cl"].queryset) == [AuditEvent.objects.get(pk=kept.pk)]

    detail = admin_client.get(f"/admin/audit/auditevent/{kept.pk}/change/").content.decode()
    assert f'href="/admin/mcp_bridge/mcpserver/{server.pk}/change/">Ledger</a>' in detail
    assert f'href="/admin/chat/thread/{personas.thread.pk}/change/">' in detail
    detail = admin_client.get(f"/admin/audit/auditevent/{lost.pk}/change/").content.decode()
    assert f"#{gone_id} (deleted)" in detail
