"""The per-server log (MCP logging, issue 25): `notifications/message` from the real
``server-everything`` lands as bounded log lines; the level an admin sets is audited and
asked of the server on its next connection."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from audit.models import AuditEvent
from audit.types import AuditEventType
from mcp_bridge import gateway
from mcp_bridge.models import ServerLogEntry
from mcp_bridge.services import server_log
from mcp_bridge.services.servers import spec_for
from tests import factories
from tests.fixtures import third_party
from tests.waiting import apoll

needs_node = pytest.mark.skipif(not third_party.installed(), reason=third_party.SKIP_REASON)


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    await gateway.close_all()


@pytest.fixture
def everything(db):
    command, *args = third_party.SERVERS["everything"].command("stdio")
    return factories.McpServerFactory(
        name="Everything", slug="everything", command=command, args=args
    )


@pytest.fixture
def admin_user(db):
    return factories.UserFactory(username="root", is_superuser=True, is_staff=True)


def _lines(server_id: int) -> list[ServerLogEntry]:
    return list(ServerLogEntry.objects.filter(server_id=server_id).order_by("id"))


@needs_node
@pytest.mark.django_db(transaction=True)
async def test_log_lines_land_and_level_is_asked(everything, admin_user) -> None:
    """At ``debug`` the subscribe handler's info line arrives; at ``error`` it does not,
    while the server's error line still does."""
    changed = await database_sync_to_async(server_log.server_log_level_set)(
        server=everything, level="debug", actor=admin_user
    )
    assert changed
    spec = await database_sync_to_async(spec_for)(everything)
    assert spec.log_level == "debug"
    await gateway.manager().subscribe_resource(spec, "demo://resource/dynamic/text/1")
    found = await apoll(
        database_sync_to_async(
            lambda: [
                e for e in _lines(everything.pk) if e.level == "info" and "Subscribe" in str(e.data)
            ]
        ),
        reason="the server's info line about the subscription",
        timeout=30,
    )
    assert found

    await database_sync_to_async(server_log.server_log_level_set)(
        server=everything, level="error", actor=admin_user
    )
    spec = await database_sync_to_async(spec_for)(everything)
    before = await database_sync_to_async(ServerLogEntry.objects.count)()
    # A new connection (the level is part of its spec) asks for `error`: the info line of a
    # second subscribe is filtered by the server; the ping after it orders the stream.
    await gateway.manager().subscribe_resource(spec, "demo://resource/dynamic/text/2")
    await gateway.manager().ping(spec)
    after = await database_sync_to_async(ServerLogEntry.objects.count)()
    assert after == before
    rows = await database_sync_to_async(
        lambda: list(
            AuditEvent.objects.filter(event_type=AuditEventType.SERVER_LOG_LEVEL_SET).order_by("id")
        )
    )()
    assert [r.extra["level"] for r in rows] == ["debug", "error"]
    assert rows[1].extra["previous"] == "debug" and rows[1].actor_user_id == admin_user.pk


@pytest.mark.django_db
def test_lines_are_bounded_and_data_capped(everything) -> None:
    for i in range(30):
        server_log.server_log_record(server_id=everything.pk, params={"level": "info", "data": i})
    assert server_log.server_log_prune(server_id=everything.pk, keep=10) == 20
    kept = [e.data for e in _lines(everything.pk)]
    assert kept == list(range(20, 30))
    big = server_log.server_log_record(
        server_id=everything.pk, params={"level": "warning", "data": "x" * 20_000, "logger": "l"}
    )
    assert big is not None and big.data["chars"] > server_log.MAX_DATA_CHARS
    assert server_log.server_log_record(server_id=everything.pk, params={"level": "loud"}) is None


@pytest.mark.django_db
def test_unknown_level_refused_and_unchanged_level_writes_nothing(everything, admin_user) -> None:
    with pytest.raises(server_log.ServerLogError):
        server_log.server_log_level_set(server=everything, level="verbose", actor=admin_user)
    assert not server_log.server_log_level_set(server=everything, level="", actor=admin_user)
    assert not AuditEvent.objects.filter(event_type=AuditEventType.SERVER_LOG_LEVEL_SET).exists()


@pytest.mark.django_db
def test_admin_lists_filters_and_sets_level(client, everything, admin_user) -> None:
    server_log.server_log_record(
        server_id=everything.pk, params={"level": "error", "data": "disk on fire", "logger": "fs"}
    )
    server_log.server_log_record(server_id=everything.pk, params={"level": "info", "data": "calm"})
    client.force_login(admin_user)
    page = client.get("/admin/mcp_bridge/serverlogentry/?level__exact=error&q=fire")
    assert page.status_code == 200
    text = page.content.decode()
    assert "disk on fire" in text and "calm" not in text
    posted = client.post(
        "/admin/mcp_bridge/serverlogentry/level/", {"server": everything.pk, "level": "warning"}
    )
    assert posted.status_code == 302
    everything.refresh_from_db()
    assert everything.log_level == "warning"
    assert AuditEvent.objects.filter(event_type=AuditEventType.SERVER_LOG_LEVEL_SET).count() == 1
