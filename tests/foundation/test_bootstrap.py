"""`make run`'s set-up: an admin (password shown once), the demo workspace, example servers."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def _run() -> str:
    out = StringIO()
    call_command("atrium_bootstrap", stdout=out)
    return out.getvalue()


def test_bootstrap_is_idempotent_and_shows_the_password_once():
    from bindings.models import AppBinding
    from chat.models import Membership, Thread, Workspace
    from mcp_bridge.models import McpServer

    first = _run()
    assert "Admin login: admin / " in first
    password = first.split("Admin login: admin / ")[1].split()[0]
    from django.contrib.auth import authenticate

    assert authenticate(username="admin", password=password) is not None
    second = _run()
    assert password not in second and "exists" in second
    workspace = Workspace.objects.get(slug="demo")
    assert Membership.objects.get(workspace=workspace).role == "owner"
    assert Thread.objects.filter(workspace=workspace).count() == 1
    assert {"board", "media", "liveview", "legacy"} <= set(
        McpServer.objects.values_list("slug", flat=True)
    )
    # Each server bound once to the demo workspace, however often bootstrap runs.
    assert AppBinding.objects.filter(workspace_id=workspace.pk).count() == McpServer.objects.count()
