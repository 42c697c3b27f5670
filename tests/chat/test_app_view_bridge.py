"""App view requests through the real websocket path: tokens, policy, audit (DESIGN §8)."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from chat.sandbox_hosts import sandbox_label_for
from tests.conftest import next_frame, open_socket, reply_frame, toolcall_event

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


async def _board_view(ws_connect, personas):
    owner = await open_socket(ws_connect, personas.owner, personas.thread)
    await owner.send_json_to({"type": "message.post", "text": "/call board.list_items"})
    done = await next_frame(owner, toolcall_event("success", "list_items"))
    await owner.send_json_to({"type": "view.open", "toolCallId": done["data"]["id"], "rid": "open"})
    opened = await reply_frame(owner, "open")
    assert opened["ok"], opened
    return owner, done["data"], opened["result"]


async def _denials(reason: str) -> int:
    from audit.models import AuditEvent

    return await database_sync_to_async(
        AuditEvent.objects.filter(decision="denied", reason=reason).count
    )()


async def test_view_open_describes_a_sandboxed_view(personas, board_server, ws_connect):
    owner, call, view = await _board_view(ws_connect, personas)
    origin = f"http://{sandbox_label_for('board', personas.workspace.pk)}.localhost:8000"
    assert view["sandboxUrl"].startswith(origin + "/sandbox/")
    assert view["sandboxOrigin"] == origin
    assert view["documentUrl"].startswith("/views/doc/")
    assert view["flavor"] == "mcp-app"
    assert "default-src 'none'" in view["csp"]
    assert view["toolResult"]["structuredContent"] == call["result"]["structured"]
    assert view["toolResult"]["_meta"] == call["result"]["uiMeta"]
    assert view["toolInput"] == {}
    await owner.disconnect()


async def test_app_only_tool_round_trips_from_the_view(personas, board_server, ws_connect):
    owner, call, view = await _board_view(ws_connect, personas)
    first = call["result"]["structured"]
    item = next(i for col in first["columns"] for i in col["items"])
    await owner.send_json_to(
        {
            "type": "view.request",
            "rid": 1,
            "token": view["token"],
            "method": "tools/call",
            "params": {"name": "move_item", "arguments": {"id": item["id"], "to": "done"}},
        }
    )
    reply = await reply_frame(owner, 1)
    assert reply["ok"], reply
    done_items = next(
        c for c in reply["result"]["structuredContent"]["columns"] if c["id"] == "done"
    )
    assert item["id"] in [i["id"] for i in done_items["items"]]
    await owner.disconnect()


async def test_view_cannot_reach_another_server(personas, board_server, ws_connect):
    import sys

    from bindings.services.bindings import binding_create
    from mcp_bridge.services.servers import server_add
    from tests.conftest import ROOT_DIR

    await database_sync_to_async(
        lambda: binding_create(
            server=server_add(
                name="Media",
                slug="media",
                transport="stdio",
                command=sys.executable,
                args=[str(ROOT_DIR / "examples" / "media" / "server.py")],
            ),
            workspace=personas.workspace,
        )
    )()
    owner, call, view = await _board_view(ws_connect, personas)
    await owner.send_json_to(
        {
            "type": "view.request",
            "rid": 2,
            "token": view["token"],
            "method": "tools/call",
            "params": {"name": "get_image", "arguments": {}},
        }
    )
    reply = await reply_frame(owner, 2)
    assert reply["ok"] is False
    assert reply["error"]["code"] == "tool_not_found"
    assert await _denials("tool_not_found") >= 1
    await owner.disconnect()


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(document.cookie)",
        "data:text/html,<script>1</script>",
        "file:///etc/passwd",
        " JavaScript:alert(1)",
        "http://example.com",
    ],
)
async def test_open_link_rejects_unsafe_schemes_and_audits(personas, board_server, ws_connect, url):
    owner, _, view = await _board_view(ws_connect, personas)
    await owner.send_json_to(
        {
            "type": "view.request",
            "rid": 3,
            "token": view["token"],
            "method": "ui/open-link",
            "params": {"url": url},
        }
    )
    reply = await reply_frame(owner, 3)
    assert reply["ok"] is False
    assert reply["error"]["code"] in ("scheme_not_allowed", "invalid_url")
    assert await _denials(reply["error"]["code"]) >= 1
    await owner.disconnect()


async def test_open_link_allows_https(personas, board_server, ws_connect):
    owner, _, view = await _board_view(ws_connect, personas)
    await owner.send_json_to(
        {
            "type": "view.request",
            "rid": 4,
            "token": view["token"],
            "method": "ui/open-link",
            "params": {"url": "https://example.com/docs"},
        }
    )
    assert (await reply_frame(owner, 4))["ok"] is True
    await owner.disconnect()


async def test_forged_and_foreign_tokens_are_rejected(personas, board_server, ws_connect):
    owner, _, view = await _board_view(ws_connect, personas)
    member = await open_socket(ws_connect, personas.member, personas.thread)
    for rid, (who, token) in enumerate(
        [(owner, view["token"] + "x"), (owner, "garbage"), (member, view["token"])]
    ):
        await who.send_json_to(
            {
                "type": "view.request",
                "rid": rid,
                "token": token,
                "method": "ping",
                "params": {},
            }
        )
        reply = await reply_frame(who, rid)
        assert reply["ok"] is False and reply["error"]["code"] == "invalid_token"
    assert (
        await _denials("invalid_token") + await _denials("token_not_for_this_thread_or_user") == 3
    )
    await owner.disconnect()
    await member.disconnect()


async def test_ui_message_is_labelled_and_rate_limited(personas, board_server, ws_connect):
    owner, _, view = await _board_view(ws_connect, personas)
    outcomes = []
    for i in range(8):
        await owner.send_json_to(
            {
                "type": "view.request",
                "rid": f"m{i}",
                "token": view["token"],
                "method": "ui/message",
                "params": {"role": "user", "content": [{"type": "text", "text": f"note {i}"}]},
            }
        )
        outcomes.append(await reply_frame(owner, f"m{i}"))
    assert [o["ok"] for o in outcomes] == [True] * 6 + [False] * 2
    assert outcomes[-1]["error"]["code"] == "rate_limited"
    from chat.models import Message

    labels = await database_sync_to_async(
        lambda: set(
            Message.objects.filter(via_tool_call__isnull=False).values_list(
                "author_label", flat=True
            )
        )
    )()
    assert labels == {"Board (via view)"}
    await owner.disconnect()


async def test_update_model_context_last_write_wins(personas, board_server, ws_connect):
    from chat.models import ToolCall

    owner, call, view = await _board_view(ws_connect, personas)
    for rid, text in ((5, "first"), (6, "second")):
        await owner.send_json_to(
            {
                "type": "view.request",
                "rid": rid,
                "token": view["token"],
                "method": "ui/update-model-context",
                "params": {"content": [{"type": "text", "text": text}]},
            }
        )
        assert (await reply_frame(owner, rid))["ok"]
    stored = await database_sync_to_async(
        lambda: ToolCall.objects.get(pk=call["id"]).model_context
    )()
    assert stored == {"content": [{"type": "text", "text": "second"}]}
    await owner.disconnect()


async def test_viewer_view_cannot_call_tools(personas, board_server, ws_connect):
    owner, call, _ = await _board_view(ws_connect, personas)
    viewer = await open_socket(ws_connect, personas.viewer, personas.thread)
    await viewer.send_json_to({"type": "view.open", "toolCallId": call["id"], "rid": "o"})
    opened = await reply_frame(viewer, "o")
    assert opened["ok"]
    await viewer.send_json_to(
        {
            "type": "view.request",
            "rid": 7,
            "token": opened["result"]["token"],
            "method": "tools/call",
            "params": {"name": "refresh", "arguments": {}},
        }
    )
    reply = await reply_frame(viewer, 7)
    assert reply["ok"] is False and reply["error"]["code"] == "viewer_cannot_act"
    await owner.disconnect()
    await viewer.disconnect()


async def test_destructive_call_from_the_view_waits_for_approval(
    personas, board_server, ws_connect
):
    owner, call, view = await _board_view(ws_connect, personas)
    member = await open_socket(ws_connect, personas.member, personas.thread)
    item_id = call["result"]["structured"]["columns"][0]["items"][0]["id"]
    await owner.send_json_to(
        {
            "type": "view.request",
            "rid": 8,
            "token": view["token"],
            "method": "tools/call",
            "params": {"name": "delete_item", "arguments": {"id": item_id}},
        }
    )
    waiting = await next_frame(member, toolcall_event("awaiting_approval", "delete_item"))
    assert waiting["data"]["origin"] == "app_view" and waiting["data"]["parentView"] == call["id"]
    await member.send_json_to(
        {
            "type": "approval.decide",
            "approvalId": waiting["data"]["approval"]["id"],
            "decision": "approve",
            "rid": "a",
        }
    )
    reply = await reply_frame(owner, 8, timeout=30)
    assert reply["ok"], reply
    remaining = [
        i["id"] for c in reply["result"]["structuredContent"]["columns"] for i in c["items"]
    ]
    assert item_id not in remaining
    await owner.disconnect()
    await member.disconnect()


async def test_rejected_approval_returns_an_error_to_the_view(personas, board_server, ws_connect):
    owner, call, view = await _board_view(ws_connect, personas)
    item_id = call["result"]["structured"]["columns"][0]["items"][0]["id"]
    await owner.send_json_to(
        {
            "type": "view.request",
            "rid": 9,
            "token": view["token"],
            "method": "tools/call",
            "params": {"name": "delete_item", "arguments": {"id": item_id}},
        }
    )
    waiting = await next_frame(owner, toolcall_event("awaiting_approval", "delete_item"))
    await owner.send_json_to(
        {
            "type": "approval.decide",
            "approvalId": waiting["data"]["approval"]["id"],
            "decision": "reject",
            "rid": "r",
        }
    )
    reply = await reply_frame(owner, 9)
    assert reply["ok"] is False and reply["error"]["code"] == "approval_rejected"
    await owner.disconnect()


async def test_sandbox_page_is_served_only_on_the_sandbox_host(personas, board_server, ws_connect):
    owner, _, view = await _board_view(ws_connect, personas)
    host = view["sandboxOrigin"].removeprefix("http://")
    path = view["sandboxUrl"].removeprefix(view["sandboxOrigin"])

    def fetch():
        sandbox = Client(HTTP_HOST=host).get(path)
        # Host normalization: case and a trailing dot name the same server's host.
        odd = Client(HTTP_HOST=host.upper().replace(":8000", ".:8000")).get(path)
        app = Client().get(path)
        expired = Client(HTTP_HOST=host).get("/sandbox/not-a-token/")
        return sandbox, odd, app, expired

    sandbox, odd, app, expired = await database_sync_to_async(fetch)()
    assert sandbox.status_code == 200 and odd.status_code == 200
    for response in (sandbox, odd, expired):
        assert not response.cookies and "Set-Cookie" not in response.headers
    policy = sandbox.headers["Content-Security-Policy"]
    directives = {p.split()[0]: p.split()[1:] for p in policy.split(";") if p.strip()}
    assert directives["default-src"] == ["'none'"]
    assert directives["connect-src"] == ["'none'"]
    assert "http://localhost:8000" in directives["frame-ancestors"]
    assert app.status_code == 404 and expired.status_code == 404
    await owner.disconnect()


async def test_a_view_is_refused_on_another_servers_sandbox_host(
    personas, board_server, ws_connect
):
    from audit.models import AuditEvent

    owner, call, view = await _board_view(ws_connect, personas)
    path = view["sandboxUrl"].removeprefix(view["sandboxOrigin"])
    nested = "x." + view["sandboxOrigin"].removeprefix("http://")

    def fetch():
        return [
            Client(HTTP_HOST=host).get(path)
            for host in ("other.localhost:8000", nested, "localhost.:8000")
        ]

    foreign, nested, app = await database_sync_to_async(fetch)()
    assert foreign.status_code == 404 and nested.status_code == 404 and app.status_code == 404
    refused = await database_sync_to_async(
        lambda: list(AuditEvent.objects.filter(event_type=230).values("reason", "extra"))
    )()
    assert len(refused) == 1  # the nested name never reaches the view
    assert refused[0]["reason"] == "wrong_server_origin"
    assert refused[0]["extra"]["view"] == call["id"]
    await owner.disconnect()


async def test_one_server_in_two_workspaces_has_two_sandbox_origins(
    personas, board_server, ws_connect
):
    """F12: storage is per origin, so a server's views in two workspaces get two origins,
    and a token is refused on the other workspace's origin (docs/sandbox.md)."""
    from audit.models import AuditEvent
    from tests import factories

    server, _ = board_server
    await database_sync_to_async(factories.AppBindingFactory)(
        server=server, workspace=personas.other_workspace
    )
    owner, call, view = await _board_view(ws_connect, personas)
    outsider = await open_socket(ws_connect, personas.outsider, personas.other_thread)
    await outsider.send_json_to({"type": "message.post", "text": "/call board.list_items"})
    done = await next_frame(outsider, toolcall_event("success", "list_items"))
    await outsider.send_json_to({"type": "view.open", "toolCallId": done["data"]["id"], "rid": 1})
    other = (await reply_frame(outsider, 1))["result"]

    assert view["sandboxOrigin"] != other["sandboxOrigin"]
    for opened in (view, other):
        assert opened["sandboxUrl"].startswith(opened["sandboxOrigin"] + "/sandbox/")
        assert opened["sandboxOrigin"].startswith("http://board-")  # the readable key
        assert opened["sandboxOrigin"].endswith(".localhost:8000")
    own_host = view["sandboxOrigin"].removeprefix("http://")
    other_host = other["sandboxOrigin"].removeprefix("http://")
    path = view["sandboxUrl"].removeprefix(view["sandboxOrigin"])

    def fetch():
        return Client(HTTP_HOST=own_host).get(path), Client(HTTP_HOST=other_host).get(path)

    own, foreign = await database_sync_to_async(fetch)()
    assert own.status_code == 200
    assert foreign.status_code == 404 and not foreign.cookies
    refused = await database_sync_to_async(
        lambda: list(AuditEvent.objects.filter(event_type=230).values("extra", "workspace_id"))
    )()
    assert len(refused) == 1, refused
    assert refused[0]["extra"] == {"view": call["id"], "host": other_host}
    assert refused[0]["workspace_id"] == personas.workspace.pk
    await owner.disconnect()
    await outsider.disconnect()


async def test_document_needs_membership_and_token(personas, board_server, ws_connect):
    owner, _, view = await _board_view(ws_connect, personas)

    def fetch(user, url):
        client = Client()
        client.force_login(user)
        return client.get(url)

    ok = await database_sync_to_async(fetch)(personas.owner, view["documentUrl"])
    stranger = await database_sync_to_async(fetch)(personas.outsider, view["documentUrl"])
    body = b"".join([chunk async for chunk in ok]) if ok.streaming else ok.content
    assert ok.status_code == 200 and b"<html" in body.lower()
    assert ok["Content-Type"].startswith("text/plain")
    assert stranger.status_code == 404
    await owner.disconnect()
