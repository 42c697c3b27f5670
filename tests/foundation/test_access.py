"""Membership is enforced on every page and socket: outsiders get 404/403, never data."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_anonymous_is_sent_to_login(personas):
    response = Client().get(reverse("thread", args=[personas.workspace.slug, personas.thread.pk]))
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


@pytest.mark.parametrize("who", ["owner", "member", "viewer"])
def test_members_can_read_the_thread(personas, who):
    response = _client(getattr(personas, who)).get(
        reverse("thread", args=[personas.workspace.slug, personas.thread.pk])
    )
    assert response.status_code == 200
    assert b"Launch plan" in response.content


def test_outsider_gets_404_for_thread_and_workspace(personas):
    client = _client(personas.outsider)
    thread_url = reverse("thread", args=[personas.workspace.slug, personas.thread.pk])
    workspace_url = reverse("workspace", args=[personas.workspace.slug])
    for url in (thread_url, workspace_url):
        response = client.get(url)
        assert response.status_code == 404
        assert b"Launch plan" not in response.content


def test_thread_of_another_workspace_is_not_reachable_through_own_workspace(personas):
    # Owner of Acme asks for Globex's thread id under the Acme slug.
    response = _client(personas.owner).get(
        reverse("thread", args=[personas.workspace.slug, personas.other_thread.pk])
    )
    assert response.status_code == 404


def test_viewer_cannot_create_threads(personas):
    response = _client(personas.viewer).post(
        reverse("thread-create", args=[personas.workspace.slug]), {"title": "Nope"}
    )
    assert response.status_code == 403
    assert not personas.workspace.threads.filter(title="Nope").exists()


def test_member_creates_a_thread_and_it_is_audited(personas):
    from audit.models import AuditEvent
    from audit.types import AuditEventType

    response = _client(personas.member).post(
        reverse("thread-create", args=[personas.workspace.slug]), {"title": "Retro"}
    )
    thread = personas.workspace.threads.get(title="Retro")
    assert response.status_code == 302
    assert response["Location"].endswith(f"/t/{thread.pk}/")
    assert AuditEvent.objects.filter(
        event_type=AuditEventType.THREAD_CREATED, thread_id=thread.pk, actor_user=personas.member
    ).exists()
