"""Celery beat's periodic sweeps of the chat app (CELERY_BEAT_SCHEDULE in settings), apart
from the media ones (chat.media.tasks). Thin: services do the work (DESIGN §10); each is
idempotent, so a late or doubled run is a no-op. Events a worker stores reach every socket
like any process's (docs/fleet.md).
"""

from __future__ import annotations

from celery import shared_task

from bindings.services.approvals import approval_expire_due

from .calls.finish import tool_call_fail_orphaned
from .server_requests.services import server_requests_expire_due
from .services import turn_lease


@shared_task(ignore_result=True)
def expire_approvals() -> int:
    """Approvals expire on time even when nobody touches their thread (audited)."""
    return len(approval_expire_due())


@shared_task(ignore_result=True)
def reap_turn_leases() -> int:
    """Turns whose process died end visibly (see chat.services.turn_lease)."""
    return turn_lease.turn_lease_reap_expired()


@shared_task(ignore_result=True)
def fail_orphaned_tool_calls() -> int:
    """Running tool calls whose process died end visibly (see chat.calls.runners)."""
    return tool_call_fail_orphaned()


@shared_task(ignore_result=True)
def expire_server_requests() -> int:
    """A server's question whose waiting call is gone (its process stopped) ends visibly."""
    return server_requests_expire_due()
