"""One card per question (issue 23, F5; docs/consent.md "Approval cards").

Through the real path: a member's thread socket (WebsocketCommunicator), the published
``@modelcontextprotocol/server-system-monitor`` over stdio (its view polls the app-only,
unannotated ``poll-system-stats``), and the example ``board`` (whose ``delete_item``
declares ``destructiveHint: true``). No standing policies: every view call of those tools
asks. The view's polls are sent as the view's bridge sends them (``view.request`` with the
view's token); the browser version of the same story is tests/browser/test_approval_cards.py.
"""

from __future__ import annotations

import asyncio
import sys

import pytest
from channels.db import database_sync_to_async

from bindings import policy
from chat.realtime import waiters
from tests.conftest import ROOT_DIR, next_frame, open_socket, reply_frame, toolcall_event
from tests.fixtures import third_party
from tests.waiting import apoll

POLL = "poll-system-stats"


# ---- the card's risk label (pure) ---------------------------------------------------------


def _tool(annotations):
    return policy.ToolSnap(server_id=1, name="t", annotations=annotations)


@pytest.mark.parametrize(
    ("annotations", "label"),
    [
        ({}, "Not declared safe — treated as destructive"),
        ({"readOnlyHint": False}, "Not declared safe — treated as destructive"),
        ({"destructiveHint": "true"}, "Not declared safe — treated as destructive"),
        ({"destructiveHint": True}, "Destructive"),
        ({"destructiveHint": True, "readOnlyHint": True}, "Destructive"),
        ({"destructiveHint": False}, "Write"),
        ({"readOnlyHint": True}, "Read"),
    ],
)
def test_the_risk_label_says_what_the_server_declared(annotations, label):
    tool = _tool(annotations)
    risk = policy.effective_risk(tool, None)
    assert policy.risk_label(risk, policy.risk_source(tool, None)) == label


def test_an_admins_risk_is_labelled_as_set():
    tool = _tool({})
    rule = policy.PolicySnap(risk="destructive")
    assert policy.risk_source(tool, rule) is policy.RiskSource.ADMIN
    assert policy.risk_label("destructive", policy.risk_source(tool, rule)) == "Destructive"


# ---- through the socket ---------------------------------------------------------------------


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


@pytest.fixture
def sysmon(personas, tmp_path):
    """system-monitor and board bound to the workspace, without a standing policy."""
    if not third_party.installed():
        pytest.skip(third_party.SKIP_REASON)
    from bindings.services.bindings import binding_create
    from mcp_bridge.services.servers import server_add

    entry = third_party.SERVERS["system-monitor"]
    node, *args = entry.command(*entry.stdio_args)
    server = server_add(
        name="System monitor", slug="sysmon", transport="stdio", command=node, args=args
    )
    board = server_add(
        name="Board",
        slug="board",
        transport="stdio",
        command=sys.executable,
        args=[str(ROOT_DIR / "examples" / "board" / "server.py")],
        env={"BOARD_STATE_FILE": str(tmp_path / "board.json")},
    )
    for bound in (server, board):
        binding_create(server=bound, workspace=personas.workspace)
    return server


async def _open_view(sock, slug: str, tool: str) -> str:
    await sock.send_json_to({"type": "message.post", "text": f"/call {slug}.{tool}"})
    done = await next_frame(sock, toolcall_event("success", tool), timeout=60)
    await sock.send_json_to({"type": "view.open", "toolCallId": done["data"]["id"], "rid": "o"})
    opened = await reply_frame(sock, "o")
    assert opened["ok"], opened
    return opened["result"]["token"]


async def _view_call(sock, token: str, rid, tool: str = POLL, arguments=None) -> None:
    await sock.send_json_to(
        {"type": "view.request", "rid": rid, "token": token, "method": "tools/call",
         "params": {"name": tool, "arguments": arguments or {}}}
    )  # fmt: skip


def _approvals(**filters):
    from bindings.models import ApprovalRequest

    return list(
        ApprovalRequest.objects.filter(**filters)
        .order_by("pk")
        .values("pk", "tool_call_id", "asks", "status", "view_id", "risk_source")
    )


def _calls(tool: str) -> list[int]:
    from chat.models import ToolCall

    return list(ToolCall.objects.filter(tool_name=tool).order_by("pk").values_list("pk", flat=True))


def _audit(**filters):
    from audit.models import AuditEvent

    return list(
        AuditEvent.objects.filter(**filters)
        .order_by("pk")
        .values_list("event_type", "decision", "reason", "extra")
    )


def _waiting(call_id: int) -> int:
    """Waiters registered for the call (the waiters module's own table)."""
    return len(waiters._waiters.get(call_id, []))


def _watchers(call_id: int) -> int:
    """Watcher tasks of the call running on this loop, counted from the tasks themselves
    (whatever the waiters module believes it runs)."""
    found = 0
    for task in asyncio.all_tasks():
        coro = task.get_coro()
        frame = getattr(coro, "cr_frame", None)
        if getattr(coro, "__name__", "") == "_watch" and frame is not None:
            found += frame.f_locals.get("call_id") == call_id
    return found


def _asked(n: int):
    def match(frame) -> bool:
        if not toolcall_event("awaiting_approval", POLL)(frame):
            return False
        return (frame["data"]["approval"] or {}).get("asks") == n

    return match


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
async def test_repeated_polls_share_one_card_one_call_and_one_watcher(personas, sysmon, ws_connect):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    token = await _open_view(owner, "sysmon", "get-system-info")

    for rid in (1, 2, 3):
        await _view_call(owner, token, rid)
    first = await next_frame(owner, toolcall_event("awaiting_approval", POLL))
    approval = first["data"]["approval"]
    # The tool declares nothing: the card says so, instead of calling a poll destructive.
    assert approval["risk"] == "destructive"
    assert approval["riskLabel"] == "Not declared safe — treated as destructive"
    again = await next_frame(owner, _asked(3))
    assert again["data"]["id"] == first["data"]["id"]

    rows = await database_sync_to_async(_approvals)()
    assert [(r["asks"], r["status"], r["risk_source"]) for r in rows] == [(3, "pending", "default")]
    assert await database_sync_to_async(_calls)(POLL) == [first["data"]["id"]]
    # Audited: one request, asked again twice (each poll's own decision row as well).
    asked = await database_sync_to_async(_audit)(event_type__in=(500, 505))
    assert [(r[0], r[3].get("asks")) for r in asked] == [(500, None), (505, 2), (505, 3)]
    decisions = await database_sync_to_async(_audit)(action="app_tool_call", tool_name=POLL)
    assert [r[2] for r in decisions] == ["approval_required"] * 3

    # Three waiting requests, one watcher of their call.
    call_id = first["data"]["id"]
    await apoll(lambda: _waiting(call_id) == 3, reason="three waiters")
    assert _watchers(call_id) == 1
    assert waiters.waiting(call_id) == 3 and waiters.watching(call_id) == 1

    # One approval answers all three polls with the one result.
    await owner.send_json_to(
        {"type": "approval.decide", "approvalId": approval["id"], "decision": "approve",
         "rid": "d"}
    )  # fmt: skip
    decided = await reply_frame(owner, "d")
    assert decided["ok"], decided
    replies = [await reply_frame(owner, rid, timeout=60) for rid in (1, 2, 3)]
    assert all(r["ok"] for r in replies), replies
    assert replies[0]["result"] == replies[1]["result"] == replies[2]["result"]
    await apoll(lambda: _waiting(call_id) == 0, reason="waiters gone")
    await apoll(lambda: _watchers(call_id) == 0, reason="the watcher ends")
    await owner.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
async def test_pending_approvals_are_capped_per_view_with_a_clear_refusal(
    personas, sysmon, ws_connect
):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    token = await _open_view(owner, "sysmon", "get-system-info")
    # Three different questions: three cards (the default cap per view).
    for n in range(3):
        await _view_call(owner, token, f"q{n}", arguments={"n": n})
        await next_frame(owner, toolcall_event("awaiting_approval", POLL))
    await _view_call(owner, token, "q3", arguments={"n": 3})
    refused = await reply_frame(owner, "q3")
    assert refused["ok"] is False
    assert refused["error"]["code"] == "too_many_pending_approvals_view"
    assert refused["error"]["jsonrpcCode"] == -32029
    assert "3 approval requests are already waiting in this view" in refused["error"]["message"]
    assert len(await database_sync_to_async(_approvals)()) == 3
    assert len(await database_sync_to_async(_calls)(POLL)) == 3  # no card for the refused one
    rows = await database_sync_to_async(_audit)(event_type=506)
    assert [(r[1], r[2], r[3]["limit"]) for r in rows] == [
        ("denied", "too_many_pending_approvals_view", 3)
    ]
    # The same question again still joins its card: it is not a new one.
    await _view_call(owner, token, "again", arguments={"n": 0})
    joined = await next_frame(owner, _asked(2))
    assert joined["data"]["arguments"] == {"n": 0}
    await owner.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
async def test_pending_approvals_are_capped_per_thread(personas, sysmon, ws_connect, settings):
    settings.ATRIUM_APPROVALS_PENDING_PER_THREAD = 2
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    sysmon_token = await _open_view(owner, "sysmon", "get-system-info")
    board_token = await _open_view(owner, "board", "list_items")
    await _view_call(owner, sysmon_token, "a")
    await next_frame(owner, toolcall_event("awaiting_approval", POLL))
    await _view_call(owner, board_token, "b", tool="delete_item", arguments={"id": "ATR-101"})
    board_wait = await next_frame(owner, toolcall_event("awaiting_approval", "delete_item"))
    # The server declares it destructive: labelled as such.
    assert board_wait["data"]["approval"]["riskLabel"] == "Destructive"
    await _view_call(owner, sysmon_token, "c", arguments={"other": True})
    refused = await reply_frame(owner, "c")
    assert refused["error"]["code"] == "too_many_pending_approvals_thread", refused
    assert "2 approval requests are already waiting in this thread" in refused["error"]["message"]
    rows = await database_sync_to_async(_audit)(event_type=506)
    assert [r[2] for r in rows] == ["too_many_pending_approvals_thread"]
    await owner.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
async def test_a_closed_socket_takes_its_waiters_and_their_watcher(personas, sysmon, ws_connect):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    token = await _open_view(owner, "sysmon", "get-system-info")
    await _view_call(owner, token, 1)
    await _view_call(owner, token, 2)
    waiting = await next_frame(owner, _asked(2))
    call_id = waiting["data"]["id"]
    await apoll(lambda: _waiting(call_id) == 2, reason="two waiters")
    assert _watchers(call_id) == 1

    await owner.disconnect()
    await apoll(lambda: _waiting(call_id) == 0, reason="the socket's waiters leave")
    await apoll(lambda: _watchers(call_id) == 0, reason="their watcher stops")
    assert waiters.watching(call_id) == 0
    # The question itself stays for the members to answer.
    rows = await database_sync_to_async(_approvals)()
    assert [(r["status"], r["asks"]) for r in rows] == [("pending", 2)]
