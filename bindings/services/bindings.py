"""App bindings: an MCP server made available in a workspace or one of its threads.

Create, change, enable or disable, remove, and ensure (idempotent set-up); every change is
audited field by field in the same transaction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from audit.types import AuditEventType, Decision
from audit.writer import record
from bindings import policy
from bindings.models import AppBinding, ApprovalRequest, ApprovalStatus, ToolPolicy
from bindings.services._common import actor_fields, binding_fields
from bindings.services.approvals import approval_event_record
from bindings.services.errors import BindingError
from bindings.services.policies import tool_policy_set
from bindings.signals import approvals_cancelled


def binding_create(
    *,
    server: Any,
    workspace: Any,
    thread: Any = None,
    actor: Any = None,
    enabled_tools: list[str] | None = None,
    allowed_domains: Any = None,
    granted_permissions: list[str] | None = None,
    allowed_link_schemes: list[str] | None = None,
    deep_link_protocol: str = "",
    ui_message_rate_limit: int = policy.DEFAULT_UI_MESSAGE_RATE_LIMIT,
    enabled: bool = True,
) -> AppBinding:
    if thread is not None and thread.workspace_id != workspace.pk:
        raise BindingError("scope_mismatch", "That thread belongs to another workspace.")
    with transaction.atomic():
        binding = AppBinding.objects.create(
            server=server,
            workspace_id=workspace.pk,
            thread_id=getattr(thread, "pk", None),
            enabled_tools=enabled_tools,
            allowed_domains=allowed_domains,
            granted_permissions=list(granted_permissions or []),
            allowed_link_schemes=(
                ["https", "mailto"] if allowed_link_schemes is None else list(allowed_link_schemes)
            ),
            enabled=enabled,
            deep_link_protocol=deep_link_protocol,
            ui_message_rate_limit=ui_message_rate_limit,
            created_by=actor,
        )
        record(
            event_type=AuditEventType.BINDING_CREATED,
            decision=Decision.ALLOWED,
            actor_kind="user" if actor else "system",
            actor_user_id=getattr(actor, "pk", None),
            workspace_id=workspace.pk,
            thread_id=getattr(thread, "pk", None),
            binding_id=binding.pk,
            server_id=server.pk,
            extra={"scope": binding.scope, "enabled_tools": enabled_tools},
        )
    return binding


# The binding settings an admin can change; every change is audited field by field.
AUDITED_BINDING_FIELDS = (
    "enabled",
    "enabled_tools",
    "allowed_domains",
    "csp_domain_mode",
    "granted_permissions",
    "allowed_link_schemes",
    "deep_link_protocol",
    "ui_message_rate_limit",
)


def binding_settings(binding: AppBinding) -> dict[str, Any]:
    return {name: getattr(binding, name) for name in AUDITED_BINDING_FIELDS}


def _record_binding_event(
    event_type: AuditEventType,
    binding: AppBinding,
    *,
    actor: Any,
    actor_label: str,
    reason: str,
    extra: dict[str, Any],
) -> None:
    record(
        event_type=event_type,
        decision=Decision.ALLOWED,
        **actor_fields(actor, actor_label),
        **binding_fields(binding),
        thread_id=binding.thread_id,
        action="admin" if actor_label == "admin" else "binding",
        reason=reason,
        extra={"via": actor_label or "service", **extra},
    )


def binding_update(
    *,
    binding_id: int,
    changes: dict[str, Any],
    actor: Any = None,
    actor_label: str = "",
    via: str = "edited",
) -> AppBinding:
    """Change a binding's settings (never its server or scope) and audit the difference.

    The row is locked while it changes, so two admins editing at once each see and record
    what they actually changed. An empty difference writes nothing.
    """
    unknown = set(changes) - set(AUDITED_BINDING_FIELDS)
    if unknown:
        raise BindingError("invalid_change", f"Cannot change {', '.join(sorted(unknown))}.")
    with transaction.atomic():
        # No joins: PostgreSQL refuses FOR UPDATE on the nullable side of an outer join.
        binding = AppBinding.objects.select_for_update().filter(pk=binding_id).first()
        if binding is None:
            raise BindingError("not_found", "That binding no longer exists.")
        before = binding_settings(binding)
        for name, value in changes.items():
            setattr(binding, name, value)
        after = binding_settings(binding)
        diff = {k: [before[k], after[k]] for k in before if before[k] != after[k]}
        if diff:
            binding.save(update_fields=[*diff, "updated_at"])
            _record_binding_event(
                AuditEventType.BINDING_CHANGED,
                binding,
                actor=actor,
                actor_label=actor_label,
                reason=via,
                extra={"changes": diff},
            )
    return binding


def binding_set_enabled(
    *, binding_ids: list[int], enabled: bool, actor: Any = None, actor_label: str = ""
) -> int:
    """Enable or disable several bindings; returns how many actually changed."""
    changed = 0
    with transaction.atomic():
        for pk in sorted(set(binding_ids)):
            binding = AppBinding.objects.select_for_update().filter(pk=pk).first()
            if binding is None or binding.enabled == enabled:
                continue
            binding_update(
                binding_id=pk,
                changes={"enabled": enabled},
                actor=actor,
                actor_label=actor_label,
                via="enabled" if enabled else "disabled",
            )
            changed += 1
    return changed


def binding_remove(*, binding_id: int, actor: Any = None, actor_label: str = "") -> bool:
    """Delete a binding. Its pending approvals are cancelled first (audited, and the calls
    waiting on them end as rejected), so nobody is left approving a call that can no
    longer run. The audit row keeps the removed settings and policies."""
    with transaction.atomic():
        binding = AppBinding.objects.select_for_update().filter(pk=binding_id).first()
        if binding is None:
            return False
        pending = list(
            ApprovalRequest.objects.select_for_update()
            .filter(binding_id=binding.pk, status=ApprovalStatus.PENDING)
            .order_by("pk")
        )
        message = "The app's binding was removed; this call did not run."
        now = timezone.now()
        for approval in pending:
            approval.status = ApprovalStatus.CANCELLED
            approval.decided_at = now
            approval.reason = "binding_removed"
            approval.save(update_fields=["status", "decided_at", "reason"])
            approval_event_record(
                approval,
                AuditEventType.APPROVAL_CANCELLED,
                decision=Decision.REJECTED,
                reason="binding_removed",
                workspace_id=binding.workspace_id,
                **actor_fields(actor, actor_label),
                arguments=approval.arguments,
            )
        call_ids = [a.tool_call_id for a in pending if a.tool_call_id is not None]
        if call_ids:
            approvals_cancelled.send(
                sender=AppBinding, tool_call_ids=call_ids, code="binding_removed", message=message
            )
        _record_binding_event(
            AuditEventType.BINDING_REMOVED,
            binding,
            actor=actor,
            actor_label=actor_label,
            reason="deleted",
            extra={
                "scope": binding.scope,
                "settings": binding_settings(binding),
                "policies": list(binding.policies.values_list("tool_name", flat=True)),
                "cancelled_approvals": [a.pk for a in pending],
            },
        )
        binding.delete()
    return True


@dataclass(frozen=True)
class EnsuredBinding:
    binding: AppBinding
    created: bool
    # Tools whose approval rule this call set to "auto".
    auto_approved: tuple[str, ...] = ()


def binding_ensure(
    *,
    server: Any,
    workspace: Any,
    thread: Any = None,
    auto_tools: tuple[str, ...] | list[str] = (),
    actor: Any = None,
    actor_label: str = "",
) -> EnsuredBinding:
    """The binding of ``server`` at exactly this scope (the workspace, or one of its
    threads), created when missing, with ``auto_tools`` set to run without asking. Running
    it again changes nothing and writes nothing; every change is audited by the service
    that makes it (BINDING_CREATED, POLICY_CHANGED), a refused scope as BINDING_REFUSED."""
    if thread is not None and thread.workspace_id != workspace.pk:
        with transaction.atomic():
            record(
                event_type=AuditEventType.BINDING_REFUSED,
                decision=Decision.DENIED,
                **actor_fields(actor, actor_label),
                workspace_id=workspace.pk,
                thread_id=thread.pk,
                server_id=server.pk,
                action="binding",
                reason="scope_mismatch",
            )
        raise BindingError("scope_mismatch", "That thread belongs to another workspace.")
    with transaction.atomic():
        # Serializes concurrent set-ups of the same server (no joins: PostgreSQL).
        type(server).objects.select_for_update().filter(pk=server.pk).first()
        binding = AppBinding.objects.filter(
            server_id=server.pk, workspace_id=workspace.pk, thread_id=getattr(thread, "pk", None)
        ).first()
        created = binding is None
        if binding is None:
            binding = binding_create(server=server, workspace=workspace, thread=thread, actor=actor)
        auto_approved: list[str] = []
        for tool_name in dict.fromkeys(auto_tools):
            current = ToolPolicy.objects.filter(binding=binding, tool_name=tool_name).first()
            if current is not None and current.approval == policy.Approval.AUTO:
                continue
            tool_policy_set(
                binding=binding,
                tool_name=tool_name,
                risk=current.risk if current else "",
                approval=policy.Approval.AUTO,
                visibility_override=current.visibility_override if current else None,
                actor=actor,
            )
            auto_approved.append(tool_name)
    return EnsuredBinding(binding, created, tuple(auto_approved))
