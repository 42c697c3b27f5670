"""Security issue 23, finding F13: the literal ``env`` / ``headers`` of MCP servers and a
workspace's provider API key are sealed at rest (``mcp_bridge.sealing``, the OAuth grants'
keys) and read back transparently where they are used: a real stdio server gets its env
value, the HTTP spec its headers, the fake model provider its key. Whatever writes them —
``server_add``, the admin, ``manage.py mcp add``, plain ``save()`` — stores them sealed, and
a migration seals the rows that were stored in plain text.
"""

from __future__ import annotations

import json
import sys

import pytest
from channels.db import database_sync_to_async
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from mcp_bridge.sealing import unseal
from tests.chat.fake_llm import FakeLLM, openai_text
from tests.conftest import ROOT_DIR, make_user, next_frame, open_socket, toolcall_event

FAULTY = ROOT_DIR / "tests" / "fixtures" / "mcp_servers" / "faulty.py"
ENV_SECRET = "env-s3cret-6b1d"
HEADER_SECRET = "Bearer header-s3cret-22aa"
PROVIDER_KEY = "sk-provider-s3cret-90fe"


def _raw(sql: str, *params) -> tuple:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def _raw_server(pk: int) -> tuple[str, str]:
    return _raw("SELECT env, headers FROM mcp_bridge_mcpserver WHERE id = %s", pk)


def _raw_key(pk: int) -> str:
    return _raw("SELECT provider_api_key FROM chat_workspace WHERE id = %s", pk)[0]


@pytest.mark.django_db
def test_server_secrets_are_sealed_in_the_database_and_read_back_plain():
    from mcp_bridge.models import McpServer
    from mcp_bridge.services.servers import server_add, spec_for

    stdio = server_add(
        name="Files", transport="stdio", command="node", args=["x.js"],
        env={"API_TOKEN": ENV_SECRET},
    )  # fmt: skip
    http = server_add(
        name="Remote", transport="streamable_http", url="https://mcp.example.com/mcp",
        headers={"Authorization": HEADER_SECRET},
    )  # fmt: skip
    env, headers = _raw_server(stdio.pk)
    assert ENV_SECRET not in env and "API_TOKEN" not in env and headers == ""
    assert unseal(env) == {"API_TOKEN": ENV_SECRET}
    env, headers = _raw_server(http.pk)
    assert HEADER_SECRET not in headers and "Authorization" not in headers and env == ""

    assert McpServer.objects.get(pk=stdio.pk).env == {"API_TOKEN": ENV_SECRET}
    assert spec_for(McpServer.objects.get(pk=http.pk)).headers == {"Authorization": HEADER_SECRET}
    assert McpServer.objects.values_list("env", flat=True).get(pk=stdio.pk) == {
        "API_TOKEN": ENV_SECRET
    }
    # Nothing else in the row or a dump of it carries the secret.
    dump = json.dumps(list(McpServer.objects.values_list("pk", "command", "url")))
    assert ENV_SECRET not in dump


@pytest.mark.django_db
def test_the_mcp_command_and_the_admin_store_sealed():
    from mcp_bridge.models import McpServer

    call_command(
        "mcp", "add", "cmdline", "--stdio", f"{sys.executable} {FAULTY}",
        "--env", f"API_TOKEN={ENV_SECRET}",
    )  # fmt: skip
    added = McpServer.objects.get(slug="cmdline")
    assert ENV_SECRET not in _raw_server(added.pk)[0]
    assert added.env == {"API_TOKEN": ENV_SECRET}

    admin = make_user("root", staff=True)
    client = Client()
    client.force_login(admin)
    response = client.post(
        "/admin/mcp_bridge/mcpserver/add/",
        {
            "name": "Hosted", "slug": "hosted", "transport": "streamable_http",
            "url": "https://mcp.example.com/mcp", "args": "[]",
            "headers": f"Authorization: {HEADER_SECRET}", "enabled": "on",
            "call_timeout": "60", "connect_timeout": "20",
            "tools-TOTAL_FORMS": "0", "tools-INITIAL_FORMS": "0",
            "tools-MIN_NUM_FORMS": "0", "tools-MAX_NUM_FORMS": "1000",
        },
    )  # fmt: skip
    assert response.status_code == 302, response.content.decode()[:2000]
    hosted = McpServer.objects.get(slug="hosted")
    assert HEADER_SECRET not in _raw_server(hosted.pk)[1]
    assert hosted.headers == {"Authorization": HEADER_SECRET}
    # The change page names the header, never its value.
    page = client.get(f"/admin/mcp_bridge/mcpserver/{hosted.pk}/change/").content.decode()
    assert "Stored: Authorization." in page and "header-s3cret" not in page

    workspace_page = client.post(
        "/admin/chat/workspace/add/",
        {"name": "Sealed", "slug": "sealed", "provider": "openai",
         "provider_api_key": PROVIDER_KEY, "memberships-TOTAL_FORMS": "0",
         "memberships-INITIAL_FORMS": "0", "memberships-MIN_NUM_FORMS": "0",
         "memberships-MAX_NUM_FORMS": "1000"},
    )  # fmt: skip
    assert workspace_page.status_code == 302, workspace_page.content.decode()[:2000]
    from chat.models import Workspace

    sealed = Workspace.objects.get(slug="sealed")
    assert PROVIDER_KEY not in _raw_key(sealed.pk)
    assert sealed.provider_api_key == PROVIDER_KEY


@pytest.mark.django_db(transaction=True)
def test_the_migration_seals_rows_stored_in_plain_text():
    from chat.models import Workspace
    from mcp_bridge.models import McpServer

    executor = MigrationExecutor(connection)
    plain = [("mcp_bridge", "0002_oauth"), ("chat", "0005_fleet_calls")]
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(plain)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO mcp_bridge_mcpserver (name, slug, transport, command, args, env,"
                " cwd, url, headers, auth_mode, enabled, call_timeout, connect_timeout,"
                " sandbox_subdomain, last_error, created_at, updated_at) VALUES"
                " ('Old', 'old', 'stdio', 'node', '[]', %s, '', '', %s, 'none', %s, 60, 20,"
                " '', '', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)",
                [json.dumps({"API_TOKEN": ENV_SECRET}), json.dumps({}), True],
            )
            cursor.execute(
                "INSERT INTO chat_workspace (name, slug, provider, model, provider_base_url,"
                " provider_api_key, system_prompt, created_at) VALUES"
                " ('Old', 'old', 'openai', '', '', %s, '', CURRENT_TIMESTAMP)",
                [PROVIDER_KEY],
            )
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(latest)
    server = McpServer.objects.get(slug="old")
    env, headers = _raw_server(server.pk)
    assert ENV_SECRET not in env and headers == ""
    assert server.env == {"API_TOKEN": ENV_SECRET} and server.headers == {}
    workspace = Workspace.objects.get(slug="old")
    assert PROVIDER_KEY not in _raw_key(workspace.pk)
    assert workspace.provider_api_key == PROVIDER_KEY


@pytest.fixture
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
async def test_a_real_stdio_server_starts_with_its_sealed_env_value(
    personas, ws_connect, close_connections
):
    from bindings.services.bindings import binding_create
    from mcp_bridge.services.servers import server_add

    def setup():
        server = server_add(
            name="Faulty", slug="faulty", transport="stdio", command=sys.executable,
            args=[str(FAULTY)], env={"ATRIUM_SEAL_PROBE": ENV_SECRET},
        )  # fmt: skip
        binding_create(server=server, workspace=personas.workspace)
        return _raw_server(server.pk)[0]

    assert ENV_SECRET not in await database_sync_to_async(setup)()
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to(
        {"type": "message.post", "text": '/call faulty.env {"name": "ATRIUM_SEAL_PROBE"}'}
    )
    done = await next_frame(owner, toolcall_event("success", "env"))
    assert done["data"]["result"]["parts"][0]["text"] == ENV_SECRET
    await owner.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
async def test_the_sealed_provider_key_reaches_the_provider(personas, ws_connect):
    def setup(base_url: str) -> str:
        workspace = personas.workspace
        workspace.provider, workspace.model = "openai", "fake-model"
        workspace.provider_base_url, workspace.provider_api_key = base_url, PROVIDER_KEY
        workspace.save()
        return _raw_key(workspace.pk)

    with FakeLLM("openai") as llm:
        assert PROVIDER_KEY not in await database_sync_to_async(setup)(llm.base_url)
        llm.push(openai_text("Sealed ", "and delivered."))
        owner = await open_socket(ws_connect, personas.owner, personas.thread)
        await owner.send_json_to({"type": "message.post", "text": "Hello?", "rid": 1})

        def answered(frame) -> bool:
            data = frame.get("data") or {}
            return (
                frame.get("kind") == "message"
                and data.get("role") == "assistant"
                and data.get("status") == "complete"
            )

        reply = await next_frame(owner, answered)
        assert reply["data"]["text"] == "Sealed and delivered."
        assert llm.requests[0].headers["authorization"] == f"Bearer {PROVIDER_KEY}"
        await owner.disconnect()


@pytest.mark.django_db
def test_reseal_moves_server_secrets_and_provider_keys_to_the_newest_key(settings, personas):
    from cryptography.fernet import Fernet

    from chat.models import Workspace
    from mcp_bridge.models import McpServer
    from mcp_bridge.services.servers import server_add

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.ATRIUM_OAUTH_KEYS = [old]
    server = server_add(
        name="Files", transport="stdio", command="node", env={"API_TOKEN": ENV_SECRET}
    )
    workspace = personas.workspace
    workspace.provider_api_key = PROVIDER_KEY
    workspace.save()

    settings.ATRIUM_OAUTH_KEYS = [new, old]
    call_command("mcp", "reseal-grants")
    settings.ATRIUM_OAUTH_KEYS = [new]  # the old key is gone
    assert McpServer.objects.get(pk=server.pk).env == {"API_TOKEN": ENV_SECRET}
    assert Workspace.objects.get(pk=workspace.pk).provider_api_key == PROVIDER_KEY


def test_a_token_is_decrypted_once_per_key_set_and_each_reader_gets_its_own_copy(
    settings, monkeypatch
):
    """A server row is read with every request of its views (issue 28): its sealed env is
    opened once per token and key set, not once per read; a reader's changes do not reach
    the next reader, and other keys do not read from what the old keys opened."""
    from cryptography.fernet import Fernet, MultiFernet

    from mcp_bridge import sealing

    decrypts: list[str] = []
    original = MultiFernet.decrypt

    def counting(self, token, ttl=None):
        decrypts.append(token)
        return original(self, token, ttl)

    monkeypatch.setattr(MultiFernet, "decrypt", counting)
    token = sealing.seal({"API_KEY": ENV_SECRET})
    first = sealing.unseal(token)
    assert first == {"API_KEY": ENV_SECRET}
    first["API_KEY"] = "changed by a reader"
    assert sealing.unseal(token) == {"API_KEY": ENV_SECRET}
    assert len(decrypts) == 1
    settings.ATRIUM_OAUTH_KEYS = [Fernet.generate_key().decode()]  # SECRET_KEY's key is gone
    assert sealing.unseal(token) is None
    assert len(decrypts) == 2
