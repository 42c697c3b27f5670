"""The view bridge's one table (chat/actions/view_methods.py): the server's dispatch, the
browser's copy (static/chat/app_views/methods.js) and a method added by a row alone."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from channels.db import database_sync_to_async

from audit.types import AuditEventType
from bindings import ratelimit
from bindings.policy import ActionKind
from chat.actions import app_views
from chat.actions.view_methods import RATE_LIMITS, VIEW_METHODS, view_method
from tests.conftest import next_frame, open_socket, reply_frame, toolcall_event

ROOT = Path(__file__).resolve().parents[2]
METHODS_JS = ROOT / "static" / "chat" / "app_views" / "methods.js"
# Fields only the browser has: how it paces a notification it forwards.
BROWSER_ONLY = {"pace"}


def _browser_table() -> list[dict]:
    source = METHODS_JS.read_text()
    found = re.search(r"export const VIEW_METHODS = (\[.*?\n\]);", source, re.DOTALL)
    assert found, "methods.js must keep `export const VIEW_METHODS = [...];` as JSON"
    return json.loads(found.group(1))


def test_every_name_and_alias_names_one_method():
    for message in ("request", "notification"):
        names = [
            name
            for row in VIEW_METHODS
            if row.message == message
            for name in (row.name, *row.aliases)
        ]
        assert len(names) == len(set(names)), names
        for name in names:
            assert view_method(name, message) is not None
    assert view_method("ui/initialize", "notification") is None
    assert view_method("teleport", "request") is None


def test_the_browser_table_is_the_servers():
    browser = _browser_table()
    assert [{k: v for k, v in row.items() if k not in BROWSER_ONLY} for row in browser] == [
        {"name": row.name, "message": row.message, "side": row.side, "aliases": list(row.aliases)}
        for row in VIEW_METHODS
    ]
    assert {row.get("pace") for row in browser} <= {None, "burst", "latest"}
    # Pacing is for what the browser forwards.
    assert all(row["side"] == "server" for row in browser if row.get("pace"))


def test_every_server_request_has_a_handler_and_host_rows_none():
    server_requests = {
        r.name for r in VIEW_METHODS if r.side == "server" and r.message == "request"
    }
    assert set(app_views.VIEW_HANDLERS) <= {r.name for r in VIEW_METHODS if r.side == "server"}
    assert server_requests <= set(app_views.VIEW_HANDLERS)
    for row in VIEW_METHODS:
        if row.side == "host":
            assert row.kind is None and not row.compat and row.bucket is None, row


def test_every_kind_is_decided_and_audited():
    for row in VIEW_METHODS:
        for kind in (row.kind, *row.compat.values()):
            if kind is not None:
                assert isinstance(kind.audit_event_type, AuditEventType), (row.name, kind)
        if row.compat:
            assert row.kind is not None, row
    ui_message = view_method("ui/message", "request")
    assert ui_message is not None
    assert ui_message.kind_for({"_compat": "legacy-intent"}) is ActionKind.LEGACY_INTENT
    assert ui_message.kind_for({"_compat": "other"}) is ActionKind.UI_MESSAGE
    assert ui_message.kind_for({"_compat": ["legacy"]}) is ActionKind.UI_MESSAGE


def test_the_bridges_buckets_have_their_defaults(settings):
    settings.ATRIUM_RATE_LIMITS = {
        k: v for k, v in settings.ATRIUM_RATE_LIMITS.items() if k not in RATE_LIMITS
    }
    limits = ratelimit.limits()
    for row in VIEW_METHODS:
        if row.bucket is not None:
            assert row.bucket.name in limits, row.bucket
    for name, (burst, rate) in RATE_LIMITS.items():
        assert limits[name] == ratelimit.Limit(burst, rate)
    # A setting still overrides a table's default.
    settings.ATRIUM_RATE_LIMITS = {**settings.ATRIUM_RATE_LIMITS, "view_widget_state": (3, 0.5)}
    assert ratelimit.limits()["view_widget_state"] == ratelimit.Limit(3, 0.5)


# ------------------------------------------------------------ through the websocket


@pytest.fixture
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


def _log_rows() -> list[dict]:
    from audit.models import AuditEvent

    return list(
        AuditEvent.objects.filter(event_type=AuditEventType.VIEW_LOG_MESSAGE)
        .order_by("id")
        .values(
            "event_type",
            "actor_kind",
            "actor_user_id",
            "actor_label",
            "workspace_id",
            "thread_id",
            "binding_id",
            "server_id",
            "tool_name",
            "action",
            "decision",
            "reason",
            "extra",
        )
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
@pytest.mark.usefixtures("close_connections")
async def test_ui_log_is_recorded_exactly_like_notifications_message(
    personas, board_server, ws_connect
):
    """The draft spec's `ui/log` is an alias of `notifications/message` (a row's alias
    alone): a view's log line is decided and audited the same under either name, and the
    MCP-UI `notify` (``_compat: "legacy"``) keeps its own kind under both."""
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "/call board.list_items"})
    done = await next_frame(owner, toolcall_event("success", "list_items"))
    await owner.send_json_to({"type": "view.open", "toolCallId": done["data"]["id"], "rid": "open"})
    opened = await reply_frame(owner, "open")
    assert opened["ok"], opened
    token = opened["result"]["token"]

    line = {"level": "warning", "logger": "board", "data": {"step": 3, "note": "moved"}}
    legacy = {"level": "info", "logger": "mcp-ui", "data": "hello", "_compat": "legacy"}
    sent = [
        ("notifications/message", line),
        ("ui/log", line),
        ("notifications/message", legacy),
        ("ui/log", legacy),
    ]
    for n, (method, params) in enumerate(sent):
        frame = {"type": "view.notify", "rid": n, "token": token, "method": method}
        await owner.send_json_to({**frame, "params": params})
        reply = await reply_frame(owner, n)
        assert reply["ok"], reply

    rows = await database_sync_to_async(_log_rows)()
    assert len(rows) == 4, rows
    assert rows[0] == rows[1]
    assert rows[2] == rows[3]
    assert rows[0]["action"] == ActionKind.LOG_MESSAGE
    assert rows[0]["decision"] == "allowed"
    assert rows[0]["extra"]["level"] == "warning"
    assert rows[2]["action"] == ActionKind.LEGACY_NOTIFY
    await owner.disconnect()
