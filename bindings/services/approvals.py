"""Approval requests: asking a member's consent to run one call with exactly its arguments;
joining a repeated question, capping pending ones, deciding (and remembering the consent as
an allowance), expiring. Every step is audited."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from audit.types import AuditEventType, Decision
from audit.writer import digest_arguments, record
from bindings import policy
from bindings.models import Allowance, AppBinding, ApprovalRequest, ApprovalStatus
from bindings.ratelimit import refusal_gate
from bindings.selectors import binding_snap, policy_snap, signs_in_members, tool_snap
from bindings.services._common import actor_fields
from bindings.services.allowances import allowance_event_record, allowances_announce
from bindings.services.errors import BindingError
from bindings.signals import approvals_cancelled
from mcp_bridge.models import Tool


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
        approval_event_record(
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
    approval_event_record(
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


# ``remember`` values: a scope, or "app" — "Allow <app> in this thread", every tool of the
# app that only its views can call (``policy.APP_TOOLS``; offered on a view's request).
APP = "app"
REMEMBER_CHOICES = frozenset({*(scope.value for scope in policy.Scope), APP})


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
    that scope from now on (an ``Allowance``, created in the same transaction and audited);
    ``"app"``: allow all the app's app-only tools in this thread (``APP``).
    Who may remember what is ``policy.grantable_scopes``; a refusal is audited and leaves
    the request pending, so the person can still approve it once.
    """
    if remember and (not approve or remember not in REMEMBER_CHOICES):
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


def approval_event_record(
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
        approval_event_record(
            approval,
            AuditEventType.APPROVAL_DECISION_REFUSED,
            decision=Decision.DENIED,
            reason=code,
            **actor_fields(decider, "user"),
            extra={"role": role or "", **({"message": message} if reason else {}), **gate},
        )
    return BindingError("forbidden" if reason is None else code, message)


def approval_offers(approval: ApprovalRequest, *, role: str | None) -> tuple[str, ...]:
    """The scopes at which ``role`` may remember consent when deciding ``approval``
    (empty: *Approve once* only). Reads the tool's catalogue row and policy afresh."""
    binding = approval.binding
    tool = Tool.objects.filter(server_id=approval.server_id, name=approval.tool_name).first()
    snap = tool_snap(tool, approval.server_id, approval.tool_name)
    scopes = policy.grantable_scopes(
        tool=snap,
        policy=policy_snap(binding, approval.tool_name),
        binding=binding_snap(binding),
        role=role,
    )
    offers = tuple(str(scope) for scope in scopes)
    if (
        policy.Scope.THREAD in scopes
        and approval.requested_by_kind == policy.ActorKind.APP_VIEW
        and policy.is_app_only(snap)
    ):
        # Only the app's views can call it: consent to the app, not tool by tool.
        offers += (APP,)
    return offers


def _create_allowance(
    approval: ApprovalRequest, *, scope: str, granter: Any, actor_label: str
) -> Allowance:
    """Remember the consent just given (the caller holds the approval's lock). An active
    allowance of the same tool at the same scope is reused, not duplicated. ``APP``: the
    thread's allowance of the app's app-only tools (``policy.APP_TOOLS``)."""
    app = scope == APP
    tool_name = policy.APP_TOOLS if app else approval.tool_name
    thread_id = approval.thread_id if scope in (policy.Scope.THREAD, APP) else None
    workspace_id = approval.binding.workspace_id
    active = Allowance.objects.select_for_update().filter(
        binding_id=approval.binding_id,
        tool_name=tool_name,
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
        tool_name=tool_name,
        granted_by=granter,
        approval=approval,
    )
    allowance_event_record(
        allowance,
        AuditEventType.APP_ALLOWANCE_CREATED if app else AuditEventType.ALLOWANCE_CREATED,
        decision=Decision.ALLOWED,
        actor=granter,
        actor_label=actor_label,
        reason="allowed_app_in_thread" if app else f"allowed_in_{scope}",
        extra={"risk": approval.risk, **({"asked_for": approval.tool_name} if app else {})},
    )
    allowances_announce(allowance)
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
        approval_event_record(
            approval,
            AuditEventType.ALLOWANCE_REFUSED,
            decision=Decision.DENIED,
            reason=code,
            action="allowance",
            **actor_fields(decider, "user"),
            extra={"scope": scope, "role": role or "", **gate},
        )
    return BindingError(code, message)


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
        status=ApprovalStatus.PENDING,
        binding__workspace_id=approval.binding.workspace_id,
    ).exclude(pk=approval.pk)
    if scope == APP:
        # Every app-only tool of the app that its views asked for in this thread, that an
        # allowance can cover (not one its server declares destructive, nor one an admin
        # set to ask every time: policy.consults_allowance).
        covered = [
            tool.name
            for tool in Tool.objects.filter(server_id=approval.server_id, present=True)
            if policy.is_app_only(snap := tool_snap(tool, tool.server_id, tool.name))
            and policy.consults_allowance(snap, policy_snap(approval.binding, tool.name))
        ]
        pending = pending.filter(
            tool_name__in=covered,
            thread_id=approval.thread_id,
            requested_by_kind=policy.ActorKind.APP_VIEW,
        )
    else:
        pending = pending.filter(tool_name=approval.tool_name)
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
    approval_event_record(
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
    approval_event_record(
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
