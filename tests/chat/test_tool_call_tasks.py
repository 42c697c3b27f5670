"""Tool calls run as MCP tasks (chat.calls.mcp_tasks) through the real path: a member's
``/call`` on the real socket, the published ``@modelcontextprotocol/server-everything``
(its ``simulate-research-query`` tool declares ``execution.taskSupport: "required"``), and a
REAL Celery worker (the project's app, a memory:// broker, a solo worker thread) whose
driver polls ``tasks/get`` and fetches ``tasks/result``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from channels.db import database_sync_to_async

from tests import factories
from tests.conftest import next_frame, open_socket, reply_frame, toolcall_event
from tests.fixtures.third_party import NODE_MODULES, SERVERS, SKIP_REASON, node_binary

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.skipif(not (NODE_MODULES / "@modelcontextprotocol").exists(), reason=SKIP_REASON),
]

TOOL = "simulate-research-query"


def _reset_broker_pools(app: Any) -> None:
    from kombu import pools

    pools.reset()
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture(scope="module")
def module_worker(django_db_setup, django_db_blocker) -> Iterator[Any]:
    """A real worker thread of the project's Celery app on an in-memory broker."""
    from celery.contrib.testing.worker import start_worker

    import chat.calls.task_jobs  # noqa: F401  (registers the tasks)
    from config.celery import app

    keys = ("broker_url", "broker_read_url", "broker_write_url", "broker_transport_options")
    saved = {key: app.conf.get(key) for key in keys}
    _reset_broker_pools(app)
    app.conf.update(
        broker_url="memory://",
        broker_read_url="memory://",
        broker_write_url="memory://",
        broker_transport_options={},
    )
    app.control.purge()
    try:
        with (
            django_db_blocker.unblock(),
            start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=20),
        ):
            yield app
    finally:
        _reset_broker_pools(app)
        app.conf.update(saved)


@pytest.fixture
def everything(personas, module_worker):
    """server-everything over stdio, bound to the personas' workspace; the worker's
    drivers (and their connections) are stopped after the test."""
    from chat.calls import task_jobs

    entry = SERVERS["everything"]
    server = factories.McpServerFactory(
        name="Everything",
        slug="everything",
        command=node_binary(),
        args=[str(entry.entry), *entry.stdio_args],
    )
    factories.AppBindingFactory(server=server, workspace=personas.workspace)
    yield server
    task_jobs.drivers_stop()


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


def task_event(status: str | None = None):
    """A toolcall event of the task tool whose task has ``status`` (any task: None)."""
    base = toolcall_event(None, TOOL)

    def match(frame: dict[str, Any]) -> bool:
        if not base(frame):
            return False
        task = frame["data"].get("task")
        return task is not None and (status is None or task["status"] == status)

    return match


def _audit(call_id: int) -> list[tuple[int, str, dict[str, Any]]]:
    from audit.models import AuditEvent

    rows = AuditEvent.objects.filter(extra__tool_call_id=call_id).order_by("id")
    return [(row.event_type, row.reason, row.extra) for row in rows]


async def _start(ws_connect, personas, topic: str = "tides"):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    member = await open_socket(ws_connect, personas.member, personas.thread)
    await owner.send_json_to(
        {"type": "message.post", "text": f'/call everything.{TOOL} {{"topic": "{topic}"}}'}
    )
    working = await next_frame(member, task_event("working"), timeout=60)
    return owner, member, working["data"]


async def test_a_task_call_completes_through_polling_with_the_canonical_result(
    personas, everything, ws_connect
):
    from audit.types import AuditEventType
    from chat.selectors import thread_snapshot

    owner, member, working = await _start(ws_connect, personas)
    assert working["status"] == "running"
    assert working["task"]["id"] and working["task"]["pollIntervalMs"] == 1000
    assert working["task"]["ttlMs"] == 300000  # the server's answer, not what was asked
    assert working["task"]["statusMessage"].endswith("...")

    done = await next_frame(member, toolcall_event("success", TOOL), timeout=60)
    data = done["data"]
    assert data["task"]["status"] == "completed"
    texts = [p["text"] for p in data["result"]["parts"] if p["type"] == "text"]
    assert texts and texts[0].startswith("# Research Report: tides")
    assert data["result"]["meta"]["success"] is True

    # A reload shows the very same stored call (the canonical result and its task).
    snapshot = await database_sync_to_async(thread_snapshot)(thread=personas.thread)
    stored = next(c for c in snapshot["toolCalls"] if c["id"] == data["id"])
    assert stored == data

    audit = await database_sync_to_async(_audit)(data["id"])
    kinds = [kind for kind, _reason, _extra in audit]
    assert kinds[0] == AuditEventType.TASK_CREATED
    assert kinds[-1] == AuditEventType.TOOL_CALL_COMPLETED
    changes = [
        extra["status"] for kind, _r, extra in audit if kind == AuditEventType.TASK_STATUS_CHANGED
    ]
    assert changes == ["completed"]  # bounded: four "working" polls wrote nothing
    await owner.disconnect()
    await member.disconnect()


async def test_the_call_survives_the_web_side_dropping_its_connections_and_a_dead_poller(
    personas, everything, ws_connect
):
    """The web process holds nothing of the call: its connections go, then the worker's
    driver dies (a killed poller); the beat sweep queues it again and it finishes."""
    from chat.calls import task_jobs
    from chat.calls.mcp_tasks import POLLER_TTL
    from chat.models import ToolCall
    from mcp_bridge import gateway

    owner, member, working = await _start(ws_connect, personas, topic="restarts")
    call_id = working["id"]
    await gateway.close_all()  # the web process's connection manager is gone

    # The poller dies (its connection, like the server's task store, lives on).
    for future in list(task_jobs._driving.values()):
        future.cancel()
    await database_sync_to_async(
        lambda: ToolCall.objects.filter(pk=call_id).update(
            task_polled_at=ToolCall.objects.get(pk=call_id).task_polled_at - POLLER_TTL * 2
        )
    )()
    requeued = await database_sync_to_async(task_jobs.requeue_tool_call_tasks)()
    assert requeued == 1

    done = await next_frame(member, toolcall_event("success", TOOL), timeout=60)
    assert done["data"]["id"] == call_id
    assert done["data"]["task"]["status"] == "completed"
    await owner.disconnect()
    await member.disconnect()


async def test_cancel_sends_tasks_cancel_and_the_server_confirms(personas, everything, ws_connect):
    from audit.types import AuditEventType

    owner, member, working = await _start(ws_connect, personas, topic="cancelled")
    call_id = working["id"]
    await owner.send_json_to({"type": "tool.cancel", "toolCallId": call_id, "rid": "c1"})
    reply = await reply_frame(owner, "c1")
    assert reply["ok"], reply
    cancelled = await next_frame(member, toolcall_event("cancelled", TOOL))
    assert cancelled["data"]["id"] == call_id
    # The server's own answer to tasks/cancel reaches the card.
    confirmed = await next_frame(member, task_event("cancelled"), timeout=30)
    assert confirmed["data"]["status"] == "cancelled"
    assert confirmed["data"]["task"]["statusMessage"] == "Client cancelled task execution."

    audit = await database_sync_to_async(_audit)(call_id)
    sent = [extra for kind, _r, extra in audit if kind == AuditEventType.TASK_CANCEL_SENT]
    assert len(sent) == 1 and sent[0]["server_status"] == "cancelled"
    await owner.disconnect()
    await member.disconnect()


async def test_a_task_the_server_forgot_ends_as_expired(personas, everything, ws_connect):
    """The worker process restarts: its server-everything (which keeps tasks per session)
    is gone with it; the sweep's new poller asks a new server, which has no such task."""
    from audit.types import AuditEventType
    from chat.calls import task_jobs
    from chat.calls.mcp_tasks import POLLER_TTL
    from chat.models import ToolCall

    owner, member, working = await _start(ws_connect, personas, topic="forgotten")
    call_id = working["id"]
    await database_sync_to_async(task_jobs.drivers_stop)()  # the worker's loop and servers go
    await database_sync_to_async(
        lambda: ToolCall.objects.filter(pk=call_id).update(
            task_polled_at=ToolCall.objects.get(pk=call_id).task_polled_at - POLLER_TTL * 2
        )
    )()
    assert await database_sync_to_async(task_jobs.requeue_tool_call_tasks)() == 1

    failed = await next_frame(member, toolcall_event("error", TOOL), timeout=60)
    assert failed["data"]["error"]["code"] == "task_expired"
    assert "no longer has this task" in failed["data"]["error"]["message"]
    assert failed["data"]["task"]["status"] == "expired"
    audit = await database_sync_to_async(_audit)(call_id)
    assert AuditEventType.TASK_EXPIRED in [kind for kind, _r, _e in audit]
    await owner.disconnect()
    await member.disconnect()


def test_poll_interval_is_bounded() -> None:
    from chat.calls.mcp_tasks import POLL_DEFAULT_SECONDS, poll_seconds

    assert poll_seconds(1) == 0.5
    assert poll_seconds(1000) == 1.0
    assert poll_seconds(3_600_000) == 10.0
    assert poll_seconds(None) == POLL_DEFAULT_SECONDS


def test_stalled_task_calls_are_found_and_live_ones_are_not(personas) -> None:
    from django.utils import timezone

    from chat.calls.mcp_tasks import POLLER_TTL, tool_calls_tasks_stalled
    from chat.calls.runners import orphaned_running_calls

    old = timezone.now() - POLLER_TTL * 3
    stalled = factories.ToolCallFactory(
        thread=personas.thread, status="running", task_status="working", task_polled_at=old
    )
    factories.ToolCallFactory(
        thread=personas.thread,
        status="running",
        task_status="working",
        task_polled_at=timezone.now() - timedelta(seconds=1),
    )
    assert list(tool_calls_tasks_stalled()) == [stalled]
    # The runner sweep leaves task calls to their own sweep (it would fail them).
    assert stalled not in orphaned_running_calls(now=timezone.now() + timedelta(hours=1))
