"""Consent, persona by persona, through the real websocket path (issue 11, docs/consent.md).

owner / member / viewer / outsider × approve once / allow in this thread / always allow in
this workspace × read / write / unannotated / declared-destructive tools. Real servers: the
`board` example (read ``list_items``, write ``add_item``, declared-destructive
``delete_item``) and the published ``@modelcontextprotocol/server-basic-vanillajs``
(``get-time``, no annotations: rated destructive by the MCP default). No standing policies:
whatever runs, runs on a consent these tests give or see refused.

Every case: a view's call of the tool asks (read tools run at once), the persona tries to
decide it, and the test checks who may grant what, that nothing ran unapproved, and the
audit rows each step left.
"""

from __future__ import annotations

import sys

import pytest
from channels.db import database_sync_to_async

from tests.conftest import ROOT_DIR, next_frame, open_socket, reply_frame, toolcall_event
from tests.fixtures import third_party

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# kind → (server slug, the view's own tool to /call first, the tool under test, its args)
TOOLS = {
    "read": ("board", "list_items", "list_items", {}),
    "write": ("board", "list_items", "add_item", {"title": "From the view"}),
    "unannotated": ("basic", "get-time", "get-time", {}),
    "destructive": ("board", "list_items", "delete_item", {"id": "ATR-101"}),
}
GRANTS = {"once": "approve", "thread": "allow_thread", "workspace": "allow_workspace"}
PERSONAS = ("owner", "member", "viewer", "outsider")


def _may_grant(persona: str, grant: str, kind: str) -> bool:
    """The rule under test, stated once: who may give which consent for which tool."""
    if persona not in ("owner", "member"):
        return False
    if grant == "once":
        return True
    if kind == "destructive":  # the server declares it: every call asks
        return False
    return grant == "thread" or persona == "owner"


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


@pytest.fixture
def consent_servers(personas, tmp_path):
    """board and basic-vanillajs bound to the workspace, with no standing policy."""
    if not third_party.installed():
        pytest.skip(third_party.SKIP_REASON)
    from bindings.services.bindings import binding_create
    from mcp_bridge.services.servers import server_add

    board = server_add(
        name="Board",
        slug="board",
        transport="stdio",
        command=sys.executable,
        args=[str(ROOT_DIR / "examples" / "board" / "server.py")],
        env={"BOARD_STATE_FILE": str(tmp_path / "board.json")},
    )
    basic_entry = third_party.SERVERS["basic-vanillajs"]
    node, *args = basic_entry.command(*basic_entry.stdio_args)
    basic = server_add(name="Basic", slug="basic", transport="stdio", command=node, args=args)
    for server in (board, basic):
        binding_create(server=server, workspace=personas.workspace)
    return {"board": board, "basic": basic}


def _audit(**filters):
    from audit.models import AuditEvent

    return list(
        AuditEvent.objects.filter(**filters)
        .order_by("id")
        .values_list("event_type", "decision", "reason", "actor_user_id", "extra")
    )


def _allowances():
    from bindings.models import Allowance

    return list(Allowance.objects.values_list("tool_name", "thread_id", "granted_by_id"))


async def _view_call(owner, view_token, tool, arguments, rid):
    await owner.send_json_to(
        {"type": "view.request", "rid": rid, "token": view_token, "method": "tools/call",
         "params": {"name": tool, "arguments": arguments}}
    )  # fmt: skip


async def _open_view(owner, slug, view_tool):
    """The owner's own /call of the view's tool runs at once (no card) and shows its view."""
    await owner.send_json_to({"type": "message.post", "text": f"/call {slug}.{view_tool}"})
    done = await next_frame(owner, toolcall_event(None, view_tool))
    while done["data"]["status"] == "running":
        assert done["data"]["approval"] is None
        done = await next_frame(owner, toolcall_event(None, view_tool))
    assert done["data"]["status"] == "success", done["data"]
    assert done["data"]["approval"] is None
    await owner.send_json_to({"type": "view.open", "toolCallId": done["data"]["id"], "rid": "o"})
    opened = await reply_frame(owner, "o")
    assert opened["ok"], opened
    return opened["result"]["token"]


@pytest.mark.parametrize("kind", list(TOOLS))
@pytest.mark.parametrize("grant", list(GRANTS))
@pytest.mark.parametrize("persona", PERSONAS)
async def test_consent_matrix(personas, consent_servers, ws_connect, persona, grant, kind):
    slug, view_tool, tool, arguments = TOOLS[kind]
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    token = await _open_view(owner, slug, view_tool)

    await _view_call(owner, token, tool, arguments, rid="first")
    if kind == "read":
        # A read tool needs no consent: it runs at once, whoever holds the thread.
        reply = await reply_frame(owner, "first")
        assert reply["ok"], reply
        rows = await database_sync_to_async(_audit)(action="app_tool_call", tool_name=tool)
        assert [(r[1], r[2]) for r in rows] == [("allowed", "ok")]
        await owner.disconnect()
        return

    waiting = await next_frame(owner, toolcall_event("awaiting_approval", tool))
    approval = waiting["data"]["approval"]
    assert approval["offers"] == ([] if kind == "destructive" else ["thread", "workspace"])
    call_id = waiting["data"]["id"]

    user = getattr(personas, persona)
    if persona == "outsider":
        # Not a member: the thread's socket is refused (and audited); nothing is decided.
        _, connected, _ = await ws_connect(user, personas.thread.pk)
        assert not connected
        rows = await database_sync_to_async(_audit)(event_type=120, actor_user_id=user.pk)
        assert rows, "the refused socket leaves an audit row"
        decider = None
    else:
        decider = (
            owner if persona == "owner" else await open_socket(ws_connect, user, personas.thread)
        )
        await decider.send_json_to(
            {"type": "approval.decide", "approvalId": approval["id"], "decision": GRANTS[grant],
             "rid": "d"}
        )  # fmt: skip
        answer = await reply_frame(decider, "d")

    allowed = _may_grant(persona, grant, kind)
    if not allowed:
        if decider is not None:
            assert answer["ok"] is False
            # The role is checked first: a member asking for the workspace is refused as
            # such even for a declared-destructive tool.
            role_refused = persona == "viewer" or (persona == "member" and grant == "workspace")
            expected = "forbidden" if role_refused else "cannot_allow"
            assert answer["error"]["code"] == expected, answer
            refusals = await database_sync_to_async(_audit)(
                event_type__in=(522, 523), actor_user_id=user.pk
            )
            audited = (
                (523, "denied", "viewer_cannot_act")
                if persona == "viewer"
                else (522, "denied", expected)
            )
            assert [(r[0], r[1], r[2]) for r in refusals] == [audited]
        # Nothing ran, nothing was remembered, the request still waits.
        from bindings.models import ApprovalRequest
        from chat.models import ToolCall

        status = await database_sync_to_async(
            lambda: (ToolCall.objects.get(pk=call_id).status,
                     ApprovalRequest.objects.get(pk=approval["id"]).status)
        )()  # fmt: skip
        assert status == ("awaiting_approval", "pending")
        assert await database_sync_to_async(_allowances)() == []
        ran = await database_sync_to_async(_audit)(event_type=310, tool_name=tool)
        assert [r for r in ran if r[4].get("tool_call_id") == call_id] == []
        if decider is not None and decider is not owner:
            await decider.disconnect()
        await owner.disconnect()
        return

    # Granted: the waiting call runs with exactly the shown arguments.
    assert answer["ok"], answer
    reply = await reply_frame(owner, "first", timeout=30)
    assert reply["ok"], reply
    decided = await database_sync_to_async(_audit)(event_type=501, tool_name=tool)
    assert [(r[1], r[3]) for r in decided] == [("approved", user.pk)]
    created = await database_sync_to_async(_audit)(event_type=520, tool_name=tool)
    remembered = await database_sync_to_async(_allowances)()
    if grant == "once":
        assert created == [] and remembered == []
    else:
        thread_id = personas.thread.pk if grant == "thread" else None
        assert remembered == [(tool, thread_id, user.pk)]
        assert [(r[1], r[2], r[3], r[4]["scope"]) for r in created] == [
            ("allowed", f"allowed_in_{grant}", user.pk, grant)
        ]

    # The next call of the same tool: asks again after "once", runs on the allowance else.
    await _view_call(owner, token, tool, arguments, rid="second")
    if grant == "once":
        again = await next_frame(owner, toolcall_event("awaiting_approval", tool))
        assert again["data"]["id"] != call_id
    else:
        second = await reply_frame(owner, "second", timeout=30)
        assert second["ok"], second
        rows = await database_sync_to_async(_audit)(action="app_tool_call", tool_name=tool)
        last = rows[-1]
        assert (last[1], last[2], last[4]["allowance_scope"]) == ("approved", "allowance", grant)
    if decider is not owner:
        await decider.disconnect()
    await owner.disconnect()


async def test_who_may_revoke_and_everyone_sees_it_live(personas, consent_servers, ws_connect):
    """Workspace allowances: only owners revoke; a viewer or another workspace's owner
    cannot; each refusal is audited; members see the list change live."""
    from bindings.models import Allowance

    slug, view_tool, tool, arguments = TOOLS["unannotated"]
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    member = await open_socket(ws_connect, personas.member, personas.thread)
    viewer = await open_socket(ws_connect, personas.viewer, personas.thread)
    outsider = await open_socket(ws_connect, personas.outsider, personas.other_thread)
    token = await _open_view(owner, slug, view_tool)
    await _view_call(owner, token, tool, arguments, rid="first")
    waiting = await next_frame(owner, toolcall_event("awaiting_approval", tool))
    await owner.send_json_to(
        {"type": "approval.decide", "approvalId": waiting["data"]["approval"]["id"],
         "decision": "allow_workspace", "rid": "d"}
    )  # fmt: skip
    assert (await reply_frame(owner, "d"))["ok"]
    shown = await next_frame(member, lambda f: f.get("kind") == "allowances")
    (listed,) = shown["data"]["allowances"]
    assert (listed["tool"], listed["scope"], listed["grantedBy"]["id"]) == (
        tool,
        "workspace",
        personas.owner.pk,
    )
    allowance_id = listed["id"]

    for sock, user, code in (
        (member, personas.member, "forbidden"),
        (viewer, personas.viewer, "forbidden"),
        (outsider, personas.outsider, "not_found"),
    ):
        await sock.send_json_to({"type": "allowance.revoke", "allowanceId": allowance_id, "rid": 1})
        answer = await reply_frame(sock, 1)
        assert answer["ok"] is False and answer["error"]["code"] == code, answer
        if code == "forbidden":
            refused = await database_sync_to_async(_audit)(event_type=522, actor_user_id=user.pk)
            assert [(r[1], r[2], r[4]["attempt"]) for r in refused] == [
                ("denied", "forbidden", "revoke")
            ]
    assert await database_sync_to_async(Allowance.objects.filter(revoked_at=None).count)() == 1

    await owner.send_json_to({"type": "allowance.revoke", "allowanceId": allowance_id, "rid": 2})
    assert (await reply_frame(owner, 2))["ok"]
    cleared = await next_frame(member, lambda f: f.get("kind") == "allowances")
    assert cleared["data"]["allowances"] == []
    revoked = await database_sync_to_async(_audit)(event_type=521)
    assert [(r[1], r[2], r[3]) for r in revoked] == [("allowed", "revoked", personas.owner.pk)]
    # The very next call asks again.
    await _view_call(owner, token, tool, arguments, rid="after")
    await next_frame(owner, toolcall_event("awaiting_approval", tool))
    for sock in (owner, member, viewer, outsider):
        await sock.disconnect()
