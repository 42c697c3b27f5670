"""The decision of every action, one small typed request per family of actions.

- ``ToolCallAuthorization`` → ``tool_call_authorize``: a tool call (a person's, the
  model's, a view's); the binding, the tool's policy and catalogue row and any allowance
  that could cover it are read here, fresh, with the decision (``call_authority``).
- ``ApprovalReplay`` → ``approval_replay_authorize``: an approved call decided again just
  before it runs (a binding disabled meanwhile still wins).
- ``ViewActionRequest`` → ``view_action_authorize``: any other request of an app view
  (open a link, change display mode, download, post a message, read a resource...).
- ``ViewOpening`` → ``view_open_authorize``: a member opening a call's view.

Each builds frozen snapshots, asks the pure policy engine (``bindings.policy_engine.decide``)
and writes the decision's audit row — or, for a tool call whose caller writes it with its
own rows in one statement (``write_audit=False``), hands it over unwritten
(``Authorization.audit``). Callers act only on ``decision.allowed``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from audit.models import AuditEvent
from audit.writer import audit_row, record
from bindings import policy, policy_engine
from bindings.models import Allowance, AppBinding
from bindings.selectors import (
    AuthorityRows,
    active_allowance,
    allowance_snap,
    binding_for,
    binding_snap,
    call_authority,
    policy_snap,
    signs_in_members,
    tool_snap,
)
from mcp_bridge.models import McpServer, Tool


@dataclass
class Authorization:
    decision: policy.PolicyDecision
    binding: AppBinding | None
    # The decision's audit row: written, or (``write_audit=False``) for the caller to write
    # in the same transaction or statement as the change it decided.
    audit: AuditEvent
    # A tool call's catalogue row, as it was decided with (None: not in the catalogue).
    tool: Tool | None = None

    @property
    def audit_id(self) -> int | None:
        return self.audit.pk

    @property
    def allowed(self) -> bool:
        return self.decision.allowed


ACTOR_LABELS = {"user": "user", "model": "model", "app_view": "app view"}


@dataclass(frozen=True)
class Requester:
    """Who asks — ``actor_kind`` user, model or app_view — for which person (with their
    role in the workspace) and in which thread."""

    actor_kind: str
    user: Any
    role: str | None
    thread: Any


@dataclass(frozen=True)
class ToolCallAuthorization:
    """A tool call to decide. ``server``: its row as the caller holds it;
    ``server_read_now``: that row was read with this request (a view's), so its enabled
    flag decides and is not read again; ``authority_rows``: likewise the rows of
    ``authority_reads``, read in the same statement as the view's admission."""

    requester: Requester
    action_kind: policy.ActionKind
    server: McpServer
    tool_name: str
    arguments: dict[str, Any]
    view: Any = None  # the view (its ToolCall) whose call this is
    server_read_now: bool = False
    authority_rows: AuthorityRows | None = None


@dataclass(frozen=True)
class ApprovalReplay:
    """An approved call decided again before it runs, with exactly the approved
    arguments; ``approved_by_id``: whose approval (a personal grant needs its owner's).
    ``server``: read just now."""

    requester: Requester
    action_kind: policy.ActionKind
    server: McpServer
    tool_name: str
    arguments: dict[str, Any]
    view: Any
    approved_by_id: int | None
    approval_id: int


@dataclass(frozen=True)
class ViewActionRequest:
    """A request of an app view (``view``: its ToolCall, its server row read with this
    request) other than a tool call; the fields its action kind needs."""

    requester: Requester
    action_kind: policy.ActionKind
    view: Any
    tool_name: str | None = None
    url: str | None = None
    display_mode: str | None = None
    available_display_modes: tuple[str, ...] | None = None
    recent_ui_messages: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ViewOpening:
    """A member opening the view of a call (a read of its UI resource)."""

    requester: Requester
    server_id: int
    view_id: int
    uri: str


def tool_call_authorize(
    request: ToolCallAuthorization, *, skip_unknown_tool: bool = False, write_audit: bool = True
) -> Authorization | None:
    """Decide a tool call and audit the decision. Its binding, policy row, catalogue row
    and allowance are read fresh here, in lean statements (``call_authority``).
    ``skip_unknown_tool``: a tool the catalogue does not know returns None, decided and
    written nothing (the caller refreshes the catalogue and asks again). ``write_audit``
    False: the audit row is returned unwritten (``Authorization.audit``); the caller must
    write it with the change it records, whatever the decision."""
    asker = request.requester
    per_member = signs_in_members(request.server)
    found = call_authority(
        thread=asker.thread,
        server_id=request.server.pk,
        tool_name=request.tool_name,
        actor_kind=asker.actor_kind,
        # A call spending a member's own sign-in: only an allowance they granted counts.
        grant_owner_id=policy.grant_owner(
            per_member_grants=per_member,
            requested_by_kind=asker.actor_kind,
            requester_id=getattr(asker.user, "pk", None),
        ),
        rows=request.authority_rows,
    )
    if found.tool is None and skip_unknown_tool:
        return None
    auth = _decide(
        asker,
        action_kind=request.action_kind,
        server_id=request.server.pk,
        binding=found.binding,
        rule=found.policy,
        allowance=found.allowance,
        tool=found.tool,
        tool_name=request.tool_name,
        arguments=request.arguments,
        view=request.view,
        server_enabled=request.server.enabled if request.server_read_now else None,
        per_member_grants=per_member,
        write_audit=write_audit,
    )
    auth.tool = found.tool
    return auth


def approval_replay_authorize(request: ApprovalReplay) -> Authorization:
    """Decide an approved call again, as approved, and audit it (its catalogue row, binding,
    policy and allowance read now)."""
    asker = request.requester
    tool = Tool.objects.filter(server=request.server, name=request.tool_name).first()
    binding = binding_for(thread=asker.thread, server_id=request.server.pk)
    return _decide(
        asker,
        action_kind=request.action_kind,
        server_id=request.server.pk,
        binding=binding,
        rule=policy_snap(binding, request.tool_name),
        allowance=_allowance(binding, asker.thread, request.tool_name),
        tool=tool,
        tool_name=request.tool_name,
        arguments=request.arguments,
        view=request.view,
        approved=True,
        approved_by=request.approved_by_id,
        server_enabled=request.server.enabled,  # just read: a disabled server runs nothing
        per_member_grants=signs_in_members(request.server),
        extra={"approval_id": request.approval_id},
    )


def view_action_authorize(request: ViewActionRequest) -> Authorization:
    """Decide (and audit) one request of an app view, as the person it runs for."""
    asker, view = request.requester, request.view
    binding = binding_for(thread=asker.thread, server_id=view.server_id)
    return _decide(
        asker,
        action_kind=request.action_kind,
        server_id=view.server_id,
        binding=binding,
        rule=policy_snap(binding, request.tool_name),
        allowance=_allowance(binding, asker.thread, request.tool_name),
        tool=None,
        tool_name=request.tool_name,
        url=request.url,
        display_mode=request.display_mode,
        available_display_modes=request.available_display_modes,
        recent_ui_messages=request.recent_ui_messages,
        view=view,
        server_enabled=view.server.enabled,  # read with this request
        extra=request.extra,
    )


def view_open_authorize(request: ViewOpening) -> Authorization:
    """Decide (and audit) a member's opening of a call's view."""
    asker = request.requester
    binding = binding_for(thread=asker.thread, server_id=request.server_id)
    return _decide(
        asker,
        action_kind=policy.ActionKind.RESOURCE_READ,
        server_id=request.server_id,
        binding=binding,
        rule=None,
        allowance=None,
        tool=None,
        tool_name=None,
        extra={"view": request.view_id, "uri": request.uri, "opened": True},
    )


def _allowance(binding: AppBinding | None, thread: Any, tool_name: str | None) -> Allowance | None:
    if binding is None or not tool_name:
        return None
    return active_allowance(binding_id=binding.pk, thread=thread, tool_name=tool_name)


def _decide(
    asker: Requester,
    *,
    action_kind: policy.ActionKind,
    server_id: int,
    binding: AppBinding | None,
    rule: policy.PolicySnap | None,
    allowance: Allowance | None,
    tool: Tool | None,
    tool_name: str | None,
    arguments: dict[str, Any] | None = None,
    url: str | None = None,
    display_mode: str | None = None,
    available_display_modes: tuple[str, ...] | None = None,
    recent_ui_messages: int = 0,
    view: Any = None,
    approved: bool = False,
    approved_by: int | None = None,
    server_enabled: bool | None = None,
    per_member_grants: bool | None = None,
    extra: dict[str, Any] | None = None,
    write_audit: bool = True,
) -> Authorization:
    """The policy engine's decision on what the request's function read, and its audit
    row. ``server_enabled`` (with ``per_member_grants``): the server's flags when the
    request read its row just now; otherwise they are read with the binding's snapshot."""
    actor_kind = asker.actor_kind
    view_ref = None
    if view is not None:
        view_ref = policy.ViewRef(
            tool_call_id=view.pk,
            server_id=view.server_id,
            binding_id=view.binding_id if view.binding_id is not None else -1,
            thread_id=view.thread_id,
        )
    thread = asker.thread
    decision = policy_engine.decide(
        actor=policy.Actor(
            kind=policy.ActorKind(actor_kind),
            user_id=getattr(asker.user, "pk", None),
            role=policy.Role(asker.role) if asker.role else None,
            view=view_ref,
        ),
        thread=policy.ThreadRef(id=thread.pk, workspace_id=thread.workspace_id),
        binding=binding_snap(
            binding, server_enabled=server_enabled, per_member_grants=per_member_grants
        ),
        tool=tool_snap(tool, server_id, tool_name) if tool_name else None,
        policy=rule,
        action=policy.Action(
            kind=policy.ActionKind(action_kind),
            server_id=server_id,
            tool_name=tool_name,
            arguments=arguments,
            url=url,
            display_mode=display_mode,
            requested_at=timezone.now(),
            approved=approved,
            approved_by=approved_by,
            recent_ui_messages=recent_ui_messages,
            available_display_modes=available_display_modes,
        ),
        allowance=allowance_snap(allowance),
    )
    used = allowance if decision.reason_code is policy.Reason.ALLOWANCE else None
    event = (record if write_audit else audit_row)(
        event_type=decision.audit_event_type,
        decision=decision.audit_decision,
        actor_kind=actor_kind,
        actor_user_id=getattr(asker.user, "pk", None),
        actor_label=ACTOR_LABELS.get(actor_kind, actor_kind),
        workspace_id=thread.workspace_id,
        thread_id=thread.pk,
        binding_id=getattr(binding, "pk", None),
        server_id=server_id,
        tool_name=tool_name or "",
        action=str(action_kind),
        reason=str(decision.reason_code),
        arguments=arguments,
        extra={
            **({"url": url[:500]} if url else {}),
            **({"view": view.pk} if view is not None else {}),
            **({"risk": str(decision.risk)} if decision.risk else {}),
            # Using an allowance: which consent this call ran on (its grant is audited).
            **(
                {"allowance_id": used.pk, "allowance_scope": used.scope} if used is not None else {}
            ),
            **(extra or {}),
        },
    )
    return Authorization(decision=decision, binding=binding, audit=event)
