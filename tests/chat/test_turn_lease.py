"""The turn lease services (chat.turn_lease): one holder, fencing, the answered-up-to
marker, folding on release and the take-over of a dead holder's turn."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from chat import turn_lease, turns
from chat.models import Message, MessageStatus, TurnLease

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
    from bindings.models import AuditEvent

    thread = personas.thread
    _post(thread, personas.owner, "hello")
    stale = turn_lease.turn_lease_acquire(thread_id=thread.pk, holder="dead")
    fence = turn_lease.current_fence.set((thread.pk, stale))
    try:
        streaming = turns.create_assistant_message(thread_id=thread.pk)
        turns.append_assistant_text(
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
            turns.post_assistant_notice(thread_id=thread.pk, text="late answer")
        with pytest.raises(turn_lease.LeaseLost):
            turns.append_assistant_text(
                message_id=streaming.pk, thread_id=thread.pk, text="late", delta="late"
            )
        assert Message.objects.count() == before
        assert turn_lease.turn_lease_renew(thread_id=thread.pk, token=stale) is False
        assert turn_lease.turn_lease_release(thread_id=thread.pk, token=stale, seen=None) is False
    finally:
        turn_lease.current_fence.reset(fence)
    assert TurnLease.objects.get(thread=thread).holder == "b"


def test_the_beat_sweep_ends_a_dead_turn_even_if_nobody_posts_again(personas):
    from bindings.models import AuditEvent
    from chat.tasks import reap_turn_leases

    thread = personas.thread
    _post(thread, personas.owner, "hello")
    token = turn_lease.turn_lease_acquire(thread_id=thread.pk, holder="dead")
    fence = turn_lease.current_fence.set((thread.pk, token))
    try:
        streaming = turns.create_assistant_message(thread_id=thread.pk)
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
