"""Browser permissions (camera, microphone, geolocation, clipboardWrite) an owner allows for
an app's binding from a view's prompt."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from audit.types import AuditEventType, Decision
from audit.writer import record
from bindings.models import AppBinding
from bindings.ratelimit import refusal_gate
from bindings.services._common import actor_fields, binding_fields
from bindings.services.bindings import binding_update
from bindings.services.errors import BindingError
from mcp_bridge.csp import parse_permissions

GRANTING_ROLES = ("owner",)


def app_view_permissions_grant(
    *,
    binding_id: int,
    permissions: list[str],
    declared: Any,
    actor: Any,
    role: str | None,
    thread_id: int | None = None,
    tool_call_id: int | None = None,
) -> AppBinding:
    """An owner allows, from a view's prompt, permissions its resource declares (camera,
    microphone, geolocation, clipboardWrite) for the app's binding. Anyone else is refused
    (audited); names the resource does not declare are refused too."""
    wanted = sorted({p for p in permissions if isinstance(p, str)})
    declared_names = set(parse_permissions(declared) or ())
    binding = AppBinding.objects.filter(pk=binding_id).first()
    if binding is None:
        raise BindingError("not_found", "That binding no longer exists.")
    problem = None
    if role not in GRANTING_ROLES:
        problem = ("forbidden", "Only a workspace owner can allow this for the app.")
    elif not wanted or not set(wanted) <= declared_names:
        problem = ("invalid_permissions", "The view did not ask for those permissions.")
    extra = {"permissions": wanted, "tool_call_id": tool_call_id}
    if problem is not None and (gate := refusal_gate(user=actor)) is not None:
        with transaction.atomic():  # audited at a bounded rate per person (refusal_gate)
            _view_permission_record(
                binding,
                AuditEventType.VIEW_PERMISSION_REFUSED,
                decision=Decision.DENIED,
                actor=actor,
                thread_id=thread_id,
                reason=problem[0],
                extra={**extra, **gate},
            )
    if problem is not None:
        raise BindingError(*problem)
    with transaction.atomic():
        granted = sorted(set(binding.granted_permissions or []) | set(wanted))
        binding = binding_update(
            binding_id=binding.pk,
            changes={"granted_permissions": granted},
            actor=actor,
            via="view_permission_prompt",
        )
        _view_permission_record(
            binding,
            AuditEventType.VIEW_PERMISSION_GRANTED,
            decision=Decision.ALLOWED,
            actor=actor,
            thread_id=thread_id,
            reason="allowed_for_app",
            extra=extra,
        )
    return binding


def _view_permission_record(
    binding: AppBinding,
    event_type: AuditEventType,
    *,
    decision: Decision,
    actor: Any,
    thread_id: int | None,
    reason: str,
    extra: dict[str, Any],
) -> None:
    record(
        event_type=event_type,
        decision=decision,
        **actor_fields(actor, ""),
        **binding_fields(binding),
        thread_id=thread_id or binding.thread_id,
        action="view_permission",
        reason=reason,
        extra=extra,
    )
