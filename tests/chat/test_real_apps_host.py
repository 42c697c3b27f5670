"""What real apps need from the host (issue 27, Deliver 4), through the real socket path.

The server is tests/fixtures/mcp_servers/real_apps.py ("Real apps", stdio): a widget whose
app-only plumbing tools are write tools (so a view's call asks), ``set_count(count: int)``
(pydantic coerces "7"), ``w_reset`` (declared destructive), a 7 MB single-file app and a
17 MB one. The view's requests are sent as its bridge sends them (``view.request`` with the
view's token); the browser version is tests/browser/test_real_apps_host.py.
"""

from __future__ import annotations

import sys
import tracemalloc

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient

from audit.models import AuditEvent
from audit.types import AuditEventType
from tests.conftest import ROOT_DIR, next_frame, open_socket, reply_frame, toolcall_event

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SERVER_PY = ROOT_DIR / "tests" / "fixtures" / "mcp_servers" / "real_apps.py"
MB = 1024 * 1024


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    from mcp_bridge import gateway

    await gateway.close_all()


@pytest.fixture
def real_apps(personas):
    from bindings.services.bindings import binding_create
    from mcp_bridge.services.servers import server_add

    server = server_add(
        name="Real apps", slug="real", transport="stdio", command=sys.executable,
        args=[str(SERVER_PY)],
    )  # fmt: skip
    binding_create(server=server, workspace=personas.workspace)
    return server


async def _open_view(sock, tool: str = "widget") -> tuple[int, dict]:
    await sock.send_json_to({"type": "message.post", "text": f"/call real.{tool}"})
    done = await next_frame(sock, toolcall_event("success", tool), timeout=60)
    call_id = done["data"]["id"]
    await sock.send_json_to({"type": "view.open", "toolCallId": call_id, "rid": f"o{call_id}"})
    return call_id, await reply_frame(sock, f"o{call_id}")


async def _view_call(sock, token: str, rid: str, tool: str, arguments=None) -> None:
    await sock.send_json_to(
        {"type": "view.request", "rid": rid, "token": token, "method": "tools/call",
         "params": {"name": tool, "arguments": arguments or {}}}
    )  # fmt: skip


def _approval_event(tool: str):
    def match(frame) -> bool:
        data = frame.get("data") or {}
        approval = data.get("approval") or {}
        return (
            frame.get("kind") == "toolcall"
            and data.get("tool") == tool
            and approval.get("status") == "pending"
        )

    return match


@database_sync_to_async
def _approvals(**filters) -> list[dict]:
    from bindings.models import ApprovalRequest

    return list(ApprovalRequest.objects.filter(**filters).values("pk", "tool_name", "status"))


@database_sync_to_async
def _audit(event_type: int) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(event_type=event_type).order_by("pk"))


async def _decide(sock, approval_id: int, decision: str, rid: str) -> dict:
    await sock.send_json_to(
        {"type": "approval.decide", "approvalId": approval_id, "decision": decision, "rid": rid}
    )
    return await reply_frame(sock, rid)


# ---- arguments: checked before the card, never more strictly than the server -------------


async def test_a_form_sending_text_for_an_integer_gets_its_card_and_then_runs(
    personas, real_apps, ws_connect
):
    sock = await open_socket(ws_connect, personas.owner, personas.thread)
    _, opened = await _open_view(sock)
    token = opened["result"]["token"]

    await _view_call(sock, token, "seven", "set_count", {"count": "7"})
    asked = await next_frame(sock, _approval_event("set_count"), timeout=30)
    approval = asked["data"]["approval"]
    assert approval["status"] == "pending"

    reply = await _decide(sock, approval["id"], "approve", "d1")
    assert reply["ok"], reply
    answer = await reply_frame(sock, "seven", timeout=60)
    assert answer["ok"], answer
    # Passed through as sent; the server coerced it.
    assert answer["result"]["content"][0]["text"] == "count=7 (int)"


async def test_an_argument_no_server_coerces_is_refused_before_any_card(
    personas, real_apps, ws_connect
):
    sock = await open_socket(ws_connect, personas.owner, personas.thread)
    _, opened = await _open_view(sock)
    token = opened["result"]["token"]

    await _view_call(sock, token, "bad", "set_count", {"count": {"n": 7}})
    answer = await reply_frame(sock, "bad", timeout=60)
    assert not answer["ok"]
    assert answer["error"]["code"] == "invalid_arguments"
    assert "count" in answer["error"]["message"]
    assert await _approvals(tool_name="set_count") == []  # no card was ever created
    refused = await _audit(AuditEventType.CALL_ARGUMENTS_REFUSED)
    assert [(e.tool_name, e.decision, e.reason) for e in refused] == [
        ("set_count", "denied", "invalid_arguments")
    ]
    assert refused[0].extra["problems"] == ["count: {'n': 7} is not of type 'integer'"]


# ---- one "Allow <app> in this thread" for the app's own app-only tools --------------------


async def test_allow_app_in_thread_covers_its_app_only_tools_once(personas, real_apps, ws_connect):
    sock = await open_socket(ws_connect, personas.owner, personas.thread)
    _, opened = await _open_view(sock)
    token = opened["result"]["token"]

    await _view_call(sock, token, "boot", "w_bootstrap")
    asked = await next_frame(sock, _approval_event("w_bootstrap"), timeout=30)
    approval = asked["data"]["approval"]
    assert "app" in approval["offers"]  # app-only, not declared destructive
    reply = await _decide(sock, approval["id"], "allow_app", "d1")
    assert reply["ok"], reply
    assert (await reply_frame(sock, "boot", timeout=60))["ok"]

    # The rest of the widget's plumbing runs without a card.
    for name in ("w_read", "w_poll", "w_write", "w_comm", "w_dispose"):
        await _view_call(sock, token, name, name)
        answer = await reply_frame(sock, name, timeout=60)
        assert answer["ok"], answer
    assert [a["tool_name"] for a in await _approvals()] == ["w_bootstrap"]
    created = await _audit(AuditEventType.APP_ALLOWANCE_CREATED)
    assert [(e.reason, e.extra["asked_for"]) for e in created] == [
        ("allowed_app_in_thread", "w_bootstrap")
    ]

    # A tool its server declares destructive still asks, and offers no allowance.
    await _view_call(sock, token, "reset", "w_reset")
    asked = await next_frame(sock, _approval_event("w_reset"), timeout=30)
    assert asked["data"]["approval"]["offers"] == []


async def test_the_app_allowance_is_for_this_thread_only(personas, real_apps, ws_connect):
    from tests import factories

    sock = await open_socket(ws_connect, personas.owner, personas.thread)
    _, opened = await _open_view(sock)
    await _view_call(sock, opened["result"]["token"], "boot", "w_bootstrap")
    asked = await next_frame(sock, _approval_event("w_bootstrap"), timeout=30)
    assert (await _decide(sock, asked["data"]["approval"]["id"], "allow_app", "d1"))["ok"]
    assert (await reply_frame(sock, "boot", timeout=60))["ok"]

    other = await database_sync_to_async(factories.ThreadFactory)(
        workspace=personas.workspace, title="Other", actor=personas.owner
    )
    sock2 = await open_socket(ws_connect, personas.owner, other)
    _, opened2 = await _open_view(sock2)
    await _view_call(sock2, opened2["result"]["token"], "read", "w_read")
    await next_frame(sock2, _approval_event("w_read"), timeout=30)  # asks again there


# ---- UI documents up to 16 MiB -------------------------------------------------------------


async def test_a_7_mb_app_is_stored_once_and_streamed(personas, real_apps, ws_connect):
    from django.core.files.storage import default_storage

    from mcp_bridge.models import UiResource
    from mcp_bridge.services.ui_resources import ui_document_name

    sock = await open_socket(ws_connect, personas.owner, personas.thread)
    _, opened = await _open_view(sock, "big_page")
    assert opened["ok"], opened
    resource = await database_sync_to_async(
        lambda: UiResource.objects.defer("text").get(uri="ui://real/big")
    )()
    assert 7 * MB <= resource.size < 8 * MB
    assert await database_sync_to_async(
        lambda: UiResource.objects.filter(pk=resource.pk, text="").exists()
    )()  # not in the row: once, in storage, by its hash
    assert default_storage.size(ui_document_name(resource.content_hash)) == resource.size

    client = AsyncClient()
    await database_sync_to_async(client.force_login)(personas.owner)
    tracemalloc.start()
    try:
        response = await client.get(opened["result"]["documentUrl"])
        assert response.status_code == 200 and response.streaming
        received, largest = 0, 0
        async for chunk in response:
            received += len(chunk)
            largest = max(largest, len(chunk))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert received == resource.size
    assert response["ETag"] == f'"{resource.content_hash}"'
    assert "immutable" in response["Cache-Control"]
    # Serving it never held the document: a few chunks at most (measured ≈ 1.3 MB).
    assert largest <= 256 * 1024
    assert peak < 2 * MB, f"peak {peak / MB:.1f} MB while serving a {received / MB:.1f} MB page"


async def test_a_page_over_16_mib_is_refused_where_the_person_and_admin_see_it(
    personas, real_apps, ws_connect
):
    sock = await open_socket(ws_connect, personas.owner, personas.thread)
    call_id, opened = await _open_view(sock, "huge_page")
    assert not opened["ok"]
    assert opened["error"]["code"] == "view_too_large"
    assert opened["error"]["message"] == (
        "This app's page is larger than Atrium accepts (17.0 MB > 16 MB)."
    )
    # Audited once per version, however often it is shown.
    await _open_view(sock, "huge_page")
    refused = await _audit(AuditEventType.UI_DOCUMENT_REFUSED)
    assert len(refused) == 1
    assert refused[0].extra["size"] > 16 * MB and refused[0].decision == "denied"

    from mcp_bridge.models import UiResource

    listed = await database_sync_to_async(
        lambda: list(UiResource.objects.filter(uri="ui://real/huge").values("flavor", "meta"))
    )()
    assert [row["flavor"] for row in listed] == ["too_large"]  # the UI resource admin lists it
    assert listed[0]["meta"]["refused"]["message"] == opened["error"]["message"]
