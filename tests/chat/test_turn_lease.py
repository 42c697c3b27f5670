"""The turn lease services (chat.services.turn_lease): one holder, fencing, the answered-up-to
marker, folding on release and the take-over of a dead holder's turn."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from chat import agent
from chat.calls.decide import tool_call_decide
from chat.calls.input import tool_call_open_input, tool_call_record_input
from chat.calls.requests import CallRequest
from chat.models import Message, MessageStatus, TurnLease
from chat.services import turn_lease, turns
from tests.waiting import apoll

pytestmark = pytest.mark.django_db


def _post(thread, user, text: str) -> Message:
    return Message.objects.create(thread=thread, role="user", author=user, text=text)


def test_one_holder_at_a_time_and_nothing_to_answer_means_no_turn(personas):
    thread = personas.thread
    assert turn_lease.turn_lease_acquire(thread_id=thread.pk, holder="a") is None
    first = _post(thread, personas.owner, "hello")
    token = turn_lease.turn_lease_acquire(thread_id=thread.pk, holder="a")
    assert token is not None
    assert turn_lease.turn_lease_acquire(thread_id=thread.pk, holder="b") is None

    assert turn_lease.turn_lease_release(thread_id=thread.pk, token=token, seen=first.pk) is False
    lease = TurnLease.objects.get(thread=thread)
    assert (lease.holder, lease.answered_up_to) == ("", first.pk)
    # The answered message is never answered again, by any process; commands are not
    # for the model.
    _post(thread, personas.member, "/call board.list_items")
    assert turn_lease.turn_lease_acquire(thread_id=thread.pk, holder="b") is None


def test_a_message_posted_during_the_turn_keeps_the_lease_for_one_more_turn(personas):
    thread = personas.thread
    first = _post(thread, personas.owner, "one")
    token = turn_lease.turn_lease_acquire(thread_id=thread.pk, holder="a")
    second = _post(thread, personas.member, "two")  # arrives after the turn loaded "one"
    assert turn_lease.turn_lease_acquire(thread_id=thread.pk, holder="b") is None
    assert turn_lease.turn_lease_release(thread_id=thread.pk, token=token, seen=first.pk) is True
    assert turn_lease.turn_lease_release(thread_id=thread.pk, token=token, seen=second.pk) is False
    assert TurnLease.objects.get(thread=thread).answered_up_to == second.pk


def test_writes_of_a_turn_whose_lease_was_taken_over_are_refused(personas):
    from audit.models import AuditEvent

    thread = personas.thread
    _post(thread, personas.owner, "hello")
    stale = turn_lease.turn_lease_acquire(thread_id=thread.pk, holder="dead")
    fence = turn_lease.current_fence.set((thread.pk, stale))
    try:
        streaming = turns.message_create_assistant(thread_id=thread.pk)
        turns.message_append_text(
            message_id=streaming.pk, thread_id=thread.pk, text="Half an", delta="Half an"
        )
    finally:
        turn_lease.current_fence.reset(fence)

    # Still held and not expired: nobody else may take it.
    assert turn_lease.turn_lease_acquire(thread_id=thread.pk, holder="b") is None
    TurnLease.objects.filter(thread=thread).update(expires_at=timezone.now() - timedelta(seconds=1))
    fresh = turn_lease.turn_lease_acquire(thread_id=thread.pk, holder="b")
    assert fresh is not None and fresh > stale

    # The dead turn's message is failed, visibly, and the take-over is audited.
    streaming.refresh_from_db()
    assert streaming.status == MessageStatus.ERROR
    assert turn_lease.TAKEN_OVER_TEXT in streaming.text
    audit = AuditEvent.objects.get(event_type=140)
    assert audit.thread_id == thread.pk and audit.extra["previous_holder"] == "dead"
    assert audit.extra["failed_message_ids"] == [streaming.pk]

    # The old holder is fenced off: every write of its turn raises, nothing is stored.
    fence = turn_lease.current_fence.set((thread.pk, stale))
    try:
        before = Message.objects.count()
        with pytest.raises(turn_lease.LeaseLost):
            turns.message_post_notice(thread_id=thread.pk, text="late answer")
        with pytest.raises(turn_lease.LeaseLost):
            turns.message_append_text(
                message_id=streaming.pk, thread_id=thread.pk, text="late", delta="late"
            )
        assert Message.objects.count() == before
        assert turn_lease.turn_lease_renew(thread_id=thread.pk, token=stale) is False
        assert turn_lease.turn_lease_release(thread_id=thread.pk, token=stale, seen=None) is False
    finally:
        turn_lease.current_fence.reset(fence)
    assert TurnLease.objects.get(thread=thread).holder == "b"


def test_the_beat_sweep_ends_a_dead_turn_even_if_nobody_posts_again(personas):
    from audit.models import AuditEvent
    from chat.tasks import reap_turn_leases

    thread = personas.thread
    _post(thread, personas.owner, "hello")
    token = turn_lease.turn_lease_acquire(thread_id=thread.pk, holder="dead")
    fence = turn_lease.current_fence.set((thread.pk, token))
    try:
        streaming = turns.message_create_assistant(thread_id=thread.pk)
    finally:
        turn_lease.current_fence.reset(fence)
    assert reap_turn_leases() == 0  # alive (not expired): left alone

    TurnLease.objects.filter(thread=thread).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert reap_turn_leases() == 1
    assert reap_turn_leases() == 0  # idempotent
    streaming.refresh_from_db()
    assert streaming.status == MessageStatus.ERROR
    lease = TurnLease.objects.get(thread=thread)
    assert lease.holder == "" and lease.token > token
    assert AuditEvent.objects.filter(event_type=140, thread_id=thread.pk).count() == 1


def test_a_turn_whose_lease_was_lost_starts_and_records_no_tool_call(personas):
    """Model-started calls are writes of the turn too: the row opened while the model
    streams its arguments, the partial arguments, and the decision that would run it."""
    import sys

    from bindings.services.bindings import binding_create
    from chat.models import ToolCall, ToolCallStatus
    from mcp_bridge.services.servers import server_add

    thread = personas.thread
    server = server_add(
        name="Board", slug="board", transport="stdio", command=sys.executable, args=["-c", ""]
    )
    binding = binding_create(server=server, workspace=thread.workspace)
    _post(thread, personas.owner, "list the board")
    stale = turn_lease.turn_lease_acquire(thread_id=thread.pk, holder="dead")
    fence = turn_lease.current_fence.set((thread.pk, stale))
    try:
        opened = tool_call_open_input(
            thread_id=thread.pk,
            server=server,
            tool_name="list_items",
            message_id=None,
            provider_call_id="call_1",
            user_id=personas.owner.pk,
            ui_resource=None,
            binding_id=binding.pk,
        )
    finally:
        turn_lease.current_fence.reset(fence)
    TurnLease.objects.filter(thread=thread).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert turn_lease.turn_lease_acquire(thread_id=thread.pk, holder="b") is not None

    request = CallRequest(
        thread=thread,
        server=server,
        tool_name="list_items",
        arguments={},
        origin="model",
        user=personas.owner,
        role="owner",
        provider_call_id="call_2",
    )
    calls_before = ToolCall.objects.count()
    events_before = thread.events.count()
    fence = turn_lease.current_fence.set((thread.pk, stale))
    try:
        with pytest.raises(turn_lease.LeaseLost):
            tool_call_open_input(
                thread_id=thread.pk,
                server=server,
                tool_name="list_items",
                message_id=None,
                provider_call_id="call_2",
                user_id=personas.owner.pk,
                ui_resource=None,
                binding_id=binding.pk,
            )
        with pytest.raises(turn_lease.LeaseLost):
            tool_call_record_input(
                call_id=opened.pk,
                thread_id=thread.pk,
                arguments={"late": True},
                payload={"id": opened.pk},
            )
        with pytest.raises(turn_lease.LeaseLost):
            tool_call_decide(request=request)
        with pytest.raises(turn_lease.LeaseLost):  # nor the row it opened while it held it
            tool_call_decide(
                request=CallRequest(**{**vars(request), "streamed_call_id": opened.pk})
            )
    finally:
        turn_lease.current_fence.reset(fence)
    assert ToolCall.objects.count() == calls_before
    assert thread.events.count() == events_before
    opened.refresh_from_db()
    assert opened.arguments == {} and opened.status == ToolCallStatus.STREAMING

    # The same decision outside the dead turn is recorded (the fence is what refused it).
    decided, _ = tool_call_decide(request=request)
    assert ToolCall.objects.filter(pk=decided.pk).exists()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_a_message_stored_before_the_first_output_gets_the_same_answer(personas, ws_connect):
    """The second of two messages posted together arrives while the model request for the
    first is in flight, before any output: the request is dropped and made again with both
    (one turn, one answer; nobody is answered twice)."""
    import threading

    from channels.db import database_sync_to_async

    from tests.chat.fake_llm import SSE, FakeLLM, openai_text
    from tests.conftest import open_socket, reply_frame

    thread = personas.thread
    first_output = threading.Event()
    with FakeLLM("openai") as llm:
        stale = openai_text("Stale ", "answer.")
        llm.push(SSE([first_output, *stale.frames]), openai_text("One ", "answer for both."))
        workspace = personas.workspace
        workspace.provider, workspace.model = "openai", "fake-model"
        workspace.provider_base_url, workspace.provider_api_key = llm.base_url, "sk-x"
        await database_sync_to_async(workspace.save)()
        owner = await open_socket(ws_connect, personas.owner, thread)
        member = await open_socket(ws_connect, personas.member, thread)

        await owner.send_json_to({"type": "message.post", "text": "one", "rid": 1})
        assert (await reply_frame(owner, 1))["ok"]
        # The first request is in flight (held before its output).
        await apoll(lambda: llm.requests, reason="the fake model's request log")
        await member.send_json_to({"type": "message.post", "text": "two", "rid": 2})
        assert (await reply_frame(member, 2))["ok"]
        first_output.set()
        answers = []
        while not answers or answers[-1]["status"] == "streaming":
            frame = await next_assistant(owner)
            answers.append(frame)

    users = [
        [m["content"] for m in request.body["messages"] if m["role"] == "user"]
        for request in llm.requests
    ]
    assert users == [["one"], ["olivia: one", "marco: two"]]
    assert {a["id"] for a in answers} == {answers[-1]["id"]}  # one answer, streamed once
    assert answers[-1]["status"] == "complete" and answers[-1]["text"] == "One answer for both."
    assistant = await database_sync_to_async(list)(
        Message.objects.filter(thread=thread, role="assistant").values_list("text", flat=True)
    )
    assert assistant == ["One answer for both."]
    await agent.wait_idle(thread.pk)  # the turn has released the lease
    lease = await database_sync_to_async(TurnLease.objects.get)(thread=thread)
    newest = await database_sync_to_async(
        lambda: Message.objects.filter(thread=thread, role="user").latest("pk").pk
    )()
    assert (lease.holder, lease.answered_up_to) == ("", newest)
    await owner.disconnect()
    await member.disconnect()


async def next_assistant(communicator) -> dict:
    while True:
        frame = await communicator.receive_json_from(timeout=20)
        if frame.get("kind") == "message" and frame["data"].get("role") == "assistant":
            return frame["data"]
