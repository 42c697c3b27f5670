"""Tool policies: an administrator's risk, approval rule and visibility for one tool under a
binding (audited as POLICY_CHANGED)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from audit.types import AuditEventType, Decision
from audit.writer import record
from bindings import policy
from bindings.models import AppBinding, ToolPolicy
from bindings.services._common import actor_fields, binding_fields
from bindings.services.errors import BindingError


def tool_policy_set(
    *,
    binding: AppBinding,
    tool_name: str,
    risk: str = "",
    approval: str = "",
    visibility_override: list[str] | None = None,
    actor: Any = None,
) -> ToolPolicy:
    if risk not in ("", *policy.Risk):
        raise BindingError("invalid_policy", f"Unknown risk '{risk}'.")
    if approval not in ("", *policy.Approval):
        raise BindingError("invalid_policy", f"Unknown approval rule '{approval}'.")
    if visibility_override is not None and (
        not isinstance(visibility_override, list)
        or not set(visibility_override) <= {"model", "app"}
    ):
        raise BindingError("invalid_policy", 'A visibility override lists "model" and/or "app".')
    with transaction.atomic():
        row, _ = ToolPolicy.objects.update_or_create(
            binding=binding,
            tool_name=tool_name,
            defaults={
                "risk": risk,
                "approval": approval,
                "visibility_override": visibility_override,
            },
        )
        _policy_record(
            binding,
            tool_name,
            actor_kind="user" if actor else "system",
            actor_user_id=getattr(actor, "pk", None),
            extra={"risk": risk, "approval": approval, "visibility_override": visibility_override},
        )
    return row


def tool_policy_remove(
    *, binding: AppBinding, tool_name: str, actor: Any = None, actor_label: str = ""
) -> bool:
    """Remove a tool's policy row under a binding (the tool falls back to what it declares),
    audited as POLICY_CHANGED. Returns whether there was a row."""
    with transaction.atomic():
        removed, _ = ToolPolicy.objects.filter(binding=binding, tool_name=tool_name).delete()
        if removed:
            _policy_record(
                binding,
                tool_name,
                **actor_fields(actor, actor_label),
                action="admin" if actor_label == "admin" else "binding",
                reason="policy_removed",
                extra={"removed": True, "via": actor_label or "service"},
            )
    return bool(removed)


def _policy_record(binding: AppBinding, tool_name: str, **fields: Any) -> None:
    """Audit a change of a tool's policy under ``binding`` (``fields``: the actor, the
    action, the reason, the extra, as :func:`audit.writer.record` takes them)."""
    record(
        event_type=AuditEventType.POLICY_CHANGED,
        decision=Decision.ALLOWED,
        **binding_fields(binding),
        tool_name=tool_name,
        **fields,
    )
