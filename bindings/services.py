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
from django.utils import timezone

from . import policy
from .audit import digest_arguments, record
from .events import AuditEventType, Decision
from .models import AppBinding, ApprovalRequest, ApprovalStatus, ToolPolicy


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


def binding_for(*, thread: Any, server_id: int) -> AppBinding | None:
    """The binding of a server that applies to a thread: a thread binding beats the
    workspace's."""
    rows = list(
        AppBinding.objects.filter(server_id=server_id, workspace_id=thread.workspace_id)
        .filter(models_q_thread(thread.pk))
        .order_by("-thread_id")
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
        policy=policy_snap(binding, name),
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
