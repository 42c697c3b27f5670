"""The turn lease: one model turn per thread across every process (DESIGN §1, N web processes).

A process that wants to answer a thread takes the thread's :class:`~chat.models.TurnLease`
row under a row lock (``SELECT … FOR UPDATE`` on PostgreSQL; SQLite transactions are
``IMMEDIATE``, i.e. already serialised). It gets a *fencing token*; every write of the turn
(:func:`check_fence`, called by the services in :mod:`chat.services.turns`) re-checks the
token under the same lock, so a turn whose lease expired and was taken over cannot write
any more.

Simultaneous messages get one answer: until a turn writes its first output, a newer
message for the model makes it restart its request with both (:func:`check_not_superseded`).

Nothing is answered twice: the lease keeps ``answered_up_to``, the newest user message a
finished turn saw. The lease is only taken when a newer message waits, and on release the
holder checks — under the lock — whether one arrived meanwhile; if so it keeps the lease and
runs another turn (messages posted during a turn are *folded* into the next one). A message
committed after that check finds the lease free and its own process takes it.

A holder renews its lease while the turn runs (:data:`RENEW_EVERY`). When its process dies
the lease expires after :data:`LEASE_TTL`; the next process to acquire it takes it over,
marks the dead turn's streaming messages failed (visible in the thread) and audits it
(``TURN_TAKEN_OVER``).
"""

from __future__ import annotations

import contextvars
import os
import socket
import uuid
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from audit.types import AuditEventType, Decision
from audit.writer import record
from chat.models import Message, MessageRole, MessageStatus, Thread, TurnLease
from chat.presenters import serialize_message
from chat.realtime.events import emit

LEASE_TTL = timedelta(seconds=30)
RENEW_EVERY = 10.0  # seconds; well inside LEASE_TTL
TAKEN_OVER_TEXT = "The assistant stopped answering here (its server process stopped)."

# This process's name in lease rows (host, pid and a nonce: a restarted pid is another holder).
HOLDER = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

# (thread id, token) of the turn the current task runs; set by the agent loop, checked by
# every write of the turn. Context variables follow the task into database_sync_to_async.
current_fence: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar(
    "current_fence", default=None
)


class LeaseLost(Exception):
    """The turn's lease expired and another process took it over: stop writing."""


class Superseded(Exception):
    """A newer message for the model arrived before the turn wrote anything: the turn
    restarts its model request with the thread as it is now (one answer for both)."""


def _waiting_messages(thread_id: int, after: int) -> QuerySet[Message]:
    """User messages for the model newer than ``after`` (commands are not for the model)."""
    return (
        Message.objects.filter(thread_id=thread_id, role=MessageRole.USER, pk__gt=after)
        .exclude(text__startswith="/")
        .order_by()
    )


def _locked(thread_id: int) -> TurnLease:
    TurnLease.objects.get_or_create(thread_id=thread_id)
    return TurnLease.objects.select_for_update().get(thread_id=thread_id)


def turn_lease_acquire(*, thread_id: int, holder: str = HOLDER) -> int | None:
    """The fencing token when this process may run a turn now; ``None`` when another live
    process runs one (it will fold our message in) or nothing is left to answer."""
    now = timezone.now()
    with transaction.atomic():
        lease = _locked(thread_id)
        if lease.holder and lease.expires_at is not None and lease.expires_at > now:
            return None
        if not _waiting_messages(thread_id, lease.answered_up_to).exists():
            if lease.holder:  # expired with nothing left to answer: just free it
                _take_over(lease, now)
                lease.holder = ""
                lease.save(update_fields=["holder", "token"])
            return None
        if lease.holder:
            _take_over(lease, now)
        lease.token += 1
        lease.holder = holder
        lease.expires_at = now + LEASE_TTL
        lease.save(update_fields=["token", "holder", "expires_at"])
        return lease.token


def _take_over(lease: TurnLease, now: datetime) -> None:
    """The previous holder stopped renewing: fence it off, fail what it left streaming."""
    lease.token += 1
    previous = lease.holder
    stranded = list(
        Message.objects.select_for_update().filter(
            thread_id=lease.thread_id,
            role=MessageRole.ASSISTANT,
            status=MessageStatus.STREAMING,
        )
    )
    for message in stranded:
        message.text = f"{message.text}\n\n{TAKEN_OVER_TEXT}" if message.text else TAKEN_OVER_TEXT
        message.status = MessageStatus.ERROR
        message.save(update_fields=["text", "status"])
        emit(thread_id=lease.thread_id, kind="message", payload=serialize_message(message))
    thread = Thread.objects.only("workspace_id").get(pk=lease.thread_id)
    record(
        event_type=AuditEventType.TURN_TAKEN_OVER,
        decision=Decision.FAILED,
        actor_kind="system",
        workspace_id=thread.workspace_id,
        thread_id=lease.thread_id,
        action="turn_lease_take_over",
        reason="lease_expired",
        extra={
            "previous_holder": previous,
            "expired_at": lease.expires_at.isoformat() if lease.expires_at else None,
            "failed_message_ids": [m.pk for m in stranded],
        },
    )


def turn_lease_renew(*, thread_id: int, token: int) -> bool:
    """Extend the lease while the turn runs; False when it was lost."""
    updated = TurnLease.objects.filter(thread_id=thread_id, token=token).update(
        expires_at=timezone.now() + LEASE_TTL
    )
    return updated == 1


def turn_lease_release(*, thread_id: int, token: int, seen: int | None) -> bool:
    """End a turn that saw user messages up to ``seen``. True when a message arrived
    meanwhile: the lease is kept (same token) and the caller runs one more turn."""
    with transaction.atomic():
        lease = _locked(thread_id)
        if lease.token != token:
            return False  # taken over: the new holder answers
        if seen is not None and seen > lease.answered_up_to:
            lease.answered_up_to = seen
        if seen is not None and _waiting_messages(thread_id, lease.answered_up_to).exists():
            lease.expires_at = timezone.now() + LEASE_TTL
            lease.save(update_fields=["answered_up_to", "expires_at"])
            return True
        lease.holder = ""
        lease.expires_at = None
        lease.save(update_fields=["answered_up_to", "holder", "expires_at"])
        return False


def check_fence() -> None:
    """Inside a write's transaction: raise :class:`LeaseLost` unless the running turn still
    holds its lease. The row lock makes the check and the write one step against a take-over.
    Writes outside a turn (no fence set) pass."""
    fence = current_fence.get()
    if fence is None:
        return
    thread_id, token = fence
    held = TurnLease.objects.select_for_update().filter(thread_id=thread_id, token=token).exists()
    if not held:
        raise LeaseLost(f"the turn lease of thread {thread_id} was taken over")


def check_not_superseded(*, thread_id: int, seen: int | None) -> None:
    """Inside the transaction of a turn's first write: raise :class:`Superseded` when a
    user message newer than ``seen`` (the newest the turn's request was built from) is
    stored. Before this write nothing of the answer exists, so restarting answers nobody
    twice; a message stored after it is folded into the next turn."""
    if seen is not None and _waiting_messages(thread_id, seen).exists():
        raise Superseded(f"a newer message arrived in thread {thread_id}")


def turn_lease_reap_expired() -> int:
    """The beat sweep: free every lease whose holder stopped renewing (its process died),
    failing what it left streaming — visibly and audited — even if nobody posts again."""
    now = timezone.now()
    reaped = 0
    expired = TurnLease.objects.exclude(holder="").filter(expires_at__lt=now)
    for thread_id in list(expired.values_list("thread_id", flat=True)):
        with transaction.atomic():
            lease = TurnLease.objects.select_for_update().get(thread_id=thread_id)
            if not lease.holder or lease.expires_at is None or lease.expires_at >= now:
                continue  # renewed or released meanwhile
            _take_over(lease, now)
            lease.holder = ""
            lease.expires_at = None
            lease.save(update_fields=["token", "holder", "expires_at"])
            reaped += 1
    return reaped
