"""The lean UI tools/call path (DESIGN §9 round-trip budget) keeps every invariant of §8.

A view's `tools/call` now reads its rows with lean statements (`lean_rows.select_rows`),
writes with `insert_row`/`update_row`, builds its events from memory and announces a
quick call with its final event only. Nothing about the authority is cached: these tests
change bindings, policies, catalogue rows and memberships behind the app's back (plain
`QuerySet.update()`, no signals, no service) and expect the very next call to obey.
"""

from __future__ import annotations

import re
import threading

import pytest
from channels.db import database_sync_to_async

from tests.conftest import next_frame, toolcall_event

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

TOOL = "refresh"  # board: read-only, app-only


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


class View:
    """An opened board view on a socket, making `tools/call` requests like a browser."""

    def __init__(self, communicator, token: str) -> None:
        self.communicator = communicator
        self.token = token
        self.rid = 0

    async def call(self, name: str = TOOL, arguments: dict | None = None) -> dict:
        self.rid += 1
        rid = f"call-{self.rid}"
        await self.communicator.send_json_to(
            {
                "type": "view.request",
                "rid": rid,
                "token": self.token,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments or {}},
            }
        )
        return await next_frame(
            self.communicator,
            lambda f: f.get("type") == "reply" and f.get("rid") == rid,
            limit=200,
        )


async def _open_view(ws_connect, user, thread) -> View:
    communicator, ok, _ = await ws_connect(user, thread.pk)
    assert ok
    await next_frame(communicator, lambda f: f.get("type") == "hello")
    await communicator.send_json_to({"type": "message.post", "text": "/call board.list_items"})
    done = await next_frame(communicator, toolcall_event("success", "list_items"))
    await communicator.send_json_to(
        {"type": "view.open", "toolCallId": done["data"]["id"], "rid": "open"}
    )
    opened = await next_frame(communicator, lambda f: f.get("rid") == "open")
    assert opened["ok"], opened
    return View(communicator, opened["result"]["token"])


def _db(func):
    return database_sync_to_async(func)()


async def _denials(reason: str) -> int:
    from audit.models import AuditEvent

    return await _db(
        lambda: AuditEvent.objects.filter(
            decision="denied", reason=reason, tool_name=TOOL, actor_kind="app_view"
        ).count()
    )


# ------------------------------------------------------------------ statements per call


async def test_a_view_tool_call_runs_a_small_fixed_set_of_lean_statements(
    personas, board_server, ws_connect, monkeypatch
):
    from django.db.backends import utils

    view = await _open_view(ws_connect, personas.owner, personas.thread)
    for _ in range(3):  # warm: connection, catalogue
        assert (await view.call())["ok"]
    statements: list[str] = []
    original = utils.CursorWrapper._execute_with_wrappers

    def counting(self, sql, params, many, executor):
        # The embedded event tail polls on a thread of its own every 50 ms: not the call's.
        if not threading.current_thread().name.startswith("event-tail"):
            statements.append(sql)
        return original(self, sql, params, many, executor)

    monkeypatch.setattr(utils.CursorWrapper, "_execute_with_wrappers", counting)
    reply = await view.call()
    monkeypatch.setattr(utils.CursorWrapper, "_execute_with_wrappers", original)
    assert reply["ok"], reply
    from django.db import connection

    # The membership, the view, its server, the binding, its policy and the tool in one
    # statement; decision audit and call (on SQLite in a transaction: BEGIN); BEGIN, result,
    # result audit, sequence number, final event. (It was 18, five of them ORM-compiled
    # joins, before: bench/README.md; 4 / 10 until session 17 read the authority in the
    # admission's statement.) SQLite sends its BEGIN through the cursor (9 statements). On
    # PostgreSQL (issue 28) no transaction is opened at all: the decision's audit row and
    # the call row are one statement, and the result, its audit row, the sequence number and
    # the final event another (`lean_rows.write_together`): 1 read + 2 writes = 3
    # statements, 3 round trips. The read joins independent single-table reads on one row
    # (`lean_rows.select_together`); no other JOIN, no ORM-compiled statement.
    expected = 3 if connection.vendor == "postgresql" else 9
    assert len(statements) == expected, statements
    reads = [s for s in statements if s.startswith("SELECT ")]
    assert len(reads) == 1, statements
    assert all(" FROM (SELECT 1) AS " in s for s in reads), reads
    assert [re.findall(r"LEFT JOIN (\S+)", s) for s in reads] == [
        [
            '"chat_membership"',
            '"chat_toolcall"',
            '"mcp_bridge_mcpserver"',
            '"bindings_appbinding"',
            '"bindings_toolpolicy"',
            '"mcp_bridge_tool"',
        ],
    ], reads
    joined = [s.replace(" LEFT JOIN ", " ") for s in statements]
    assert not [s for s in joined if " JOIN " in s.upper()], statements
    inserts = [t for s in statements for t in re.findall(r"INSERT INTO (\S+)", s)]
    assert sorted(inserts) == sorted(
        ['"bindings_auditevent"', '"bindings_auditevent"', '"chat_toolcall"', '"chat_threadevent"']
    ), inserts
    if connection.vendor == "postgresql":
        # The decision commits before the tool runs; each write is one statement.
        assert [s for s in statements if s.startswith("WITH ")] == statements[-2:]
        assert 'UPDATE "chat_toolcall"' in statements[-1]


async def test_a_tool_with_a_view_does_not_read_its_document_again_per_call(
    personas, board_server, ws_connect, monkeypatch
):
    """`list_items` has a view: its document is the one the connection read and kept
    (gateway.ui_resource(reuse=True), issue 28), so its call runs the statements of a
    call without a view — no `resources/read` + `resources/list`, no third trip to the
    database thread to hash and look up the document (16 statements before)."""
    from django.db import connection
    from django.db.backends import utils

    from mcp_bridge.connections import ConnectionManager

    view = await _open_view(ws_connect, personas.owner, personas.thread)
    for _ in range(3):  # warm: connection, catalogue, the kept document
        assert (await view.call("list_items"))["ok"]
    statements: list[str] = []
    reads: list[str] = []
    original = utils.CursorWrapper._execute_with_wrappers
    read_resource = ConnectionManager.read_resource

    def counting(self, sql, params, many, executor):
        if not threading.current_thread().name.startswith("event-tail"):
            statements.append(sql)
        return original(self, sql, params, many, executor)

    async def reading(self, spec, uri):
        reads.append(uri)
        return await read_resource(self, spec, uri)

    monkeypatch.setattr(utils.CursorWrapper, "_execute_with_wrappers", counting)
    monkeypatch.setattr(ConnectionManager, "read_resource", reading)
    reply = await view.call("list_items")
    monkeypatch.setattr(utils.CursorWrapper, "_execute_with_wrappers", original)
    assert reply["ok"], reply
    assert reads == []
    assert len(statements) == (3 if connection.vendor == "postgresql" else 9), statements


# ------------------------------------------------------- authority: fresh on every call


async def test_disabling_the_binding_refuses_the_very_next_call(personas, board_server, ws_connect):
    from bindings.models import AppBinding

    _server, binding = board_server
    view = await _open_view(ws_connect, personas.owner, personas.thread)
    assert (await view.call())["ok"]
    # Behind every service's back: no signal, no audit of the change, no cache to clear.
    await _db(lambda: AppBinding.objects.filter(pk=binding.pk).update(enabled=False))
    reply = await view.call()
    assert reply["ok"] is False
    assert reply["error"]["code"] == "binding_disabled"
    assert await _denials("binding_disabled") == 1
    await _db(lambda: AppBinding.objects.filter(pk=binding.pk).update(enabled=True))
    assert (await view.call())["ok"]


async def test_a_thread_binding_beats_the_workspace_binding(personas, board_server, ws_connect):
    from bindings.services.bindings import binding_create

    server, _binding = board_server
    view = await _open_view(ws_connect, personas.owner, personas.thread)
    assert (await view.call())["ok"]
    await _db(
        lambda: binding_create(server=server, workspace=personas.workspace, thread=personas.thread)
    )
    # The thread's own binding applies now (whatever order the database sorts NULLs in),
    # and the view was opened under the workspace's.
    reply = await view.call()
    assert reply["ok"] is False
    assert reply["error"]["code"] == "binding_mismatch"


async def test_a_policy_change_decides_the_very_next_call(personas, board_server, ws_connect):
    from bindings.models import ToolPolicy
    from bindings.services.policies import tool_policy_set

    _server, binding = board_server
    view = await _open_view(ws_connect, personas.owner, personas.thread)
    assert (await view.call())["ok"]
    await _db(lambda: tool_policy_set(binding=binding, tool_name=TOOL, approval="deny"))
    reply = await view.call()
    assert reply["ok"] is False
    assert reply["error"]["code"] == "policy_denies"
    assert await _denials("policy_denies") == 1
    # A narrowed visibility, written without the service.
    await _db(
        lambda: ToolPolicy.objects.filter(binding=binding, tool_name=TOOL).update(
            approval="", visibility_override=["model"]
        )
    )
    reply = await view.call()
    assert reply["error"]["code"] == "tool_not_visible_to_app"
    await _db(lambda: ToolPolicy.objects.filter(binding=binding, tool_name=TOOL).delete())
    assert (await view.call())["ok"]


async def test_a_catalogue_change_decides_the_very_next_call(personas, board_server, ws_connect):
    from bindings.models import AppBinding
    from mcp_bridge.models import Tool

    server, binding = board_server
    view = await _open_view(ws_connect, personas.owner, personas.thread)
    assert (await view.call())["ok"]
    tool = Tool.objects.filter(server_id=server.pk, name=TOOL)
    await _db(lambda: tool.update(visibility=["model"]))
    reply = await view.call()
    assert reply["error"]["code"] == "tool_not_visible_to_app"
    await _db(lambda: tool.update(visibility=["app"]))
    assert (await view.call())["ok"]
    await _db(lambda: AppBinding.objects.filter(pk=binding.pk).update(enabled_tools=["list_items"]))
    reply = await view.call()
    assert reply["error"]["code"] == "tool_not_enabled"


async def test_a_tool_gone_from_the_catalogue_is_refreshed_and_decided_with_the_new_rows(
    personas, board_server, ws_connect
):
    """The authority is read with the view's admission (one statement); a tool missing
    from it refreshes the catalogue, and the call is decided again with rows read after
    the refresh — not with the admission's."""
    from mcp_bridge.models import Tool

    server, _binding = board_server
    view = await _open_view(ws_connect, personas.owner, personas.thread)
    assert (await view.call())["ok"]
    tool = Tool.objects.filter(server_id=server.pk, name=TOOL)
    await _db(lambda: tool.update(present=False))  # as if the server had dropped it
    reply = await view.call()
    assert reply["ok"], reply
    assert await _db(lambda: list(tool.values_list("present", flat=True))) == [True]
    assert await _denials("tool_not_found") == 0


async def test_a_membership_change_decides_the_very_next_call(personas, board_server, ws_connect):
    from chat.models import Membership

    view = await _open_view(ws_connect, personas.member, personas.thread)
    assert (await view.call())["ok"]
    membership = Membership.objects.filter(user=personas.member, workspace=personas.workspace)
    await _db(lambda: membership.update(role="viewer"))
    reply = await view.call()
    assert reply["ok"] is False
    assert reply["error"]["code"] == "viewer_cannot_act"
    from audit.models import AuditEvent
    from audit.types import AuditEventType

    tool_rows = AuditEvent.objects.filter(actor_user=personas.member, tool_name=TOOL)
    rows_before = await _db(tool_rows.count)
    # Deleted behind the sockets' back (no signal, as another process of the embedded
    # profile would): the removal's own message (tests/hardening/test_membership_live.py)
    # would close the socket first; here the decision's own trip must catch it.
    await _db(lambda: membership._raw_delete(membership.db))
    await view.communicator.send_json_to(
        {
            "type": "view.request",
            "rid": "gone",
            "token": view.token,
            "method": "tools/call",
            "params": {"name": TOOL, "arguments": {}},
        }
    )
    reply = await next_frame(view.communicator, lambda f: f.get("rid") == "gone")
    assert reply["error"]["code"] == "forbidden"
    # Checked in the decision's own trip: nothing was decided or stored for that request,
    # the session's end is audited and the socket is closed.
    assert await view.communicator.receive_output(timeout=10) == {
        "type": "websocket.close",
        "code": 4403,
    }
    assert await _db(tool_rows.count) == rows_before
    ended = AuditEvent.objects.filter(
        actor_user=personas.member, event_type=AuditEventType.SOCKET_CLOSED_SESSION_ENDED
    )
    assert await _db(lambda: list(ended.values_list("reason", flat=True))) == [
        "not_a_member_or_session_ended"
    ]


# ------------------------------------------------------------- events built from memory


async def test_events_built_from_memory_are_what_a_reload_reads(personas, board_server, ws_connect):
    from chat.models import ThreadEvent
    from chat.presenters import serialize_tool_call
    from chat.selectors import tool_calls_queryset

    # A person's call (list_items, opening the view), then a view's call.
    view = await _open_view(ws_connect, personas.owner, personas.thread)
    assert (await view.call())["ok"]

    def stored_and_reread():
        pairs = []
        for event in ThreadEvent.objects.filter(thread=personas.thread, kind="toolcall"):
            call = tool_calls_queryset().get(pk=event.payload["id"])
            pairs.append((event.payload, serialize_tool_call(call)))
        return pairs

    pairs = await _db(stored_and_reread)
    running = [p for p, _ in pairs if p["status"] == "running"]
    assert running, "a person's call announces itself at once"
    for payload, reread in pairs:
        if payload["status"] == "running":
            continue  # the row has moved on since
        assert payload == reread


async def test_a_quick_view_call_has_only_its_final_event(personas, board_server, ws_connect):
    from chat.models import ThreadEvent, ToolCall

    view = await _open_view(ws_connect, personas.owner, personas.thread)
    assert (await view.call())["ok"]
    call_id = await _db(lambda: ToolCall.objects.filter(tool_name=TOOL).get().pk)
    statuses = await _db(
        lambda: [
            e.payload["status"]
            for e in ThreadEvent.objects.filter(kind="toolcall").order_by("seq")
            if e.payload["id"] == call_id
        ]
    )
    assert statuses == ["success"]
    # The decision was still audited before the call ran, and the call row recorded.
    assert await _db(
        lambda: (
            ToolCall.objects.get(pk=call_id).origin == "app_view"
            and ToolCall.objects.get(pk=call_id).started_at is not None
        )
    )


async def test_a_slower_view_call_is_announced_before_its_final_event(
    personas, board_server, ws_connect, monkeypatch
):
    from chat.calls import run
    from chat.models import ThreadEvent, ToolCall

    monkeypatch.setattr(run, "ANNOUNCE_AFTER", 0.0)
    view = await _open_view(ws_connect, personas.owner, personas.thread)
    for _ in range(5):
        assert (await view.call())["ok"]

    def statuses_per_call():
        found: dict[int, list[str]] = {}
        for event in ThreadEvent.objects.filter(kind="toolcall").order_by("seq"):
            found.setdefault(event.payload["id"], []).append(event.payload["status"])
        ids = ToolCall.objects.filter(tool_name=TOOL).values_list("pk", flat=True)
        return [found[pk] for pk in ids]

    for statuses in await _db(statuses_per_call):
        # Either announced (then strictly before the result) or overtaken by the result.
        assert statuses in (["running", "success"], ["success"]), statuses


# ------------------------------------------------------------ the view's row, by its key


@pytest.mark.django_db
def test_a_views_row_is_read_by_its_key_and_its_thread_compared_after(personas, statements):
    """With `thread_id` in the statement, a prepared statement's generic plan on
    PostgreSQL walked the thread's index, filtering every call of the thread by id (350
    rows read for one in the benchmark, more in a busy thread; bench/README.md, issue 28).
    The row is read by its primary key; a view of another thread is still no view here."""
    from chat.app_view_bridge import ViewToken, view_for_claims
    from tests import factories

    view = factories.ToolCallFactory(thread=personas.thread)
    claims = ViewToken(view.pk, personas.owner.pk, personas.thread.pk, None, view.server_id)
    statements.clear()
    found = view_for_claims(claims, personas.thread.pk)
    assert found is not None and found.pk == view.pk and found.server.pk == view.server_id
    (statement,) = statements
    view_join = statement.split('LEFT JOIN "chat_toolcall" ON ', 1)[1].split(" LEFT JOIN ")[0]
    assert '"thread_id"' not in view_join, statement
    assert view_for_claims(claims, personas.other_thread.pk) is None
