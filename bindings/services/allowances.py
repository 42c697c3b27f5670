"""Allowances: consent remembered for a tool in a thread or a workspace (granted by deciding an
approval, see ``approvals``), and "Always allow <app> to send messages in this thread";
revocable, audited, announced to chat on change."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from audit.types import AuditEventType, Decision
from audit.writer import record
from bindings import policy
from bindings.models import Allowance, AppBinding
from bindings.ratelimit import refusal_gate
from bindings.selectors import active_allowance
from bindings.services._common import actor_fields
from bindings.services.errors import BindingError
from bindings.signals import allowances_changed


def allowance_event_record(
    allowance: Allowance,
    event_type: AuditEventType,
    *,
    decision: Decision,
    actor: Any,
    actor_label: str,
    reason: str,
    extra: dict[str, Any] | None = None,
) -> None:
    record(
        event_type=event_type,
        decision=decision,
        **actor_fields(actor, actor_label or "user"),
        workspace_id=allowance.workspace_id,
        thread_id=allowance.thread_id,
        binding_id=allowance.binding_id,
        server_id=allowance.binding.server_id,
        tool_name=allowance.tool_name,
        action="allowance",
        reason=reason,
        extra={
            "allowance_id": allowance.pk,
            "scope": allowance.scope,
            "approval_id": allowance.approval_id,
            **(extra or {}),
        },
    )


def allowances_announce(allowance: Allowance) -> None:
    """Tell chat (inside this transaction) which threads' allowances changed."""
    allowances_changed.send(
        sender=Allowance, workspace_id=allowance.workspace_id, thread_id=allowance.thread_id
    )


def allowance_revoke(
    *,
    allowance_id: int,
    actor: Any,
    role: str | None,
    actor_label: str = "",
    thread: Any = None,
) -> Allowance:
    """Revoke an allowance: the very next call it covered asks again, in every process.

    Owners and members may revoke a thread's allowance, owners a workspace's; an admin
    (``actor_label="admin"``, staff checked by the admin) may revoke any, since revoking
    only narrows. ``thread``: the thread the request comes from (a thread's socket may
    revoke only what applies to that thread, in its workspace). Refusals are audited.
    """
    refused: BindingError | None = None
    with transaction.atomic():
        # No joins: PostgreSQL would lock the joined rows too (or refuse an outer join).
        allowance = Allowance.objects.select_for_update().filter(pk=allowance_id).first()
        if allowance is None or (
            thread is not None
            and (
                allowance.workspace_id != thread.workspace_id
                or allowance.thread_id not in (None, thread.pk)
            )
        ):
            raise BindingError("not_found", "That allowance does not exist here.")
        admin = actor_label == "admin"
        may = admin or (
            role == "owner" or (role == "member" and allowance.scope == policy.Scope.THREAD)
        )
        if not may:
            code, message = (
                "forbidden",
                (
                    "Only owners can revoke a workspace allowance."
                    if role == "member"
                    else "Only owners and members can revoke allowances."
                ),
            )
        elif allowance.revoked_at is not None:
            code, message = "already_revoked", "This allowance was already revoked."
        else:
            code = message = ""
        if code:
            if (gate := refusal_gate(user=actor)) is not None:  # bounded rate per person
                allowance_event_record(
                    allowance,
                    AuditEventType.ALLOWANCE_REFUSED,
                    decision=Decision.DENIED,
                    actor=actor,
                    actor_label=actor_label,
                    reason=code,
                    extra={"attempt": "revoke", "role": role or "", **gate},
                )
            refused = BindingError(code, message)
        else:
            allowance.revoked_at = timezone.now()
            allowance.revoked_by = actor
            allowance.save(update_fields=["revoked_at", "revoked_by"])
            allowance_event_record(
                allowance,
                AuditEventType.ALLOWANCE_REVOKED,
                decision=Decision.ALLOWED,
                actor=actor,
                actor_label=actor_label,
                reason="revoked",
            )
            allowances_announce(allowance)
    if refused is not None:
        raise refused
    return allowance


# The allowance behind "Always allow <app> to send messages in this thread" (a view's
# ui/message then posts without its card). Not a valid MCP tool name ("/" is outside the
# spec's [A-Za-z0-9_.-]); the catalogue does not enforce that, so a server's tool named
# exactly "ui/message" would share such an allowance.
VIEW_MESSAGES = "ui/message"


def view_messages_allowed(*, binding_id: int | None, thread: Any) -> bool:
    """Whether a member allowed this binding's views to send messages in ``thread``."""
    if binding_id is None:
        return False
    found = active_allowance(binding_id=binding_id, thread=thread, tool_name=VIEW_MESSAGES)
    return found is not None and found.thread_id == thread.pk


def view_messages_allowance_grant(
    *, binding_id: int, thread: Any, granter: Any, role: str | None
) -> Allowance:
    """A member's "Always allow <app> to send messages in this thread" (the view message
    card's box): remembered, audited and revocable like a tool's thread allowance. Runs in
    the caller's transaction (the Send it was ticked with)."""
    if role not in ("owner", "member"):
        raise BindingError("forbidden", "Only owners and members can allow this.")
    existing = (
        Allowance.objects.select_for_update()
        .filter(
            binding_id=binding_id,
            tool_name=VIEW_MESSAGES,
            thread_id=thread.pk,
            revoked_at__isnull=True,
        )
        .first()
    )
    if existing is not None:
        return existing
    allowance = Allowance.objects.create(
        binding=AppBinding.objects.get(pk=binding_id),
        workspace_id=thread.workspace_id,
        thread_id=thread.pk,
        tool_name=VIEW_MESSAGES,
        granted_by=granter,
    )
    allowance_event_record(
        allowance,
        AuditEventType.ALLOWANCE_CREATED,
        decision=Decision.ALLOWED,
        actor=granter,
        actor_label="user",
        reason="allowed_in_thread",
        extra={"kind": "view_messages"},
    )
    allowances_announce(allowance)
    return allowance
