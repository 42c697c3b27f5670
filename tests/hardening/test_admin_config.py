"""Security review findings 1a-c, 7 and 10 (Range): through the admin over HTTP, the
settings as a fresh process loads them, and the media view (issue 13)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from tests.conftest import ROOT_DIR, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def stdio_server():
    from mcp_bridge.services.servers import server_add

    return server_add(
        name="Files", transport="stdio", command="node", args=["server.js"],
        env={"API_TOKEN": "env-s3cret"},
    )  # fmt: skip


def _staff(username: str, *codenames: str):
    user = make_user(username)
    user.is_staff = True
    user.save()
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return user, client


def _change_form(server, **fields) -> dict:
    data = {
        "enabled": "on" if server.enabled else "",
        "call_timeout": str(server.call_timeout),
        "connect_timeout": str(server.connect_timeout),
        "tools-TOTAL_FORMS": "0",
        "tools-INITIAL_FORMS": "0",
        "tools-MIN_NUM_FORMS": "0",
        "tools-MAX_NUM_FORMS": "1000",
    }
    data.update(fields)
    return {k: v for k, v in data.items() if v != ""}


# ---- 1a: only superusers set what a server executes or where it connects -------------------


def test_staff_may_disable_a_server_but_not_change_its_command_or_see_its_secrets(
    stdio_server,
):
    from audit.models import AuditEvent
    from mcp_bridge.models import McpServer

    user, client = _staff("sam", "change_mcpserver", "view_mcpserver", "add_mcpserver")
    url = f"/admin/mcp_bridge/mcpserver/{stdio_server.pk}/change/"

    page = client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="command"' not in html and 'name="env"' not in html
    assert "env-s3cret" not in html and "server.js" not in html

    crafted = _change_form(
        stdio_server, enabled="", command="/bin/sh", args='["-c", "id"]', env="X=1"
    )
    response = client.post(url, crafted)
    assert response.status_code == 302, response.content.decode()[:2000]
    stdio_server.refresh_from_db()
    assert stdio_server.enabled is False  # what they may change, changed
    assert (stdio_server.command, stdio_server.args) == ("node", ["server.js"])
    assert stdio_server.env == {"API_TOKEN": "env-s3cret"}

    assert client.get("/admin/mcp_bridge/mcpserver/add/").status_code == 403
    assert client.post("/admin/mcp_bridge/mcpserver/add/", {"name": "x"}).status_code == 403
    assert McpServer.objects.count() == 1
    refused = AuditEvent.objects.filter(event_type=611, decision="denied")
    assert refused.count() == 2 and {r.actor_user_id for r in refused} == {user.pk}


def test_a_superuser_still_manages_connections(stdio_server):
    admin = make_user("root", staff=True)
    client = Client()
    client.force_login(admin)
    url = f"/admin/mcp_bridge/mcpserver/{stdio_server.pk}/change/"
    data = _change_form(
        stdio_server, name="Files", slug="files", transport="stdio", command="python3",
        args='["files.py"]', enabled="on",
    )  # fmt: skip
    assert client.post(url, data).status_code == 302
    stdio_server.refresh_from_db()
    assert stdio_server.command == "python3"


# ---- 1b: ${NAME} only for allow-listed names -----------------------------------------------


def test_env_references_only_resolve_the_allow_listed_prefix(stdio_server, monkeypatch):
    from mcp_bridge.models import McpServer
    from mcp_bridge.services.servers import ServerConfigError, server_add, spec_for

    admin = make_user("root", staff=True)
    client = Client()
    client.force_login(admin)
    url = f"/admin/mcp_bridge/mcpserver/{stdio_server.pk}/change/"
    data = _change_form(
        stdio_server, name="Files", slug="files", transport="stdio", command="node",
        args='["server.js"]', headers="", env="TOKEN=${SECRET_KEY}", enabled="on",
    )  # fmt: skip
    page = client.post(url, data)
    assert page.status_code == 200 and "only variables named ATRIUM_MCP_*" in page.content.decode()

    with pytest.raises(ServerConfigError):
        server_add(
            name="Remote", transport="streamable_http", url="https://attacker.example/mcp",
            headers={"Authorization": "${SECRET_KEY}"},
        )  # fmt: skip
    # A row written around the form (shell, old data) does not resolve either.
    McpServer.objects.filter(pk=stdio_server.pk).update(env={"TOKEN": "${DATABASE_URL}"})
    stdio_server.refresh_from_db()
    with pytest.raises(ServerConfigError, match="ATRIUM_MCP_"):
        spec_for(stdio_server)
    monkeypatch.setenv("ATRIUM_MCP_FILES_TOKEN", "resolved")
    McpServer.objects.filter(pk=stdio_server.pk).update(env={"TOKEN": "${ATRIUM_MCP_FILES_TOKEN}"})
    stdio_server.refresh_from_db()
    assert spec_for(stdio_server).env["TOKEN"] == "resolved"


# ---- 1c: the deployment's provider key goes only to the deployment's endpoint ---------------


def test_a_workspace_base_url_never_receives_the_global_provider_key(personas, settings):
    from chat.providers import config_for

    settings.ATRIUM_PROVIDER_API_KEY = "global-s3cret"
    settings.ATRIUM_PROVIDER_BASE_URL = "https://llm.internal/v1"
    workspace = personas.workspace
    assert config_for(workspace).api_key == "global-s3cret"
    workspace.provider_base_url = "https://attacker.example/v1"
    workspace.save()
    config = config_for(workspace)
    assert config.base_url == "https://attacker.example/v1" and config.api_key == ""
    workspace.provider_api_key = "their-own-key"
    workspace.save()
    assert config_for(workspace).api_key == "their-own-key"


# ---- 7: the generated secret key file is private ------------------------------------------------


def test_the_generated_secret_key_file_is_readable_by_its_owner_only(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DJANGO_SETTINGS_MODULE")}
    env.update(ATRIUM_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="config.settings")
    old_umask = os.umask(0o022)  # the usual default: files readable by everyone
    try:
        subprocess.run(
            [sys.executable, "-c", "import django; django.setup()"],
            cwd=ROOT_DIR, env=env, check=True, timeout=60,
        )  # fmt: skip
    finally:
        os.umask(old_umask)
    mode = stat.S_IMODE((tmp_path / "secret_key").stat().st_mode)
    assert mode == 0o600, oct(mode)
