"""The audit rows of refusals no policy decision wrote: a malformed or oversized request, a
refused action or socket, a rate-limited request. Every refusal leaves a `denied` row
(DESIGN §8.10), at a bounded rate (``bindings.ratelimit.refusal_gate``)."""

from __future__ import annotations

from typing import Any

from audit.types import AuditEventType, Decision
from audit.writer import record
from bindings import policy
from bindings.ratelimit import refusal_gate
from bindings.services.authorize import ACTOR_LABELS


def request_record_refused(
    *,
    action_kind: policy.ActionKind | str,
    actor_kind: str,
    user: Any,
    thread: Any,
    server_id: int,
    binding_id: int | None,
    reason: str,
    extra: dict[str, Any] | None = None,
) -> int:
    """Audit a request refused before policy was asked: its input was malformed or too
    large. Like every refusal, it leaves a `denied` row (at a bounded rate: `refusal_gate`);
    returns its id (0: only counted)."""
    gate = refusal_gate(user=user)
    if gate is None:
        return 0
    event = record(
        event_type=policy.event_type_for_action(action_kind),
        decision=Decision.DENIED,
        actor_kind=actor_kind,
        actor_user_id=getattr(user, "pk", None),
        actor_label=ACTOR_LABELS.get(actor_kind, actor_kind),
        workspace_id=thread.workspace_id,
        thread_id=thread.pk,
        binding_id=binding_id,
        server_id=server_id,
        action=str(action_kind),
        reason=reason,
        extra={**(extra or {}), **gate},
    )
    return event.pk


def action_record_refused(
    *,
    user: Any,
    workspace_id: int | None,
    thread_id: int | None,
    action: str,
    reason: str,
    event_type: AuditEventType = AuditEventType.ACTION_REFUSED,
    actor_kind: str = "user",
    server_id: int | None = None,
    extra: dict[str, Any] | None = None,
    client: str = "",
) -> int:
    """Audit a refusal that no policy decision recorded (a viewer's post, an unknown
    approval, a malformed action, a refused handshake...): every refusal leaves a `denied`
    row (DESIGN §8.10), at a bounded rate per person or per ``client`` address
    (`refusal_gate`). Returns its id (0: only counted)."""
    gate = refusal_gate(user=user, client=client)
    if gate is None:
        return 0
    return _record_refused(
        user=user,
        workspace_id=workspace_id,
        thread_id=thread_id,
        action=action,
        reason=reason,
        event_type=event_type,
        actor_kind=actor_kind,
        server_id=server_id,
        extra={**(extra or {}), **gate},
    )


def _record_refused(
    *,
    user: Any,
    workspace_id: int | None,
    thread_id: int | None,
    action: str,
    reason: str,
    event_type: AuditEventType,
    actor_kind: str = "user",
    server_id: int | None = None,
    extra: dict[str, Any] | None = None,
) -> int:
    authenticated = getattr(user, "is_authenticated", False)
    event = record(
        event_type=event_type,
        decision=Decision.DENIED,
        actor_kind=actor_kind if authenticated else "system",
        actor_user_id=user.pk if authenticated else None,
        actor_label=ACTOR_LABELS.get(actor_kind, actor_kind),
        workspace_id=workspace_id,
        thread_id=thread_id,
        server_id=server_id,
        action=action[:60],
        reason=reason[:200],
        extra=extra,
    )
    return event.pk


def socket_record_refused(*, user: Any, thread_id: int, reason: str, client: str = "") -> None:
    """Audit a refused thread socket (an outsider, or a thread that does not exist: the
    same row either way, with the thread asked for), at a bounded rate (`refusal_gate`)."""
    gate = refusal_gate(user=user, client=client)
    if gate is None:
        return
    authenticated = getattr(user, "is_authenticated", False)
    record(
        event_type=AuditEventType.SOCKET_REJECTED,
        decision=Decision.DENIED,
        actor_kind="user" if authenticated else "system",
        actor_user_id=user.pk if authenticated else None,
        reason=reason,
        extra={"thread_id": thread_id, **gate},
    )


def rate_limit_record(
    *,
    user: Any,
    workspace_id: int | None,
    thread_id: int | None,
    bucket: str,
    refused_since_last: int,
) -> int:
    """Audit a rate-limited request (the first of a burst, then one every few seconds:
    paced by its own gate, see bindings.ratelimit.take)."""
    return _record_refused(
        user=user,
        workspace_id=workspace_id,
        thread_id=thread_id,
        action=bucket,
        reason="rate_limited",
        event_type=AuditEventType.RATE_LIMITED,
        extra={
            "bucket": bucket,
            "refused_since_last_row": refused_since_last,
            **({"skipped": refused_since_last} if refused_since_last else {}),
        },
    )
