"""Host routing, the read-only audit admin, and deploy checks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

ROOT = Path(__file__).resolve().parents[2]
SANDBOX_HOST = "127.0.0.1:8000"


@pytest.mark.django_db
def test_sandbox_host_serves_no_app_pages(personas):
    client = Client(HTTP_HOST=SANDBOX_HOST)
    client.force_login(personas.owner)
    for path in ("/", "/login/", "/admin/", f"/w/{personas.workspace.slug}/"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert "Set-Cookie" not in response.headers
        assert not response.cookies


@pytest.mark.django_db
def test_app_host_serves_no_sandbox_pages():
    response = Client().get("/sandbox/anything/")
    assert response.status_code == 404


@pytest.mark.django_db
def test_host_pages_carry_a_strict_nonce_csp():
    response = Client().get("/login/")
    policy = response.headers["Content-Security-Policy"]
    directives = dict(
        (part.split()[0], part.split()[1:]) for part in policy.split(";") if part.strip()
    )
    assert "'unsafe-inline'" not in directives["script-src"]
    # Only 'self' and (when a page has an inline script) that response's nonce.
    assert all(
        source == "'self'" or source.startswith("'nonce-") for source in directives["script-src"]
    )
    assert directives["object-src"] == ["'none'"]
    assert directives["frame-ancestors"] == ["'none'"]


@pytest.mark.django_db
def test_audit_events_are_read_only_in_the_admin(personas):
    from bindings.models import AuditEvent

    staff = personas.owner
    staff.is_staff = staff.is_superuser = True
    staff.save()
    client = Client()
    client.force_login(staff)
    event = AuditEvent.objects.first()
    assert event is not None
    change_url = f"/admin/bindings/auditevent/{event.pk}/change/"
    assert client.get("/admin/bindings/auditevent/").status_code == 200
    assert client.get("/admin/bindings/auditevent/add/").status_code == 403
    before = AuditEvent.objects.get(pk=event.pk)
    response = client.post(change_url, {"reason": "tampered", "decision": "denied"})
    assert response.status_code == 403
    assert (
        client.post(f"/admin/bindings/auditevent/{event.pk}/delete/", {"post": "yes"}).status_code
        == 403
    )
    after = AuditEvent.objects.get(pk=event.pk)
    assert (after.reason, after.decision) == (before.reason, before.decision)


@pytest.mark.django_db
def test_audit_rows_cannot_be_changed_or_deleted_through_the_orm(personas):
    from bindings.models import AuditEvent

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

    from bindings.models import AuditEvent

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

    from bindings.models import AuditEvent

    count = AuditEvent.objects.count()
    assert count > 0
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("DELETE FROM bindings_auditevent")
    assert AuditEvent.objects.count() == count


def _check_deploy(env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            ("DATABASE_URL", "REDIS_URL", "CELERY_", "SECRET_KEY", "DEBUG", "ATRIUM_")
        )
    }
    clean.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "ERROR"],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


SAFE_PRODUCTION = {
    "SECRET_KEY": "k" * 24 + "-production-secret-0123456789",
    "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/atrium",
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/1",
    "ATRIUM_APP_ORIGIN": "https://chat.example.com",
    "ATRIUM_SANDBOX_ORIGIN": "https://sandbox.example-usercontent.net",
    "SECURE_SSL_REDIRECT": "1",
}


def test_deploy_check_passes_a_safe_production_env(tmp_path):
    result = _check_deploy({**SAFE_PRODUCTION, "ATRIUM_VAR_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "change, error_id",
    [
        ({"DEBUG": "1"}, "atrium.E001"),
        ({"SECRET_KEY": ""}, "atrium.E002"),
        ({"REDIS_URL": ""}, "atrium.E003"),
        ({"CELERY_BROKER_URL": ""}, "atrium.E004"),
        ({"DATABASE_URL": ""}, "atrium.E005"),
        ({"ATRIUM_SANDBOX_ORIGIN": "https://chat.example.com"}, "atrium.E006"),
        ({"ATRIUM_APP_ORIGIN": "http://chat.example.com"}, "atrium.E007"),
        ({"ALLOWED_HOSTS": "*"}, "atrium.E008"),
    ],
)
def test_deploy_check_fails_loudly_on_unsafe_production_env(tmp_path, change, error_id):
    env = {**SAFE_PRODUCTION, "ATRIUM_PROFILE": "production", "ATRIUM_VAR_DIR": str(tmp_path)}
    env.update(change)
    env = {k: v for k, v in env.items() if v != ""}
    result = _check_deploy(env)
    assert result.returncode != 0
    assert error_id in result.stdout + result.stderr
