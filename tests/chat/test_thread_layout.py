"""A member's side pane (issue 29, docs/side-pane.md): ``thread_layout_set`` and the
``layout.set`` websocket action.

The service is exercised directly (audit rows, one pane per member per thread, width
clamped and remembered, refusals); the action through the real ASGI application and
thread sockets: any member pins (viewers too), only that member's own sockets hear of it,
and the page's first render carries the layout.
"""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from audit.models import AuditEvent
from audit.types import AuditEventType
from chat.layout.models import ThreadLayout
from chat.layout.selectors import thread_layout_for
from chat.layout.services import LayoutError, thread_layout_set
from tests import factories
from tests.conftest import next_frame, open_socket, reply_frame


def _view_call(thread, **kwargs):
    server = kwargs.pop("server", None) or factories.McpServerFactory(name="Board", slug="board")
    resource = factories.UiResourceFactory(server=server)
    return factories.ToolCallFactory(
        thread=thread, server=server, ui_resource=resource, tool_name="list_items", **kwargs
    )


def _events(**filters):
    return list(AuditEvent.objects.filter(**filters).order_by("id"))


# ---- the service ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_pin_resize_unpin_are_audited_and_one_pane_per_member(personas):
    thread = personas.thread
    first = _view_call(thread)
    second = _view_call(thread, server=first.server)

    change = thread_layout_set(user=personas.member, thread=thread, tool_call_id=first.pk)
    assert change.changed
    assert change.layout["toolCallId"] == first.pk
    assert change.layout["app"] == {"server": "Board", "serverSlug": "board", "tool": "list_items"}
    # Pinning another view replaces it: one pane per member per thread.
    thread_layout_set(user=personas.member, thread=thread, tool_call_id=second.pk)
    assert ThreadLayout.objects.filter(user=personas.member, thread=thread).count() == 1
    # Width only: the pinned view stays; clamped to the pane's bounds.
    change = thread_layout_set(user=personas.member, thread=thread, width=100)
    assert change.layout == {**change.layout, "toolCallId": second.pk, "width": 320}
    assert thread_layout_set(user=personas.member, thread=thread, width=320).changed is False
    thread_layout_set(user=personas.member, thread=thread, tool_call_id=None)

    rows = _events(actor_user_id=personas.member.pk, action="layout_set")
    assert [r.event_type for r in rows] == [
        AuditEventType.VIEW_PINNED,
        AuditEventType.VIEW_PINNED,
        AuditEventType.SIDE_PANE_RESIZED,
        AuditEventType.VIEW_UNPINNED,
    ]
    assert rows[1].extra["previousToolCallId"] == first.pk
    assert rows[1].server_id == first.server_id and rows[1].tool_name == "list_items"
    assert rows[3].extra["previousToolCallId"] == second.pk
    assert thread_layout_for(user=personas.member, thread_id=thread.pk)["toolCallId"] is None
    # Nobody else's layout moved.
    assert thread_layout_for(user=personas.owner, thread_id=thread.pk)["toolCallId"] is None


@pytest.mark.django_db
def test_the_width_is_remembered_for_the_next_thread(personas):
    call = _view_call(personas.thread)
    thread_layout_set(user=personas.owner, thread=personas.thread, tool_call_id=call.pk, width=700)
    other = factories.ThreadFactory(
        workspace=personas.workspace, title="Other", actor=personas.owner
    )
    layout = thread_layout_for(user=personas.owner, thread_id=other.pk)
    assert layout["toolCallId"] is None and layout["width"] == 700
    assert layout["widthStep"] == 720  # the stylesheet's 40 px steps, for the first paint
    other_call = _view_call(other, server=call.server)
    change = thread_layout_set(user=personas.owner, thread=other, tool_call_id=other_call.pk)
    assert change.layout["width"] == 700


@pytest.mark.django_db
@pytest.mark.parametrize("case", ["other_thread", "no_view", "child_call", "bad_id"])
def test_only_a_view_of_this_thread_can_be_pinned(personas, case):
    if case == "other_thread":
        target = _view_call(personas.other_thread).pk
    elif case == "no_view":
        target = factories.ToolCallFactory(thread=personas.thread).pk
    elif case == "child_call":
        parent = _view_call(personas.thread)
        target = _view_call(personas.thread, server=parent.server, parent_view=parent).pk
    else:
        target = "7"
    with pytest.raises(LayoutError) as refused:
        thread_layout_set(user=personas.member, thread=personas.thread, tool_call_id=target)
    assert refused.value.code in ("not_found", "invalid_params")
    assert not ThreadLayout.objects.filter(user=personas.member).exists()
    (row,) = _events(event_type=AuditEventType.VIEW_PIN_REFUSED)
    assert row.decision == "denied" and row.actor_user_id == personas.member.pk


@pytest.mark.django_db
def test_a_deleted_call_leaves_no_pin(personas):
    call = _view_call(personas.thread)
    thread_layout_set(user=personas.member, thread=personas.thread, tool_call_id=call.pk)
    call.delete()
    assert (
        thread_layout_for(user=personas.member, thread_id=personas.thread.pk)["toolCallId"] is None
    )


# ---- through the socket -------------------------------------------------------------------------


def _layout_frame(frame) -> bool:
    return frame.get("type") == "layout"


@pytest.mark.django_db(transaction=True)
async def test_a_viewer_pins_and_only_their_own_sockets_follow(personas, ws_connect):
    call = await database_sync_to_async(_view_call)(personas.thread)
    vera_here = await open_socket(ws_connect, personas.viewer, personas.thread)
    vera_elsewhere = await open_socket(ws_connect, personas.viewer, personas.thread)
    marco = await open_socket(ws_connect, personas.member, personas.thread)

    await vera_here.send_json_to({"type": "layout.set", "rid": "p1", "toolCallId": call.pk})
    reply = await reply_frame(vera_here, "p1")
    assert reply["ok"], reply
    assert reply["result"]["layout"]["toolCallId"] == call.pk
    # Her other tab or device hears of it; nobody else does.
    frame = await next_frame(vera_elsewhere, _layout_frame)
    assert frame["layout"]["toolCallId"] == call.pk
    # Everything Marco's socket receives up to his pong (sent after her pin was committed
    # and announced): no layout among it.
    await marco.send_json_to({"type": "ping", "rid": "m"})
    seen = await next_frame(marco, lambda f: _layout_frame(f) or f.get("type") == "pong")
    assert seen["type"] == "pong", seen
    # Still a viewer: she cannot post.
    await vera_here.send_json_to({"type": "message.post", "rid": "p2", "text": "hi"})
    assert (await reply_frame(vera_here, "p2"))["error"]["code"] == "forbidden"
    for communicator in (vera_here, vera_elsewhere, marco):
        await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_bad_layout_requests_are_refused(personas, ws_connect):
    sock = await open_socket(ws_connect, personas.member, personas.thread)
    foreign = await database_sync_to_async(_view_call)(personas.other_thread)
    for rid, msg in [
        ("a", {}),
        ("b", {"width": "wide"}),
        ("c", {"toolCallId": foreign.pk}),
    ]:
        await sock.send_json_to({"type": "layout.set", "rid": rid, **msg})
        reply = await reply_frame(sock, rid)
        assert not reply["ok"] and reply["error"]["code"] in ("invalid_params", "not_found"), reply
    await sock.disconnect()


@pytest.mark.django_db
def test_the_thread_page_renders_the_members_pane(personas, client):
    call = _view_call(personas.thread)
    thread_layout_set(user=personas.member, thread=personas.thread, tool_call_id=call.pk, width=600)
    url = f"/w/{personas.workspace.slug}/t/{personas.thread.pk}/"
    client.force_login(personas.member)
    page = client.get(url).content.decode()
    assert 'id="thread-layout-data"' in page and f'"toolCallId": {call.pk}' in page
    assert 'class="thread-layout has-pane"' in page and 'data-pane-w="600"' in page
    assert '<aside class="side-pane" id="side-pane"' in page and "Board</h2>" in page
    client.force_login(personas.owner)
    page = client.get(url).content.decode()
    assert 'class="thread-layout"' in page and '"toolCallId": null' in page
