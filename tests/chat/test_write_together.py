"""`lean_rows.write_together` (issue 28): a call's result, its audit row, the thread's next
sequence number and the final event written all or nothing — on PostgreSQL as one statement
outside a transaction (one round trip, one commit), elsewhere one statement after the other
in a transaction. Through the real finish (`chat.calls.finish.tool_call_finish`) and the
real `emit`, on whichever database the suite runs."""

from __future__ import annotations

import pytest
from django.db import DataError, connection

from audit.models import AuditEvent
from audit.types import AuditEventType
from chat.models import Thread, ThreadEvent, ToolCall
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


def _running_call(personas) -> ToolCall:
    call = factories.ToolCallFactory(thread=personas.thread, status="running", tool_name="echo")
    return ToolCall.objects.select_related("server", "thread").get(pk=call.pk)


def _finish(call: ToolCall) -> ToolCall:
    from chat.calls.finish import tool_call_finish
    from chat.calls.requests import KnownApproval

    return tool_call_finish(
        call_id=call.pk,
        raw={"content": [{"type": "text", "text": "done"}]},
        latency_ms=3.0,
        app_resource=None,
        call=call,
        approval=KnownApproval(None),
    )


def _last_seq(thread_id: int) -> int:
    return Thread.objects.values_list("last_seq", flat=True).get(pk=thread_id)


def test_a_result_its_audit_row_and_its_event_are_written_together(personas, statements):
    call = _running_call(personas)
    seq_before = _last_seq(call.thread_id)
    statements.clear()
    _finish(call)
    writes = [s for s in statements if "INSERT" in s or "UPDATE" in s]
    stored = ToolCall.objects.get(pk=call.pk)
    assert stored.status == "success" and stored.result["parts"][0]["text"] == "done"
    audit = AuditEvent.objects.get(event_type=AuditEventType.TOOL_CALL_COMPLETED)
    assert audit.extra["tool_call_id"] == call.pk and audit.thread_id == call.thread_id
    event = ThreadEvent.objects.filter(thread_id=call.thread_id).latest("seq")
    assert event.seq == seq_before + 1 == _last_seq(call.thread_id)
    assert event.payload["id"] == call.pk and event.payload["status"] == "success"
    if connection.vendor == "postgresql":
        # One statement, sent outside a transaction: no BEGIN, no COMMIT of its own.
        assert len(writes) == 1, writes
        assert writes[0].startswith("WITH u AS (UPDATE")
    else:
        assert len(writes) == 4, writes  # the result, its audit row, the number, the event


def test_a_call_stopped_first_keeps_its_stop_and_nothing_of_the_result_is_written(personas):
    call = _running_call(personas)
    seq_before = _last_seq(call.thread_id)
    # A stop recorded by another process between the call's start and its result.
    ToolCall.objects.filter(pk=call.pk).update(status="cancelled")
    _finish(call)
    assert ToolCall.objects.get(pk=call.pk).status == "cancelled"
    assert ToolCall.objects.get(pk=call.pk).result is None
    assert not AuditEvent.objects.filter(event_type=AuditEventType.TOOL_CALL_COMPLETED).exists()
    assert _last_seq(call.thread_id) == seq_before
    assert not ThreadEvent.objects.filter(thread_id=call.thread_id, seq__gt=seq_before).exists()


def test_an_event_numbers_in_order_and_a_missing_thread_writes_nothing(personas):
    from chat.realtime.events import emit

    seq_before = _last_seq(personas.thread.pk)
    first = emit(thread_id=personas.thread.pk, kind="test.one", payload={"n": 1})
    second = emit(thread_id=personas.thread.pk, kind="test.two", payload={"n": 2})
    assert (first.seq, second.seq) == (seq_before + 1, seq_before + 2)
    assert first.pk is not None and second.pk > first.pk
    events_before = ThreadEvent.objects.count()
    with pytest.raises(Thread.DoesNotExist):
        emit(thread_id=10**9, kind="test.none", payload={})
    assert ThreadEvent.objects.count() == events_before


def test_a_value_too_long_for_its_column_is_refused_not_cut(personas):
    """The one statement casts its parameters without lengths: a too-long value fails as a
    plain INSERT fails (PostgreSQL enforces lengths; SQLite stores any length)."""
    from chat.realtime.events import emit

    if connection.vendor != "postgresql":
        pytest.skip("SQLite stores a value of any length in any text column")
    count = ThreadEvent.objects.count()
    seq_before = _last_seq(personas.thread.pk)
    with pytest.raises(DataError):
        emit(thread_id=personas.thread.pk, kind="k" * 60, payload={})
    assert ThreadEvent.objects.count() == count
    assert _last_seq(personas.thread.pk) == seq_before
