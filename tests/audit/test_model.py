"""The audit log's model: append-only in the ORM and in the database, in the audit app,
on the table it had in bindings."""

from __future__ import annotations

import os

import pytest


@pytest.mark.django_db
def test_audit_rows_cannot_be_changed_or_deleted_through_the_orm(personas):
    from audit.models import AuditEvent

    event = AuditEvent.objects.first()
    event.reason = "tampered"
    with pytest.raises(PermissionError):
        event.save()
    with pytest.raises(PermissionError):
        event.delete()
    with pytest.raises(PermissionError):
        AuditEvent.objects.filter(pk=event.pk).update(reason="x")
    with pytest.raises(PermissionError):
        AuditEvent.objects.all().delete()


@pytest.mark.django_db
def test_the_database_refuses_to_update_audit_rows_even_in_raw_sql(personas):
    from django.db import DatabaseError, connection, transaction

    from audit.models import AuditEvent

    event = AuditEvent.objects.first()
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            "UPDATE bindings_auditevent SET reason = %s WHERE id = %s", ["tampered", event.pk]
        )
    assert AuditEvent.objects.get(pk=event.pk).reason == event.reason


@pytest.mark.django_db
@pytest.mark.skipif(
    os.environ.get("ATRIUM_PROFILE") != "production",
    reason="SQLite keeps DELETE possible (Django flushes SQLite tables with DELETE); "
    "the production profile's PostgreSQL refuses it",
)
def test_postgresql_refuses_to_delete_audit_rows_even_in_raw_sql(personas):
    from django.db import DatabaseError, connection, transaction

    from audit.models import AuditEvent

    count = AuditEvent.objects.count()
    assert count > 0
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("DELETE FROM bindings_auditevent")
    assert AuditEvent.objects.count() == count


@pytest.mark.django_db
def test_audit_event_model_lives_in_audit_and_keeps_its_table():
    from audit.models import AuditEvent

    assert AuditEvent._meta.app_label == "audit"
    assert AuditEvent._meta.db_table == "bindings_auditevent"
