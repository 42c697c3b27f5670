"""Step 1 of a call: decide it (bindings policy, audited) and record it, in one transaction.

``call_decide`` is the step; ``view_call_admit`` first turns an app view's ``tools/call``
into a request (its member and view admitted, its input validated), in the same trip to
the database thread. Then ``chat.calls.run`` runs an allowed call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from audit.types import AuditEventType, Decision
from audit.writer import record
from bindings.models import ApprovalRequest
from bindings.selectors import AuthorityRows, authority_reads
from bindings.services.approvals import (
    approval_create,
    approval_join_pending,
    approval_limit_refusal,
)
from bindings.services.authorize import (
    ACTOR_LABELS,
    Authorization,
    Requester,
    ToolCallAuthorization,
    ViewActionRequest,
    tool_call_authorize,
    view_action_authorize,
)
from bindings.services.errors import BindingError
from chat.calls.admission import JSONRPC_INVALID_PARAMS, ViewRefused, view_admit
from chat.calls.emit import call_emit
from chat.calls.requests import (
    ACTION_FOR_ORIGIN,
    CallRequest,
    KnownApproval,
    ToolCallRefused,
    ViewCallRequest,
)
from chat.models import ToolCall, ToolCallStatus
from chat.selectors import tool_calls_queryset
from chat.services.refusals import request_record_refused
from chat.services.turn_lease import check_fence
from lean_rows import insert_row, write_together
from mcp_bridge.errors import InvalidArguments
from mcp_bridge.models import Tool, UiResource
from mcp_bridge.schema import SchemaRefused, validate_arguments, validates_inline


@dataclass(frozen=True)
class Decided:
    """A recorded decision: the call row (relations loaded), the outcome (allow, ask,
    deny, cancelled), the catalogue row it was decided with and the call's approval
    request (handed to the run, whose events are built from memory too)."""

    call: ToolCall
    outcome: str
    tool: Tool | None
    approval: KnownApproval | None = None


DECIDE_FIELDS = [
    "binding",
    "arguments",
    "status",
    "requested_by",
    "started_at",
    "error",
    "ui_resource",
    "provider_call_id",
]


def tool_call_decide(*, request: CallRequest) -> tuple[ToolCall, str]:
    """Decide the call and record it, in one transaction. Returns (call, outcome)."""
    decided = call_decide(request=request)
    assert decided is not None
    return decided.call, decided.outcome


def view_call_admit(request: ViewCallRequest) -> tuple[CallRequest, AuthorityRows]:
    """An app view's ``tools/call`` as a call request: the member's session and membership
    and the view's token first (``view_admit``), then its input, then whether this member
    may act at all — each refusal audited, nothing recorded. On the database thread, in
    the decision's own trip. The call's authority (``authority_reads``) is read in the
    admission's statement and returned with the request, for ``call_decide``."""
    name, arguments, kind = request.tool_name, request.arguments, request.action_kind
    claims = request.admission.claims
    authority_parts = (
        authority_reads(thread=request.admission.thread, server_id=claims.server_id, tool_name=name)
        if claims is not None and isinstance(name, str)
        else ()
    )
    admitted = view_admit(request.admission, also=authority_parts)
    admission, view = request.admission, admitted.view
    if not isinstance(name, str) or not isinstance(arguments, dict):
        message = "tools/call needs a tool name and object arguments."
        request_record_refused(
            action_kind=kind,
            actor_kind="app_view",
            user=admission.user,
            thread=admission.thread,
            server_id=view.server_id,
            binding_id=view.binding_id,
            reason="invalid_params",
            extra={"view": view.pk, "message": message},
        )
        raise ViewRefused("invalid_params", message, JSONRPC_INVALID_PARAMS, audited=True)
    role = admitted.membership.role
    if not admitted.membership.can_act:
        # Decided (and audited) before anything else: a viewer's view neither refreshes
        # the catalogue nor stores or broadcasts a refused call.
        auth = view_action_authorize(
            ViewActionRequest(
                requester=Requester("app_view", admission.user, role, admission.thread),
                action_kind=kind,
                view=view,
                tool_name=name,
                extra={"refused_before_call": True},
            )
        )
        raise ViewRefused(str(auth.decision.reason_code), auth.decision.message, audited=True)
    call = CallRequest(
        thread=admission.thread,
        server=view.server,
        tool_name=name,
        arguments=arguments,
        origin="app_view",
        user=admission.user,
        role=role,
        parent_view=view,
        action_kind=kind,
    )
    bindings, rules, tools = admitted.also
    return call, (bindings, rules, tools)


def call_decide(
    *,
    request: CallRequest,
    refresh_missing: bool = False,
    quiet_start: bool = False,
    authority: AuthorityRows | None = None,
) -> Decided | None:
    """Decide the call (the binding, the tool's policy and catalogue row and any allowance
    read fresh by the authority), audit the decision, record the call and its approval
    request, and emit it — one transaction.

    With ``refresh_missing``, a tool absent from the catalogue returns None before
    anything is written (the caller refreshes the catalogue once and decides again). With
    ``quiet_start``, an allowed call is recorded (and its decision audited) without its
    "running" event: the run announces it only if it still runs after a moment. A view
    past the caps on pending approvals raises ``ToolCallRefused`` (audited, nothing
    recorded). ``authority``: the authority's rows, read in this trip with the view's
    admission (``view_call_admit``); otherwise they are read here."""
    decided = _decide_atomic(
        request=request,
        refresh_missing=refresh_missing,
        quiet_start=quiet_start,
        authority=authority,
    )
    if isinstance(decided, BindingError):
        raise ToolCallRefused(decided.code, decided.message)
    return decided


def _decide_atomic(
    *,
    request: CallRequest,
    refresh_missing: bool,
    quiet_start: bool,
    authority: AuthorityRows | None,
) -> Decided | BindingError | None:
    authorized: Authorization | None = None
    if quiet_start and request.streamed_call_id is None:
        # A view's call: decided first; allowed, it writes only its audit row and its call
        # row (no event yet), together — on PostgreSQL one statement, no transaction.
        check_fence()
        authorized = _authorize(request, refresh_missing, authority, write_audit=False)
        if authorized is None:
            return None  # not in the catalogue: nothing decided, nothing written
        if authorized.decision.allowed:
            call = _call_row(request, authorized, ToolCallStatus.RUNNING, None)
            write_together(inserts=[authorized.audit, call])
            return Decided(
                call, str(authorized.decision.outcome), authorized.tool, KnownApproval(None)
            )
    with transaction.atomic():
        check_fence()  # a model turn that lost its lease starts no call (chat.turn_lease)
        streamed = _streamed_row(request)
        if request.streamed_call_id is not None and streamed is None:
            # Cancelled while its arguments streamed: it stays cancelled, nothing runs.
            ended = tool_calls_queryset().get(pk=request.streamed_call_id)
            return Decided(ended, "cancelled", None)
        if authorized is not None:
            insert_row(authorized.audit)  # decided above: its audit row, first, as ever
            auth = authorized
        else:
            found = _authorize(request, refresh_missing, authority, write_audit=True)
            if found is None:
                return None  # not in the catalogue: nothing decided, nothing written
            auth = found
        tool = auth.tool
        decision = auth.decision
        invalid = _arguments_refusal(request, tool) if decision.needs_approval else None
        if invalid is not None:
            # Checked before anyone is asked (docs/view-bridge.md §4c): a call whose
            # arguments its server would refuse gets no approval card.
            return _refused_before_approval(request, auth, invalid, streamed)
        if decision.needs_approval and request.parent_view is not None:
            asked = _ask_once(request, auth)
            if isinstance(asked, ToolCall):
                return Decided(asked, str(decision.outcome), tool)  # waits: never run here
            if asked is not None:
                return asked  # returned, not raised: the refusal's audit row commits
        if decision.allowed:
            status = ToolCallStatus.RUNNING
        elif decision.needs_approval:
            status = ToolCallStatus.AWAITING_APPROVAL
        else:
            status = ToolCallStatus.REJECTED
        call = _call_row(request, auth, status, streamed)
        if streamed is not None:
            # The same row (and view) the members already see, now decided.
            call.pk = streamed.pk
            call.created_at = streamed.created_at
            call.save(update_fields=DECIDE_FIELDS)
        else:
            insert_row(call)  # lean: on the path of every app view's tools/call
        approval: ApprovalRequest | None = None
        if decision.needs_approval:
            assert auth.binding is not None  # the policy asks only under a binding
            approval = approval_create(
                thread=request.thread,
                binding=auth.binding,
                tool_call=call,
                server_id=request.server.pk,
                tool_name=request.tool_name,
                arguments=request.arguments,
                risk=str(decision.risk),
                risk_source=str(decision.risk_source or ""),
                requested_by_kind=request.origin,
                requested_by=request.user,
                view_id=getattr(request.parent_view, "pk", None),
            )
        known = KnownApproval(approval)
        if not (quiet_start and decision.allowed):
            call_emit(call, approval=known)
    return Decided(call, str(decision.outcome), tool, known)


def _authorize(
    request: CallRequest,
    refresh_missing: bool,
    authority: AuthorityRows | None,
    *,
    write_audit: bool,
) -> Authorization | None:
    return tool_call_authorize(
        ToolCallAuthorization(
            requester=Requester(request.origin, request.user, request.role, request.thread),
            action_kind=request.action_kind or ACTION_FOR_ORIGIN[request.origin],
            server=request.server,
            tool_name=request.tool_name,
            arguments=request.arguments,
            view=request.parent_view,
            # A view's server row is read fresh with each of its requests.
            server_read_now=request.origin == "app_view",
            authority_rows=authority,
        ),
        skip_unknown_tool=refresh_missing,
        write_audit=write_audit,
    )


def _call_row(
    request: CallRequest,
    auth: Authorization,
    status: str,
    streamed: ToolCall | None,
    *,
    error: dict[str, Any] | None = None,
) -> ToolCall:
    """The call as decided (not yet written); ``error``: why it was refused, when not the
    decision's own reason."""
    decision = auth.decision
    if error is None and status == ToolCallStatus.REJECTED:
        error = {"code": str(decision.reason_code), "message": decision.message}
    return ToolCall(
        thread=request.thread,
        message=request.message,
        server=request.server,
        binding=auth.binding,
        tool_name=request.tool_name,
        arguments=request.arguments,
        status=status,
        origin=request.origin,
        requested_by=request.user,
        parent_view=request.parent_view,
        provider_call_id=request.provider_call_id[:200],
        started_at=timezone.now() if decision.allowed else None,
        error=error,
        ui_resource=_start_resource(request, auth.tool, streamed),
    )


def _arguments_refusal(request: CallRequest, tool: Tool | None) -> InvalidArguments | None:
    """The arguments checked as the run would check them, before an approval is asked —
    with the host's tolerance (``mcp_bridge.schema``: what the server coerces passes).
    Only a schema cheap enough to check here (``inline_check_values``, a few ms at worst:
    invariant 13); any other is checked by the worker pool when the call runs."""
    if tool is None:
        return None
    if tool.schema_refusal:
        return SchemaRefused(tool.schema_refusal, tool=tool.name)
    try:
        text = json.dumps(request.arguments, default=str)
    except (TypeError, ValueError, RecursionError):
        return None  # the run refuses it with its own message
    if not validates_inline(text, tool.inline_check_values):
        return None
    try:
        validate_arguments(request.arguments, tool.input_schema or None, tool=tool.name)
    except InvalidArguments as exc:
        return exc
    return None


def _refused_before_approval(
    request: CallRequest, auth: Authorization, invalid: InvalidArguments, streamed: ToolCall | None
) -> Decided:
    """The call recorded as rejected with the arguments' problems, the refusal audited;
    no approval request, no card."""
    record(
        event_type=AuditEventType.CALL_ARGUMENTS_REFUSED,
        decision=Decision.DENIED,
        actor_kind=request.origin,
        actor_user_id=getattr(request.user, "pk", None),
        actor_label=ACTOR_LABELS.get(request.origin, request.origin),
        workspace_id=request.thread.workspace_id,
        thread_id=request.thread.pk,
        binding_id=getattr(auth.binding, "pk", None),
        server_id=request.server.pk,
        tool_name=request.tool_name,
        action=str(request.action_kind or ACTION_FOR_ORIGIN[request.origin]),
        reason=invalid.code,
        arguments=request.arguments,
        extra={"problems": invalid.problems, "view": getattr(request.parent_view, "pk", None)},
    )
    call = _call_row(
        request,
        auth,
        ToolCallStatus.REJECTED,
        streamed,
        error={"code": invalid.code, "message": invalid.user_message},
    )
    if streamed is not None:
        call.pk = streamed.pk
        call.created_at = streamed.created_at
        call.save(update_fields=DECIDE_FIELDS)
    else:
        insert_row(call)
    known = KnownApproval(None)
    call_emit(call, approval=known)
    return Decided(call, "deny", auth.tool, known)


def _ask_once(request: CallRequest, auth: Authorization) -> ToolCall | BindingError | None:
    """One card per question (docs/consent.md): a view asking again what it already asks
    joins that request — its call, which this request then waits on — and a view past
    the caps on pending approvals is refused (audited). None: ask anew. In the caller's
    transaction, holding the view's row, so one view's requests are taken one at a time."""
    view = request.parent_view
    assert view is not None and auth.binding is not None
    ToolCall.objects.select_for_update().filter(pk=view.pk).values_list("pk").first()
    joined = approval_join_pending(
        thread=request.thread,
        view_id=view.pk,
        requested_by=request.user,
        tool_name=request.tool_name,
        arguments=request.arguments,
    )
    if joined is not None and joined.tool_call_id is not None:
        call = tool_calls_queryset().get(pk=joined.tool_call_id)
        call_emit(call, approval=KnownApproval(joined))  # the card says how often it was asked
        return call
    return approval_limit_refusal(
        thread=request.thread,
        binding=auth.binding,
        view_id=view.pk,
        requested_by=request.user,
        server_id=request.server.pk,
        tool_name=request.tool_name,
        arguments=request.arguments,
    )


def _streamed_row(request: CallRequest) -> ToolCall | None:
    """The row opened for this call while its arguments streamed, if it is still open."""
    if request.streamed_call_id is None:
        return None
    return (
        ToolCall.objects.select_for_update()
        .filter(pk=request.streamed_call_id, status=ToolCallStatus.STREAMING)
        .only("pk", "created_at", "ui_resource")
        .first()
    )


def _start_resource(
    request: CallRequest, tool: Tool | None, streamed: ToolCall | None
) -> UiResource | None:
    """The view a call shows from its start: the catalogue's `_meta.ui.resourceUri`, in
    its latest stored version. A view's own calls answer that view and get none."""
    if streamed is not None and streamed.ui_resource_id is not None:
        return streamed.ui_resource
    if request.origin == "app_view" or tool is None or not tool.resource_uri:
        return None
    return (
        UiResource.objects.filter(server_id=request.server.pk, uri=tool.resource_uri)
        .order_by("-fetched_at", "-pk")
        .first()
    )
