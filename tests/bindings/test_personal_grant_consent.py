"""A personal grant needs its owner (issue 23, F3; docs/consent.md, docs/oauth.md).

On a server where each member signs in with their own account (``oauth_member``), a call
made by member A's app view runs with A's grant. Only A may consent to spending it: A's own
approval, or an allowance A granted. Anyone else who may decide can reject it, and sees why
they cannot approve it; a forged approval from them is refused and audited.

Through the real path: the example OAuth server (examples/oauth_server, its ``my_notes``
answers with the notes of whoever signed in), both members connected through Atrium's
connect and callback views, thread sockets (WebsocketCommunicator), and the view's requests
as its bridge sends them. The example server has no UI of its own, so the test stores a
view document for its tool (the one setup step that is not a real server's).
"""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient

from bindings import policy, policy_engine
from tests.conftest import next_frame, open_socket, reply_frame, toolcall_event
from tests.oauth.support import authorize_url, callback_path, notes_server

TOOL = "my_notes"


# ---- the rule (pure) ------------------------------------------------------------------------


def test_only_the_owner_of_a_personal_grant_may_approve():
    owner = policy.grant_owner(per_member_grants=True, requested_by_kind="app_view", requester_id=7)
    assert owner == 7
    assert policy.may_approve(role="member", decider_id=7, owner=owner) is None
    assert (
        policy.may_approve(role="owner", decider_id=8, owner=owner) is policy.Reason.PERSONAL_GRANT
    )
    assert policy.may_approve(role="viewer", decider_id=7, owner=owner) is (
        policy.Reason.VIEWER_CANNOT_ACT
    )
    # A shared sign-in (or none) is nobody's own: any owner or member may approve.
    shared = policy.grant_owner(per_member_grants=False, requested_by_kind="model", requester_id=7)
    assert shared is None
    assert policy.may_approve(role="member", decider_id=8, owner=shared) is None


def _decide(*, approved_by=None, allowance=None):
    binding = policy.BindingSnap(
        id=1, server_id=1, scope="workspace", workspace_id=1, per_member_grants=True
    )
    return policy_engine.decide(
        actor=policy.Actor(
            kind="app_view",
            user_id=7,
            role="member",
            view=policy.ViewRef(tool_call_id=5, server_id=1, binding_id=1, thread_id=3),
        ),
        thread=policy.ThreadRef(id=3, workspace_id=1),
        binding=binding,
        tool=policy.ToolSnap(server_id=1, name=TOOL),
        policy=None,
        action=policy.Action(
            kind="app_tool_call",
            server_id=1,
            tool_name=TOOL,
            approved=approved_by is not None,
            approved_by=approved_by,
        ),
        allowance=allowance,
    )


def test_the_engine_counts_only_the_owners_consent():
    assert _decide(approved_by=7).reason_code is policy.Reason.APPROVED
    assert _decide(approved_by=8).reason_code is policy.Reason.PERSONAL_GRANT
    theirs = policy.AllowanceSnap(
        id=1, binding_id=1, tool_name=TOOL, scope="thread", workspace_id=1, thread_id=3,
        granted_by_id=8,
    )  # fmt: skip
    mine = policy.AllowanceSnap(
        id=2, binding_id=1, tool_name=TOOL, scope="thread", workspace_id=1, thread_id=3,
        granted_by_id=7,
    )  # fmt: skip
    assert _decide(allowance=theirs).reason_code is policy.Reason.APPROVAL_REQUIRED
    assert _decide(allowance=mine).reason_code is policy.Reason.ALLOWANCE


# ---- through the sockets --------------------------------------------------------------------


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


async def _connect(user, server, notes, account: str) -> None:
    client = AsyncClient()
    await client.aforce_login(user)
    response = await client.post(f"/oauth/connect/{server.slug}/")
    callback = await notes.consent(authorize_url(response), account)
    answer = await client.get(callback_path(callback))
    assert b'data-oauth-result="connected"' in answer.content, answer.content


@database_sync_to_async
def _notes_bound(url: str, workspace):
    from bindings.services.bindings import binding_create
    from mcp_bridge.models import AuthMode, McpServer

    server = McpServer.objects.create(
        name="Notes",
        slug="notes",
        transport="streamable_http",
        url=url,
        auth_mode=AuthMode.OAUTH_MEMBER,
    )
    binding_create(server=server, workspace=workspace)
    return server


@database_sync_to_async
def _make_view(call_id: int) -> None:
    """Give the call a view document (the example server ships none)."""
    from chat.models import ToolCall
    from mcp_bridge.services.ui_resources import ui_resource_store_document

    call = ToolCall.objects.select_related("server").get(pk=call_id)
    call.ui_resource = ui_resource_store_document(
        server=call.server,
        uri="ui://notes/view",
        mime_type="text/html;profile=mcp-app",
        text="<!doctype html><title>Notes</title><p>Notes</p>",
        meta={},
    )
    call.save(update_fields=["ui_resource"])


async def _view_token(sock, call_id: int, rid: str) -> str:
    await sock.send_json_to({"type": "view.open", "toolCallId": call_id, "rid": rid})
    opened = await reply_frame(sock, rid)
    assert opened["ok"], opened
    return opened["result"]["token"]


async def _view_call(sock, token: str, rid, arguments=None) -> None:
    await sock.send_json_to(
        {"type": "view.request", "rid": rid, "token": token, "method": "tools/call",
         "params": {"name": TOOL, "arguments": arguments or {}}}
    )  # fmt: skip


async def _decide_as(sock, approval_id: int, decision: str, rid: str) -> dict:
    await sock.send_json_to(
        {"type": "approval.decide", "approvalId": approval_id, "decision": decision, "rid": rid}
    )
    return await reply_frame(sock, rid, timeout=60)


def _audit(**filters):
    from audit.models import AuditEvent

    return list(
        AuditEvent.objects.filter(**filters)
        .order_by("pk")
        .values_list("event_type", "decision", "reason", "actor_user_id", "extra")
    )


def _approval_state(approval_id: int):
    from bindings.models import ApprovalRequest

    return ApprovalRequest.objects.values_list("status", "decided_by_id").get(pk=approval_id)


def _name(user) -> str:
    return user.get_full_name() or user.get_username()


def _awaiting_of(user):
    def match(frame) -> bool:
        data = frame.get("data") or {}
        return toolcall_event("awaiting_approval", TOOL)(frame) and (
            (data.get("requestedBy") or {}).get("id") == user.pk
        )

    return match


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
async def test_a_personal_grant_needs_its_owner(personas, ws_connect):
    amy, ben = personas.member, personas.owner  # A: a member; B: the workspace's owner
    async with notes_server() as notes:
        server = await _notes_bound(notes.url, personas.workspace)
        await _connect(amy, server, notes, "alice")
        await _connect(ben, server, notes, "bob")
        a = await open_socket(ws_connect, amy, personas.thread)
        b = await open_socket(ws_connect, ben, personas.thread)

        # A's own /call runs with A's grant; it becomes the view both members open.
        await a.send_json_to({"type": "message.post", "text": f"/call notes.{TOOL}"})
        own = await next_frame(a, toolcall_event("success", TOOL), timeout=60)
        await _make_view(own["data"]["id"])
        a_token = await _view_token(a, own["data"]["id"], "ao")
        b_token = await _view_token(b, own["data"]["id"], "bo")

        # A's view asks; the card names the one person who may approve it.
        await _view_call(a, a_token, "a1")
        asked = await next_frame(b, _awaiting_of(amy))
        approval = asked["data"]["approval"]
        expected = f"Only {_name(amy)} can approve this: it uses their own sign-in to Notes."
        assert approval["onlyApprover"] == {"id": amy.pk, "name": _name(amy), "message": expected}

        # B's forged approvals (once, and remembered) are refused with the reason, audited.
        for n, decision in enumerate(("approve", "allow_thread")):
            refused = await _decide_as(b, approval["id"], decision, f"bf{n}")
            assert refused["ok"] is False
            assert refused["error"]["code"] == "personal_grant", refused
            assert refused["error"]["message"] == expected
        rows = await database_sync_to_async(_audit)(event_type=523, actor_user_id=ben.pk)
        assert [(r[1], r[2], r[4]["message"]) for r in rows] == [
            ("denied", "personal_grant", expected)
        ] * 2
        assert await database_sync_to_async(_approval_state)(approval["id"]) == ("pending", None)

        # B's own view call is B's to allow: it runs with B's grant, and B's allowance in
        # this thread leaves A's request pending.
        await _view_call(b, b_token, "b1")
        b_asked = await next_frame(b, _awaiting_of(ben))
        assert b_asked["data"]["approval"]["onlyApprover"]["id"] == ben.pk
        allowed = await _decide_as(b, b_asked["data"]["approval"]["id"], "allow_thread", "ba")
        assert allowed["ok"], allowed
        b_reply = await reply_frame(b, "b1", timeout=60)
        assert b_reply["ok"], b_reply
        assert "Notes of Bob" in b_reply["result"]["content"][0]["text"]
        assert await database_sync_to_async(_approval_state)(approval["id"]) == ("pending", None)
        # Not even tried on B's behalf: no further refusal in B's name.
        assert len(await database_sync_to_async(_audit)(event_type=523)) == 2

        # B may reject A's request.
        rejected = await _decide_as(b, approval["id"], "reject", "br")
        assert rejected["ok"], rejected
        a_reply = await reply_frame(a, "a1", timeout=60)
        assert a_reply["ok"] is False
        assert a_reply["error"]["code"] == "approval_rejected"

        # A's next call is not covered by B's allowance: it asks; A approves; A's grant.
        await _view_call(a, a_token, "a2")
        again = await next_frame(a, _awaiting_of(amy))
        decisions = await database_sync_to_async(_audit)(
            action="app_tool_call", actor_user_id=amy.pk
        )
        assert decisions[-1][2] == "approval_required"
        approved = await _decide_as(a, again["data"]["approval"]["id"], "approve", "aa")
        assert approved["ok"], approved
        a_reply = await reply_frame(a, "a2", timeout=60)
        assert a_reply["ok"], a_reply
        assert "Notes of Alice" in a_reply["result"]["content"][0]["text"]
        used = await database_sync_to_async(_audit)(event_type=810)
        grants = [r[4].get("grant_user_id") for r in used]
        assert grants[-1] == amy.pk

        await a.disconnect()
        await b.disconnect()
