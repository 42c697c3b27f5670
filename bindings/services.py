"""Authority services: bindings, the decision of every action, approvals.

`authorize()` is the one door: it builds frozen snapshots from the database, asks the pure
policy engine (`bindings.policy.decide`), and writes the audit row of the decision.
Callers act only on `decision.allowed`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from . import policy
from .audit import digest_arguments, record
from .events import AuditEventType, Decision, event_type_for_action
from .models import AppBinding, ApprovalRequest, ApprovalStatus, ToolPolicy
from .signals import approvals_cancelled


class BindingError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# ----------------------------------------------------------------------------- bindings


def create_binding(
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
            workspace=workspace,
            thread=thread,
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
    "granted_permissions",
    "allowed_link_schemes",
    "deep_link_protocol",
    "ui_message_rate_limit",
)


def binding_settings(binding: AppBinding) -> dict[str, Any]:
    return {name: getattr(binding, name) for name in AUDITED_BINDING_FIELDS}


def _actor_fields(actor: Any, actor_label: str) -> dict[str, Any]:
    return {
        "actor_kind": "user" if actor is not None else "system",
        "actor_user_id": getattr(actor, "pk", None),
        "actor_label": actor_label,
    }


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
        **_actor_fields(actor, actor_label),
        workspace_id=binding.workspace_id,
        thread_id=binding.thread_id,
        binding_id=binding.pk,
        server_id=binding.server_id,
        action="admin" if actor_label == "admin" else "binding",
        reason=reason,
        extra={"via": actor_label or "service", **extra},
    )


def update_binding(
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


def set_bindings_enabled(
    *, binding_ids: list[int], enabled: bool, actor: Any = None, actor_label: str = ""
) -> int:
    """Enable or disable several bindings; returns how many actually changed."""
    changed = 0
    with transaction.atomic():
        for pk in sorted(set(binding_ids)):
            binding = AppBinding.objects.select_for_update().filter(pk=pk).first()
            if binding is None or binding.enabled == enabled:
                continue
            update_binding(
                binding_id=pk,
                changes={"enabled": enabled},
                actor=actor,
                actor_label=actor_label,
                via="enabled" if enabled else "disabled",
            )
            changed += 1
    return changed


def remove_binding(*, binding_id: int, actor: Any = None, actor_label: str = "") -> bool:
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
            record(
                event_type=AuditEventType.APPROVAL_CANCELLED,
                decision=Decision.REJECTED,
                **_actor_fields(actor, actor_label),
                workspace_id=binding.workspace_id,
                thread_id=approval.thread_id,
                binding_id=binding.pk,
                server_id=approval.server_id,
                tool_name=approval.tool_name,
                action="approval",
                reason="binding_removed",
                arguments=approval.arguments,
                extra={"approval_id": approval.pk},
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


def set_tool_policy(
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
        record(
            event_type=AuditEventType.POLICY_CHANGED,
            decision=Decision.ALLOWED,
            actor_kind="user" if actor else "system",
            actor_user_id=getattr(actor, "pk", None),
            workspace_id=binding.workspace_id,
            binding_id=binding.pk,
            server_id=binding.server_id,
            tool_name=tool_name,
            extra={"risk": risk, "approval": approval, "visibility_override": visibility_override},
        )
    return row


@dataclass(frozen=True)
class EnsuredBinding:
    binding: AppBinding
    created: bool
    # Tools whose approval rule this call set to "auto".
    auto_approved: tuple[str, ...] = ()


def ensure_binding(
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
                **_actor_fields(actor, actor_label),
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
            binding = create_binding(server=server, workspace=workspace, thread=thread, actor=actor)
        auto_approved: list[str] = []
        for tool_name in dict.fromkeys(auto_tools):
            current = ToolPolicy.objects.filter(binding=binding, tool_name=tool_name).first()
            if current is not None and current.approval == policy.Approval.AUTO:
                continue
            set_tool_policy(
                binding=binding,
                tool_name=tool_name,
                risk=current.risk if current else "",
                approval=policy.Approval.AUTO,
                visibility_override=current.visibility_override if current else None,
                actor=actor,
            )
            auto_approved.append(tool_name)
    return EnsuredBinding(binding, created, tuple(auto_approved))


def binding_for(*, thread: Any, server_id: int) -> AppBinding | None:
    """The binding of a server that applies to a thread: a thread binding beats the
    workspace's."""
    rows = list(
        AppBinding.objects.filter(server_id=server_id, workspace_id=thread.workspace_id)
        .filter(models_q_thread(thread.pk))
        .order_by(F("thread_id").desc(nulls_last=True))
    )
    return rows[0] if rows else None


def models_q_thread(thread_id: int):
    from django.db.models import Q

    return Q(thread_id=thread_id) | Q(thread__isnull=True)


# ---------------------------------------------------------------------------- snapshots


def binding_snap(binding: AppBinding | None) -> policy.BindingSnap | None:
    if binding is None:
        return None
    allowed = binding.allowed_domains
    flat: list[str] = []
    if isinstance(allowed, list):
        flat = [d for d in allowed if isinstance(d, str)]
    elif isinstance(allowed, dict):
        flat = [
            d
            for values in allowed.values()
            if isinstance(values, list)
            for d in values
            if isinstance(d, str)
        ]
    return policy.BindingSnap(
        id=binding.pk,
        server_id=binding.server_id,
        scope=binding.scope,
        workspace_id=binding.workspace_id,
        thread_id=binding.thread_id,
        enabled=binding.enabled,
        enabled_tools=frozenset(binding.enabled_tools) if binding.enabled_tools else None,
        allowed_link_schemes=frozenset(binding.allowed_link_schemes or ()),
        deep_link_protocol=binding.deep_link_protocol or None,
        ui_message_rate_limit=binding.ui_message_rate_limit,
        granted_permissions=frozenset(binding.granted_permissions or ()),
        allowed_domains=frozenset(flat),
    )


def tool_snap(tool: Any, server_id: int, name: str) -> policy.ToolSnap:
    if tool is None:
        return policy.ToolSnap(server_id=server_id, name=name, exists=False)
    return policy.ToolSnap(
        server_id=tool.server_id,
        name=tool.name,
        visibility=frozenset(tool.visibility or ()),
        annotations=dict(tool.annotations or {}),
        exists=bool(tool.present),
    )


def policy_snap(binding: AppBinding | None, tool_name: str | None) -> policy.PolicySnap | None:
    if binding is None or not tool_name:
        return None
    row = ToolPolicy.objects.filter(binding=binding, tool_name=tool_name).first()
    if row is None:
        return None
    return policy.PolicySnap(
        risk=row.risk or None,
        approval=row.approval or None,
        visibility_override=(
            frozenset(row.visibility_override) if row.visibility_override is not None else None
        ),
    )


@dataclass
class Authorization:
    decision: policy.PolicyDecision
    binding: AppBinding | None
    audit_id: int

    @property
    def allowed(self) -> bool:
        return self.decision.allowed


ACTOR_LABELS = {"user": "user", "model": "model", "app_view": "app view"}


def authorize(
    *,
    action_kind: policy.ActionKind | str,
    actor_kind: str,
    user: Any,
    role: str | None,
    thread: Any,
    server_id: int,
    tool: Any = None,
    tool_name: str | None = None,
    arguments: dict[str, Any] | None = None,
    url: str | None = None,
    display_mode: str | None = None,
    view: Any = None,
    approved: bool = False,
    available_display_modes: tuple[str, ...] | None = None,
    recent_ui_messages: int = 0,
    binding: AppBinding | None = None,
    preread: Any = None,
    audit: bool = True,
    extra: dict[str, Any] | None = None,
) -> Authorization:
    """Decide one action and audit the decision. `view` is the ToolCall of the view."""
    binding = binding or binding_for(thread=thread, server_id=server_id)
    name = tool_name or getattr(tool, "name", None)
    view_ref = None
    if view is not None:
        view_ref = policy.ViewRef(
            tool_call_id=view.pk,
            server_id=view.server_id,
            binding_id=view.binding_id if view.binding_id is not None else -1,
            thread_id=view.thread_id,
        )
    decision = policy.decide(
        actor=policy.Actor(
            kind=actor_kind, user_id=getattr(user, "pk", None), role=role, view=view_ref
        ),
        thread=policy.ThreadRef(id=thread.pk, workspace_id=thread.workspace_id),
        binding=binding_snap(binding),
        tool=tool_snap(tool, server_id, name) if name else None,
        # `preread`: the rows the caller just read (bindings.selectors.call_authority).
        policy=policy_snap(binding, name) if preread is None else preread.policy,
        action=policy.Action(
            kind=action_kind,
            server_id=server_id,
            tool_name=name,
            arguments=arguments,
            url=url,
            display_mode=display_mode,
            requested_at=timezone.now(),
            approved=approved,
            recent_ui_messages=recent_ui_messages,
            available_display_modes=available_display_modes,
        ),
    )
    audit_id = 0
    if audit:
        event = record(
            event_type=decision.audit_event_type,
            decision=decision.audit_decision,
            actor_kind=actor_kind,
            actor_user_id=getattr(user, "pk", None),
            actor_label=ACTOR_LABELS.get(actor_kind, actor_kind),
            workspace_id=thread.workspace_id,
            thread_id=thread.pk,
            binding_id=getattr(binding, "pk", None),
            server_id=server_id,
            tool_name=name or "",
            action=str(action_kind),
            reason=str(decision.reason_code),
            arguments=arguments,
            extra={
                **({"url": url[:500]} if url else {}),
                **({"view": view.pk} if view is not None else {}),
                **({"risk": str(decision.risk)} if decision.risk else {}),
                **(extra or {}),
            },
        )
        audit_id = event.pk
    return Authorization(decision=decision, binding=binding, audit_id=audit_id)


def record_refused_request(
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
    large. Like every refusal, it leaves a `denied` row; returns its id."""
    event = record(
        event_type=event_type_for_action(action_kind),
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
        extra=extra,
    )
    return event.pk


# ---------------------------------------------------------------------------- approvals


def create_approval(
    *,
    thread: Any,
    binding: AppBinding,
    tool_call: Any,
    server_id: int,
    tool_name: str,
    arguments: dict[str, Any],
    risk: str,
    requested_by_kind: str,
    requested_by: Any = None,
) -> ApprovalRequest:
    with transaction.atomic():
        approval = ApprovalRequest.objects.create(
            thread=thread,
            binding=binding,
            tool_call=tool_call,
            server_id=server_id,
            tool_name=tool_name,
            arguments=arguments,
            arguments_digest=digest_arguments(arguments),
            risk=risk,
            requested_by_kind=requested_by_kind,
            requested_by=requested_by,
            expires_at=timezone.now() + timedelta(seconds=settings.ATRIUM_APPROVAL_TTL),
        )
        record(
            event_type=AuditEventType.APPROVAL_REQUESTED,
            decision=Decision.PENDING,
            actor_kind=requested_by_kind,
            actor_user_id=getattr(requested_by, "pk", None),
            workspace_id=thread.workspace_id,
            thread_id=thread.pk,
            binding_id=binding.pk,
            server_id=server_id,
            tool_name=tool_name,
            action="approval",
            reason="approval_required",
            arguments=arguments,
            extra={"approval_id": approval.pk, "risk": risk},
        )
    return approval


def decide_approval(
    *, approval_id: int, decider: Any, role: str | None, approve: bool, reason: str = ""
) -> ApprovalRequest:
    """A member approves or rejects a pending request. Viewers and outsiders cannot."""
    with transaction.atomic():
        approval = ApprovalRequest.objects.select_for_update().filter(pk=approval_id).first()
        if approval is None:
            raise BindingError("not_found", "That approval request does not exist.")
        if role not in ("owner", "member"):
            raise BindingError("forbidden", "Only owners and members can decide approvals.")
        if approval.status != ApprovalStatus.PENDING:
            raise BindingError("already_decided", f"This request was already {approval.status}.")
        now = timezone.now()
        expired = approval.expires_at <= now
        if expired:
            # Recorded (and committed with this block); the caller learns it below.
            _expire(approval, now)
        else:
            _decide(approval, decider=decider, approve=approve, reason=reason, now=now)
    if expired:
        raise BindingError("expired", "This approval request has expired.")
    return approval


def _decide(approval: ApprovalRequest, *, decider: Any, approve: bool, reason: str, now) -> None:
    approval.status = ApprovalStatus.APPROVED if approve else ApprovalStatus.REJECTED
    approval.decided_by = decider
    approval.decided_at = now
    approval.reason = reason[:500]
    approval.save(update_fields=["status", "decided_by", "decided_at", "reason"])
    latency = (now - approval.created_at).total_seconds() * 1000
    record(
        event_type=(
            AuditEventType.APPROVAL_APPROVED if approve else AuditEventType.APPROVAL_REJECTED
        ),
        decision=Decision.APPROVED if approve else Decision.REJECTED,
        actor_kind="user",
        actor_user_id=decider.pk,
        workspace_id=approval.thread.workspace_id,
        thread_id=approval.thread_id,
        binding_id=approval.binding_id,
        server_id=approval.server_id,
        tool_name=approval.tool_name,
        action="approval",
        reason=reason[:200] or ("approved" if approve else "rejected"),
        arguments=approval.arguments,
        latency_ms=latency,
        extra={"approval_id": approval.pk},
    )


def _expire(approval: ApprovalRequest, now) -> None:
    approval.status = ApprovalStatus.EXPIRED
    approval.decided_at = now
    approval.save(update_fields=["status", "decided_at"])
    record(
        event_type=AuditEventType.APPROVAL_EXPIRED,
        decision=Decision.REJECTED,
        workspace_id=approval.thread.workspace_id,
        thread_id=approval.thread_id,
        binding_id=approval.binding_id,
        server_id=approval.server_id,
        tool_name=approval.tool_name,
        action="approval",
        reason="expired",
        arguments=approval.arguments,
        extra={"approval_id": approval.pk},
    )


def expire_due_approvals(*, thread_id: int | None = None) -> list[ApprovalRequest]:
    expired = []
    now = timezone.now()
    due = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING, expires_at__lte=now)
    if thread_id is not None:
        due = due.filter(thread_id=thread_id)
    with transaction.atomic():
        for approval in due.select_for_update().select_related("thread"):
            _expire(approval, now)
            expired.append(approval)
    return expired
