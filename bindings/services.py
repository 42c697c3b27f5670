"""Authority services: bindings, the decision of every action, approvals.

`action_authorize()` is the one door: it builds frozen snapshots from the database, asks the pure
policy engine (`bindings.policy.decide`), and writes the audit row of the decision.
Callers act only on `decision.allowed`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from audit.types import AuditEventType, Decision, event_type_for_action
from audit.writer import digest_arguments, record
from mcp_bridge import gateway
from mcp_bridge.csp import parse_permissions
from mcp_bridge.models import Tool

from . import policy, ratelimit
from .models import (
    Allowance,
    AppBinding,
    ApprovalRequest,
    ApprovalStatus,
    CspDropsAudited,
    ToolPolicy,
)
from .selectors import (
    active_allowance,
    allowance_snap,
    binding_for,
    binding_snap,
    bindings_for_thread,
    policy_snap,
    signs_in_members,
    tool_snap,
)
from .signals import allowances_changed, approvals_cancelled


class BindingError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# ----------------------------------------------------------------------------- bindings


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


def _actor_fields(actor: Any, actor_label: str) -> dict[str, Any]:
    return {
        "actor_kind": "user" if actor is not None else "system",
        "actor_user_id": getattr(actor, "pk", None),
        "actor_label": actor_label,
    }


def _binding_fields(binding: AppBinding) -> dict[str, Any]:
    """An audit row's binding, its workspace and its server (the thread is the caller's)."""
    return {
        "workspace_id": binding.workspace_id,
        "binding_id": binding.pk,
        "server_id": binding.server_id,
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
        **_binding_fields(binding),
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
            _approval_record(
                approval,
                AuditEventType.APPROVAL_CANCELLED,
                decision=Decision.REJECTED,
                reason="binding_removed",
                workspace_id=binding.workspace_id,
                **_actor_fields(actor, actor_label),
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
                **_actor_fields(actor, actor_label),
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
        **_binding_fields(binding),
        tool_name=tool_name,
        **fields,
    )


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


# ------------------------------------------------------------------- workspaces, threads


def workspace_bindings_delete(*, workspace_id: int) -> None:
    """A workspace is being deleted (chat calls this in the deleting transaction): its
    bindings go, and with them their policies, approvals and allowances. Not audited: the
    workspace's deletion is the change; its audit history stays."""
    with transaction.atomic():
        Allowance.objects.filter(workspace_id=workspace_id).delete()
        AppBinding.objects.filter(workspace_id=workspace_id).delete()


def thread_bindings_delete(*, thread_id: int) -> None:
    """A thread is being deleted (chat calls this in the deleting transaction): its own
    bindings, its approvals and its allowances go (the workspace's bindings stay)."""
    with transaction.atomic():
        Allowance.objects.filter(thread_id=thread_id).delete()
        ApprovalRequest.objects.filter(thread_id=thread_id).delete()
        AppBinding.objects.filter(thread_id=thread_id).delete()


@dataclass
class Authorization:
    decision: policy.PolicyDecision
    binding: AppBinding | None
    audit_id: int

    @property
    def allowed(self) -> bool:
        return self.decision.allowed


ACTOR_LABELS = {"user": "user", "model": "model", "app_view": "app view"}


def action_authorize(
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
    approved_by: Any = None,
    available_display_modes: tuple[str, ...] | None = None,
    recent_ui_messages: int = 0,
    binding: AppBinding | None = None,
    preread: Any = None,
    audit: bool = True,
    server_enabled: bool | None = None,
    per_member_grants: bool | None = None,
    extra: dict[str, Any] | None = None,
) -> Authorization:
    """Decide one action and audit the decision. `view` is the ToolCall of the view.
    `server_enabled` (with `per_member_grants`, for a tool call): the target server's flag
    and whether it signs each member in, if the caller read the server row with this
    request (saves a statement); otherwise they are read here. `approved_by`: with
    `approved`, the user whose approval is replayed."""
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
    if preread is not None:
        allowance = preread.allowance
    elif binding is not None and name:
        allowance = active_allowance(binding_id=binding.pk, thread=thread, tool_name=name)
    else:
        allowance = None
    decision = policy.decide(
        actor=policy.Actor(
            kind=policy.ActorKind(actor_kind),
            user_id=getattr(user, "pk", None),
            role=policy.Role(role) if role else None,
            view=view_ref,
        ),
        thread=policy.ThreadRef(id=thread.pk, workspace_id=thread.workspace_id),
        binding=binding_snap(
            binding, server_enabled=server_enabled, per_member_grants=per_member_grants
        ),
        tool=tool_snap(tool, server_id, name) if name else None,
        # `preread`: the rows the caller just read (bindings.selectors.call_authority).
        policy=policy_snap(binding, name) if preread is None else preread.policy,
        action=policy.Action(
            kind=policy.ActionKind(action_kind),
            server_id=server_id,
            tool_name=name,
            arguments=arguments,
            url=url,
            display_mode=display_mode,
            requested_at=timezone.now(),
            approved=approved,
            approved_by=getattr(approved_by, "pk", approved_by),
            recent_ui_messages=recent_ui_messages,
            available_display_modes=available_display_modes,
        ),
        allowance=allowance_snap(allowance),
    )
    used = allowance if decision.reason_code is policy.Reason.ALLOWANCE else None
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
                # Using an allowance: which consent this call ran on (its grant is audited).
                **(
                    {"allowance_id": used.pk, "allowance_scope": used.scope}
                    if used is not None
                    else {}
                ),
                **(extra or {}),
            },
        )
        audit_id = event.pk
    return Authorization(decision=decision, binding=binding, audit_id=audit_id)


def refusal_gate(*, user: Any = None, client: str = "") -> dict[str, Any] | None:
    """Whether a refusal gets its audit row now (DESIGN §8.10: every refusal is audited, at
    a bounded rate per person, or per client address before sign-in): ``None`` when it is
    only counted; otherwise what its row adds to ``extra`` (``{"skipped": N}`` when N
    refusals of the same person or address went unwritten since their previous row)."""
    if getattr(user, "is_authenticated", False):
        key = f"user:{user.pk}"
    else:
        key = f"addr:{client[:100] or 'unknown'}"
    gate = ratelimit.audit_gate("refusal_audit", key)
    if not gate.write:
        return None
    return {"skipped": gate.skipped} if gate.skipped else {}


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


def csp_drops_record(
    *,
    binding_id: int | None,
    server_id: int,
    workspace_id: int,
    thread_id: int,
    uri: str,
    content_hash: str,
    dropped: list[dict[str, str]],
) -> int:
    """Audit the CSP sources dropped from a view's resource once per resource content,
    binding and set of drops (CspDropsAudited), not on every opening: a hostile app must
    not turn each visit into rows of an insert-only table. Returns the rows written."""
    if not dropped:
        return 0
    canonical = json.dumps(sorted(dropped, key=lambda d: json.dumps(d, sort_keys=True)))
    with transaction.atomic():
        _, first = CspDropsAudited.objects.get_or_create(
            binding_id=binding_id or 0,
            content_hash=content_hash[:64],
            drops_digest=hashlib.sha256(canonical.encode()).hexdigest(),
        )
        if not first:
            return 0
        for item in dropped:
            record(
                event_type=AuditEventType.CSP_DOMAIN_DROPPED,
                decision=Decision.DENIED,
                actor_kind="system",
                workspace_id=workspace_id,
                thread_id=thread_id,
                binding_id=binding_id,
                server_id=server_id,
                action="csp",
                reason=str(item.get("code") or "dropped")[:200],
                extra={**item, "uri": uri, "content_hash": content_hash[:64]},
            )
    return len(dropped)


# ---------------------------------------------------------------------------- approvals


def approval_create(
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
    risk_source: str = "",
    view_id: int | None = None,
) -> ApprovalRequest:
    """Ask for consent to run ``tool_call`` with exactly ``arguments`` (audited).
    ``view_id``: the app view that asked (``approval_join_pending`` finds it again)."""
    with transaction.atomic():
        approval = ApprovalRequest.objects.create(
            thread_id=thread.pk,
            binding=binding,
            tool_call_id=getattr(tool_call, "pk", None),
            server_id=server_id,
            tool_name=tool_name,
            arguments=arguments,
            arguments_digest=digest_arguments(arguments),
            risk=risk,
            risk_source=risk_source,
            requested_by_kind=requested_by_kind,
            requested_by=requested_by,
            view_id=view_id,
            expires_at=timezone.now() + timedelta(seconds=settings.ATRIUM_APPROVAL_TTL),
        )
        _approval_record(
            approval,
            AuditEventType.APPROVAL_REQUESTED,
            decision=Decision.PENDING,
            reason="approval_required",
            workspace_id=thread.workspace_id,
            actor_kind=requested_by_kind,
            actor_user_id=getattr(requested_by, "pk", None),
            arguments=arguments,
            extra={"risk": risk, **({"view": view_id} if view_id is not None else {})},
        )
    return approval


def _pending_of_view(*, view_id: int, requested_by: Any) -> Any:
    """The requests one member's copy of a view has pending (not yet overdue)."""
    return ApprovalRequest.objects.filter(
        view_id=view_id,
        requested_by_kind=policy.ActorKind.APP_VIEW,
        requested_by_id=getattr(requested_by, "pk", None),
        status=ApprovalStatus.PENDING,
        expires_at__gt=timezone.now(),
    )


def approval_join_pending(
    *,
    thread: Any,
    view_id: int,
    requested_by: Any,
    tool_name: str,
    arguments: dict[str, Any],
) -> ApprovalRequest | None:
    """One card per question: the request this member's copy of a view already has
    pending for the same tool with the same arguments, which a repeated request joins
    (``asks`` + 1, audited ``Approval asked again``) instead of adding a card. None if
    there is none. The same arguments, because an approval runs exactly the arguments it
    shows: a request with other arguments is another question (and counts against the
    caps, ``approval_limit_refusal``). The caller holds the view's lock."""
    approval = (
        _pending_of_view(view_id=view_id, requested_by=requested_by)
        .filter(tool_name=tool_name, arguments_digest=digest_arguments(arguments))
        .order_by("pk")
        .first()
    )
    if approval is None:
        return None
    ApprovalRequest.objects.filter(pk=approval.pk).update(asks=F("asks") + 1)
    approval.refresh_from_db(fields=["asks"])
    _approval_record(
        approval,
        AuditEventType.APPROVAL_ASKED_AGAIN,
        decision=Decision.PENDING,
        reason="approval_required",
        workspace_id=thread.workspace_id,
        actor_kind=policy.ActorKind.APP_VIEW,
        actor_user_id=getattr(requested_by, "pk", None),
        extra={"view": view_id, "asks": approval.asks},
    )
    return approval


def approval_limit_refusal(
    *,
    thread: Any,
    binding: AppBinding,
    view_id: int,
    requested_by: Any,
    server_id: int,
    tool_name: str,
    arguments: dict[str, Any],
) -> BindingError | None:
    """None if a view may ask one more question; else the refusal, audited (``Approval
    refused: too many pending``, committed with the caller's block). At most
    ``ATRIUM_APPROVALS_PENDING_PER_VIEW`` requests pending per member's copy of a view and
    ``ATRIUM_APPROVALS_PENDING_PER_THREAD`` per thread (whoever asked them)."""
    per_view = settings.ATRIUM_APPROVALS_PENDING_PER_VIEW
    per_thread = settings.ATRIUM_APPROVALS_PENDING_PER_THREAD
    if _pending_of_view(view_id=view_id, requested_by=requested_by).count() >= per_view:
        code, limit, where = "too_many_pending_approvals_view", per_view, "this view"
    elif (
        ApprovalRequest.objects.filter(
            thread_id=thread.pk, status=ApprovalStatus.PENDING, expires_at__gt=timezone.now()
        ).count()
        >= per_thread
    ):
        code, limit, where = "too_many_pending_approvals_thread", per_thread, "this thread"
    else:
        return None
    record(
        event_type=AuditEventType.APPROVAL_LIMIT_REACHED,
        decision=Decision.DENIED,
        actor_kind=policy.ActorKind.APP_VIEW,
        actor_user_id=getattr(requested_by, "pk", None),
        actor_label="app view",
        workspace_id=thread.workspace_id,
        thread_id=thread.pk,
        binding_id=binding.pk,
        server_id=server_id,
        tool_name=tool_name,
        action="approval",
        reason=code,
        arguments=arguments,
        extra={"view": view_id, "limit": limit},
    )
    return BindingError(
        code,
        f"{limit} approval requests are already waiting in {where}; this call was not asked. "
        "Answer the pending ones first.",
    )


def approval_grant_owner(approval: ApprovalRequest) -> int | None:
    """The member whose own sign-in ``approval``'s call spends, if any
    (``policy.grant_owner``): only they may approve it or allow its tool for it."""
    owner = policy.grant_owner(
        per_member_grants=signs_in_members(approval.server),
        requested_by_kind=approval.requested_by_kind,
        requester_id=approval.requested_by_id,
    )
    return owner if isinstance(owner, int) else None


def approval_personal_grant_message(approval: ApprovalRequest) -> str:
    """Why nobody but the owner of the sign-in may approve ``approval``."""
    owner = approval.requested_by
    name = (owner.get_full_name() or owner.get_username()) if owner is not None else "its requester"
    return policy.personal_grant_message(owner_name=name, server_name=approval.server.name)


def approval_record_decision(
    *,
    approval_id: int,
    decider: Any,
    role: str | None,
    approve: bool,
    reason: str = "",
    remember: str = "",
    actor_label: str = "",
) -> ApprovalRequest:
    """A member approves or rejects a pending request. Viewers and outsiders cannot.

    ``remember`` (``"thread"`` or ``"workspace"``, with ``approve``): also allow the tool at
    that scope from now on (an ``Allowance``, created in the same transaction and audited).
    Who may remember what is ``policy.grantable_scopes``; a refusal is audited and leaves
    the request pending, so the person can still approve it once.
    """
    if remember and (not approve or remember not in {scope.value for scope in policy.Scope}):
        raise BindingError("invalid_message", "Only an approval can be remembered, per scope.")
    refused: BindingError | None = None
    with transaction.atomic():
        approval = ApprovalRequest.objects.select_for_update().filter(pk=approval_id).first()
        if approval is None:
            raise BindingError("not_found", "That approval request does not exist.")
        now = timezone.now()
        expired = False
        # Who may decide: policy.may_approve (owners and members; a request that spends a
        # member's own sign-in, only that member may approve — anyone may reject it).
        why = policy.may_approve(
            role=role,
            decider_id=getattr(decider, "pk", None),
            owner=approval_grant_owner(approval) if role in ("owner", "member") else None,
        )
        if why in (policy.Reason.NOT_A_MEMBER, policy.Reason.VIEWER_CANNOT_ACT):
            refused = _refuse_decision(approval, decider=decider, role=role)
        elif approval.status != ApprovalStatus.PENDING:
            raise BindingError("already_decided", f"This request was already {approval.status}.")
        elif approval.expires_at <= now:
            expired = True
            # Recorded (and committed with this block); the caller learns it below.
            _expire(approval, now)
        elif approve and why is policy.Reason.PERSONAL_GRANT:
            refused = _refuse_decision(approval, decider=decider, role=role, reason=why)
        elif remember and remember not in approval_offers(approval, role=role):
            refused = _refuse_allowance(approval, decider=decider, scope=remember, role=role)
        else:
            _decide(approval, decider=decider, approve=approve, reason=reason, now=now)
            if remember:
                _create_allowance(
                    approval, scope=remember, granter=decider, actor_label=actor_label
                )
    if expired:
        raise BindingError("expired", "This approval request has expired.")
    if refused is not None:
        raise refused
    return approval


def _approval_record(
    approval: ApprovalRequest,
    event_type: AuditEventType,
    *,
    decision: Decision,
    reason: str,
    action: str = "approval",
    workspace_id: int | None = None,
    extra: dict[str, Any] | None = None,
    **fields: Any,
) -> None:
    """Audit a step of an approval request (asked, decided, refused, expired, cancelled):
    its tool at its binding, in its thread. ``workspace_id``: the binding's, when the caller
    has it (else read through ``approval.binding``); ``fields``: the actor, the arguments,
    the latency, as :func:`audit.writer.record` takes them."""
    record(
        event_type=event_type,
        decision=decision,
        workspace_id=approval.binding.workspace_id if workspace_id is None else workspace_id,
        thread_id=approval.thread_id,
        binding_id=approval.binding_id,
        server_id=approval.server_id,
        tool_name=approval.tool_name,
        action=action,
        reason=reason,
        extra={"approval_id": approval.pk, **(extra or {})},
        **fields,
    )


def _refuse_decision(
    approval: ApprovalRequest,
    *,
    decider: Any,
    role: str | None,
    reason: policy.Reason | None = None,
) -> BindingError:
    """Audit an attempt to decide by someone who may not (committed with the caller's
    block: the request stays pending) and explain it; at a bounded rate (`refusal_gate`).
    ``reason``: ``personal_grant`` for an approval of a call that spends another member's
    own sign-in (``policy.may_approve``)."""
    if reason is policy.Reason.PERSONAL_GRANT:
        code, message = str(reason), approval_personal_grant_message(approval)
    else:
        code = "viewer_cannot_act" if role == "viewer" else "not_a_member"
        message = "Only owners and members can decide approvals."
    if (gate := refusal_gate(user=decider)) is not None:
        _approval_record(
            approval,
            AuditEventType.APPROVAL_DECISION_REFUSED,
            decision=Decision.DENIED,
            reason=code,
            **_actor_fields(decider, "user"),
            extra={"role": role or "", **({"message": message} if reason else {}), **gate},
        )
    return BindingError("forbidden" if reason is None else code, message)


def approval_offers(approval: ApprovalRequest, *, role: str | None) -> tuple[str, ...]:
    """The scopes at which ``role`` may remember consent when deciding ``approval``
    (empty: *Approve once* only). Reads the tool's catalogue row and policy afresh."""
    binding = approval.binding
    tool = Tool.objects.filter(server_id=approval.server_id, name=approval.tool_name).first()
    scopes = policy.grantable_scopes(
        tool=tool_snap(tool, approval.server_id, approval.tool_name),
        policy=policy_snap(binding, approval.tool_name),
        binding=binding_snap(binding),
        role=role,
    )
    return tuple(str(scope) for scope in scopes)


def _allowance_record(
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
        **_actor_fields(actor, actor_label or "user"),
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


def _announce_allowances(allowance: Allowance) -> None:
    """Tell chat (inside this transaction) which threads' allowances changed."""
    allowances_changed.send(
        sender=Allowance, workspace_id=allowance.workspace_id, thread_id=allowance.thread_id
    )


def _create_allowance(
    approval: ApprovalRequest, *, scope: str, granter: Any, actor_label: str
) -> Allowance:
    """Remember the consent just given (the caller holds the approval's lock). An active
    allowance of the same tool at the same scope is reused, not duplicated."""
    thread_id = approval.thread_id if scope == policy.Scope.THREAD else None
    workspace_id = approval.binding.workspace_id
    active = Allowance.objects.select_for_update().filter(
        binding_id=approval.binding_id,
        tool_name=approval.tool_name,
        workspace_id=workspace_id,
        thread_id=thread_id,
        revoked_at__isnull=True,
    )
    if approval_grant_owner(approval) is not None:
        # Consent to spend one's own sign-in is one's own: another member's allowance of
        # the tool does not stand in for it (policy.AllowanceSnap.covers).
        active = active.filter(granted_by=granter)
    existing = active.first()
    if existing is not None:
        return existing
    allowance = Allowance.objects.create(
        binding=approval.binding,
        workspace_id=workspace_id,
        thread_id=thread_id,
        tool_name=approval.tool_name,
        granted_by=granter,
        approval=approval,
    )
    _allowance_record(
        allowance,
        AuditEventType.ALLOWANCE_CREATED,
        decision=Decision.ALLOWED,
        actor=granter,
        actor_label=actor_label,
        reason=f"allowed_in_{scope}",
        extra={"risk": approval.risk},
    )
    _announce_allowances(allowance)
    return allowance


def _refuse_allowance(
    approval: ApprovalRequest, *, decider: Any, scope: str, role: str | None
) -> BindingError:
    """Audit a refused grant (committed with the caller's block) and explain it."""
    if role != "owner" and scope == policy.Scope.WORKSPACE:
        code, message = "forbidden", "Only owners can allow a tool for the whole workspace."
    else:
        code, message = (
            "cannot_allow",
            f"{approval.tool_name} cannot be allowed in advance: every call needs its own "
            "approval (the server declares it destructive, or an administrator requires it).",
        )
    if (gate := refusal_gate(user=decider)) is not None:  # bounded rate per person
        _approval_record(
            approval,
            AuditEventType.ALLOWANCE_REFUSED,
            decision=Decision.DENIED,
            reason=code,
            action="allowance",
            **_actor_fields(decider, "user"),
            extra={"scope": scope, "role": role or "", **gate},
        )
    return BindingError(code, message)


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
                _allowance_record(
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
            _allowance_record(
                allowance,
                AuditEventType.ALLOWANCE_REVOKED,
                decision=Decision.ALLOWED,
                actor=actor,
                actor_label=actor_label,
                reason="revoked",
            )
            _announce_allowances(allowance)
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
    _allowance_record(
        allowance,
        AuditEventType.ALLOWANCE_CREATED,
        decision=Decision.ALLOWED,
        actor=granter,
        actor_label="user",
        reason="allowed_in_thread",
        extra={"kind": "view_messages"},
    )
    _announce_allowances(allowance)
    return allowance


def covered_pending_approvals(
    *, approval: ApprovalRequest, scope: str, granter: Any = None
) -> list[int]:
    """Ids of the other requests still pending that allowing ``approval``'s tool at
    ``scope`` covers (e.g. the polls a view made while the first one waited): the caller
    settles them on the strength of the new allowance, granted by ``granter``. On a server
    that signs each member in, an allowance covers only its granter's own requests
    (``policy.grant_owner``): the others stay pending for their own members."""
    pending = ApprovalRequest.objects.filter(
        binding_id=approval.binding_id,
        tool_name=approval.tool_name,
        status=ApprovalStatus.PENDING,
        binding__workspace_id=approval.binding.workspace_id,
    ).exclude(pk=approval.pk)
    if scope == policy.Scope.THREAD:
        pending = pending.filter(thread_id=approval.thread_id)
    per_member = signs_in_members(approval.server)
    granter_id = getattr(granter, "pk", None)
    return [
        pk
        for pk, kind, requester in pending.order_by("pk").values_list(
            "pk", "requested_by_kind", "requested_by_id"
        )
        if policy.grant_owner(
            per_member_grants=per_member, requested_by_kind=kind, requester_id=requester
        )
        in (None, granter_id)
    ]


def _decide(
    approval: ApprovalRequest, *, decider: Any, approve: bool, reason: str, now: datetime
) -> None:
    approval.status = ApprovalStatus.APPROVED if approve else ApprovalStatus.REJECTED
    approval.decided_by = decider
    approval.decided_at = now
    approval.reason = reason[:500]
    approval.save(update_fields=["status", "decided_by", "decided_at", "reason"])
    latency = (now - approval.created_at).total_seconds() * 1000
    _approval_record(
        approval,
        AuditEventType.APPROVAL_APPROVED if approve else AuditEventType.APPROVAL_REJECTED,
        decision=Decision.APPROVED if approve else Decision.REJECTED,
        reason=reason[:200] or ("approved" if approve else "rejected"),
        actor_kind="user",
        actor_user_id=decider.pk,
        arguments=approval.arguments,
        latency_ms=latency,
    )


def _expire(approval: ApprovalRequest, now: datetime) -> None:
    approval.status = ApprovalStatus.EXPIRED
    approval.decided_at = now
    approval.save(update_fields=["status", "decided_at"])
    _approval_record(
        approval,
        AuditEventType.APPROVAL_EXPIRED,
        decision=Decision.REJECTED,
        reason="expired",
        arguments=approval.arguments,
    )
    if approval.tool_call_id is not None:
        # Its call ends rejected in this transaction (chat follows the signal).
        approvals_cancelled.send(
            sender=ApprovalRequest,
            tool_call_ids=[approval.tool_call_id],
            code="approval_expired",
            message="Nobody approved this call in time; it did not run.",
        )


def approval_expire_due(*, thread_id: int | None = None) -> list[ApprovalRequest]:
    """Expire overdue approvals — the thread's, or every thread's (the beat sweep) —
    audited; their calls end rejected in the same transaction."""
    expired = []
    now = timezone.now()
    due = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING, expires_at__lte=now)
    if thread_id is not None:
        due = due.filter(thread_id=thread_id)
    with transaction.atomic():
        for approval in due.select_for_update(of=("self",)).select_related("binding"):
            _expire(approval, now)
            expired.append(approval)
    return expired


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
        **_actor_fields(actor, ""),
        **_binding_fields(binding),
        thread_id=thread_id or binding.thread_id,
        action="view_permission",
        reason=reason,
        extra=extra,
    )


# ---------------------------------------------------------------------------- catalogues


async def thread_catalogues_ensure(*, thread: Any) -> None:
    """Have the catalogue of every server bound to the thread loaded (asked of a server
    that was never listed; stored by ``mcp_bridge``'s catalogue service)."""
    for binding in await database_sync_to_async(bindings_for_thread)(thread):
        await gateway.ensure_catalogue(binding.server)
