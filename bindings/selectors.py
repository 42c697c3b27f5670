"""Reads for authority: which tools a thread offers, and to whom."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, overload

from django.db.models import Q

from lean_rows import OrNull, Part, Same, select_rows, select_together
from mcp_bridge.models import AuthMode, McpServer, Tool

from . import policy, policy_engine
from .models import Allowance, AppBinding, ToolPolicy


@dataclass
class OfferedTool:
    tool: Tool
    binding: AppBinding
    risk: str
    approval: str | None
    visibility: frozenset[str]

    def to_dict(self) -> dict[str, Any]:
        server = self.tool.server
        return {
            "server": {"slug": server.slug, "name": server.name},
            "name": self.tool.name,
            "title": self.tool.title,
            "description": self.tool.description[:500],
            "inputSchema": self.tool.input_schema,
            "hasUi": bool(self.tool.resource_uri),
            "risk": self.risk,
            "approval": self.approval,
        }


def policy_snap_of(row: ToolPolicy | None) -> policy.PolicySnap | None:
    if row is None:
        return None
    return policy.PolicySnap(
        risk=policy.Risk(row.risk) if row.risk else None,
        approval=policy.Approval(row.approval) if row.approval else None,
        visibility_override=(
            frozenset(row.visibility_override) if row.visibility_override is not None else None
        ),
    )


# ------------------------------------------------------------------- binding precedence


def applicable_bindings(rows: Iterable[AppBinding]) -> dict[int, AppBinding]:
    """Per server, the binding that applies to a thread, from its thread's and its
    workspace's bindings: the thread's own beats the workspace's. The one place this rule
    lives — decided here, not by how the database sorts NULLs (SQLite and PostgreSQL
    differ)."""
    chosen: dict[int, AppBinding] = {}
    for row in rows:
        current = chosen.get(row.server_id)
        if current is None or (current.thread_id is None and row.thread_id is not None):
            chosen[row.server_id] = row
    return chosen


def _binding_read(*, thread: Any, server_id: int) -> Part:
    """A server's bindings for a thread: its own and its workspace's."""
    return Part(
        AppBinding,
        server_id=server_id,
        workspace_id=thread.workspace_id,
        thread_id=OrNull(thread.pk),
    )


def binding_for(*, thread: Any, server_id: int) -> AppBinding | None:
    """The binding of a server that applies to a thread (one lean statement, read fresh)."""
    (rows,) = select_together(_binding_read(thread=thread, server_id=server_id))
    return applicable_bindings(rows).get(server_id)


# ---------------------------------------------------------------------------- snapshots


@overload
def binding_snap(
    binding: AppBinding,
    *,
    server_enabled: bool | None = None,
    per_member_grants: bool | None = None,
) -> policy.BindingSnap: ...
@overload
def binding_snap(
    binding: AppBinding | None,
    *,
    server_enabled: bool | None = None,
    per_member_grants: bool | None = None,
) -> policy.BindingSnap | None: ...
def binding_snap(
    binding: AppBinding | None,
    *,
    server_enabled: bool | None = None,
    per_member_grants: bool | None = None,
) -> policy.BindingSnap | None:
    """`server_enabled`: the bound server's flag, when the caller has just read the server
    (else it is read here: a disabled server must decide the very next action), with
    `per_member_grants` (its auth mode is OAuth per member; read with the flag when the
    caller passes neither; a caller deciding a tool call that passes the flag passes this
    too)."""
    if binding is None:
        return None
    if server_enabled is None:
        server_enabled, per_member = _server_flags(binding)
        if per_member_grants is None:
            per_member_grants = per_member
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
        scope=policy.Scope(binding.scope),
        workspace_id=binding.workspace_id,
        thread_id=binding.thread_id,
        enabled=binding.enabled,
        enabled_tools=frozenset(binding.enabled_tools) if binding.enabled_tools else None,
        allowed_link_schemes=frozenset(binding.allowed_link_schemes or ()),
        deep_link_protocol=binding.deep_link_protocol or None,
        ui_message_rate_limit=binding.ui_message_rate_limit,
        granted_permissions=frozenset(binding.granted_permissions or ()),
        allowed_domains=frozenset(flat),
        server_enabled=server_enabled,
        per_member_grants=bool(per_member_grants),
    )


def signs_in_members(server: McpServer) -> bool:
    """Whether each member signs in to ``server`` with their own account (OAuth per
    member): a call then spends the grant of the person it runs for."""
    return server.auth_mode == AuthMode.OAUTH_MEMBER


def _server_flags(binding: AppBinding) -> tuple[bool, bool]:
    """The bound server's enabled flag and whether it signs each member in (one read)."""
    if AppBinding.server.is_cached(binding):
        server = binding.server
        return bool(server.enabled), server.auth_mode == AuthMode.OAUTH_MEMBER
    row = McpServer.objects.filter(pk=binding.server_id).values_list("enabled", "auth_mode")
    found = row.first()
    if found is None:
        return False, False
    return bool(found[0]), found[1] == AuthMode.OAUTH_MEMBER


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
        risk=policy.Risk(row.risk) if row.risk else None,
        approval=policy.Approval(row.approval) if row.approval else None,
        visibility_override=(
            frozenset(row.visibility_override) if row.visibility_override is not None else None
        ),
    )


def allowance_snap(row: Allowance | None) -> policy.AllowanceSnap | None:
    if row is None:
        return None
    return policy.AllowanceSnap(
        id=row.pk,
        binding_id=row.binding_id,
        tool_name=row.tool_name,
        scope=policy.Scope(row.scope),
        workspace_id=row.workspace_id,
        thread_id=row.thread_id,
        granted_by_id=row.granted_by_id,
    )


def active_allowance(
    *, binding_id: int, thread: Any, tool_name: str, granted_by_id: Any = None
) -> Allowance | None:
    """The unrevoked allowance of a tool under a binding that applies to a thread (the
    thread's own before the workspace's), read fresh: one lean statement, never cached, so
    a revocation by any process decides the very next call. ``granted_by_id``: only one
    that member granted (a call spending their own sign-in, ``policy.grant_owner``)."""
    owner = {} if granted_by_id is None else {"granted_by_id": granted_by_id}
    rows = select_rows(
        Allowance,
        binding_id=binding_id,
        tool_name=tool_name,
        revoked_at=None,
        workspace_id=thread.workspace_id,
        thread_id=OrNull(thread.pk),
        **owner,
    )
    rows.sort(key=lambda row: (row.thread_id is None, row.pk))
    return rows[0] if rows else None


def app_tools_allowance(
    binding_id: int, thread: Any, tool: Tool, granted_by_id: Any = None
) -> Allowance | None:
    """The thread's "Allow <app> in this thread" (``policy.APP_TOOLS``), for a tool only
    the app's views can call; None for any other tool."""
    if not policy.is_app_only(tool_snap(tool, tool.server_id, tool.name)):
        return None
    found = active_allowance(
        binding_id=binding_id,
        thread=thread,
        tool_name=policy.APP_TOOLS,
        granted_by_id=granted_by_id,
    )
    return found if found is not None and found.thread_id == thread.pk else None


@dataclass(frozen=True)
class CallAuthority:
    """What deciding one tool call reads: the binding that applies, the tool's policy row
    under it, the tool's catalogue row and the allowance that covers it (None when
    absent)."""

    binding: AppBinding | None
    policy: policy.PolicySnap | None
    tool: Tool | None
    allowance: Allowance | None = None


# The rows ``authority_reads`` finds: the server's bindings for the thread, their policy
# rows for the tool, the tool's catalogue row.
AuthorityRows = tuple[list[AppBinding], list[ToolPolicy], list[Tool]]


def authority_reads(*, thread: Any, server_id: int, tool_name: str) -> tuple[Part, Part, Part]:
    """The lean reads of ``call_authority`` (the thread's and the workspace's binding, each
    one's policy for the tool, the catalogue row), to run with others in one statement
    (``lean_rows.select_together``; a view's call reads them with its admission)."""
    return (
        _binding_read(thread=thread, server_id=server_id),
        Part(ToolPolicy, binding_id=Same(AppBinding, "id"), tool_name=tool_name),
        Part(Tool, server_id=server_id, name=tool_name, present=True),
    )


def call_authority(
    *,
    thread: Any,
    server_id: int,
    tool_name: str,
    actor_kind: str = "",
    grant_owner_id: Any = None,
    rows: AuthorityRows | None = None,
) -> CallAuthority:
    """The rows ``tool_call_authorize()`` decides a tool call with, read fresh for every call.

    ``rows``: what ``authority_reads`` found, read in this same trip to the database with
    the request's other rows (a view's admission); otherwise they are read here. The
    allowance is read only when one could decide the call (``policy.consults_allowance``;
    never for a person's own call, which is its own consent); ``grant_owner_id``: the
    member whose own sign-in the call spends (``policy.grant_owner``), whose allowance only
    can cover it.

    Deliberately not cached: one lean statement (two when an allowance is read; see
    ``lean_rows.select_together``) costs less than checking a cache's freshness would, and a
    binding disabled, a policy changed, an allowance revoked or a tool removed — by any
    process, through the admin, a service or a plain ``QuerySet.update()`` — decides the
    very next call.
    """
    if rows is None:
        found = select_together(
            *authority_reads(thread=thread, server_id=server_id, tool_name=tool_name)
        )
        rows = (found[0], found[1], found[2])
    bindings, rules, tools = rows
    binding = applicable_bindings(bindings).get(server_id)
    rule = None
    if binding is not None and tool_name:
        own = [row for row in rules if row.binding_id == binding.pk]
        rule = policy_snap_of(own[0]) if own else None
    tool = tools[0] if tools else None
    allowance = None
    if (
        binding is not None
        and tool is not None
        and actor_kind != policy.ActorKind.USER
        and policy.consults_allowance(tool_snap(tool, server_id, tool_name), rule)
    ):
        allowance = active_allowance(
            binding_id=binding.pk,
            thread=thread,
            tool_name=tool_name,
            granted_by_id=grant_owner_id,
        )
        if allowance is None and actor_kind == policy.ActorKind.APP_VIEW:
            allowance = app_tools_allowance(binding.pk, thread, tool, grant_owner_id)
    return CallAuthority(binding=binding, policy=rule, tool=tool, allowance=allowance)


def bindings_for_thread(thread: Any) -> list[AppBinding]:
    """One enabled binding per enabled server: the one that applies to the thread."""
    rows = AppBinding.objects.filter(workspace_id=thread.workspace_id).filter(
        Q(thread_id=thread.pk) | Q(thread_id__isnull=True)
    )
    chosen = applicable_bindings(rows.select_related("server"))
    return [b for b in chosen.values() if b.enabled and b.server.enabled]


def offered_tools(*, thread: Any, role: str | None, audience: str = "model") -> list[OfferedTool]:
    """Tools a thread offers to the model (or to a person's /call): decided by the policy
    engine with the MODEL_TOOL_LIST action, so the list and the call agree."""
    offered: list[OfferedTool] = []
    bindings = bindings_for_thread(thread)
    if not bindings:
        return offered
    policies = {
        (p.binding_id, p.tool_name): p for p in ToolPolicy.objects.filter(binding__in=bindings)
    }
    # A tool whose input schema was refused when the catalogue was read cannot be called:
    # it is not offered either (the admin sees why on the tool's page).
    tools = Tool.objects.filter(
        server_id__in=[b.server_id for b in bindings], present=True, schema_refusal=""
    ).select_related("server")
    by_server = {b.server_id: b for b in bindings}
    thread_ref = policy.ThreadRef(id=thread.pk, workspace_id=thread.workspace_id)
    actor = policy.Actor(
        kind=policy.ActorKind.MODEL, user_id=None, role=policy.Role(role) if role else None
    )
    for tool in tools:
        binding = by_server[tool.server_id]
        row = policies.get((binding.pk, tool.name))
        policy_snap = policy_snap_of(row)
        tool_snap = policy.ToolSnap(
            server_id=tool.server_id,
            name=tool.name,
            visibility=frozenset(tool.visibility or ()),
            annotations=dict(tool.annotations or {}),
        )
        decision = policy_engine.decide(
            actor=actor,
            thread=thread_ref,
            binding=binding_snap(binding),
            tool=tool_snap,
            policy=policy_snap,
            action=policy.Action(
                kind=policy.ActionKind.MODEL_TOOL_LIST,
                server_id=tool.server_id,
                tool_name=tool.name,
            ),
        )
        if decision.outcome is policy.Outcome.DENY:
            continue
        offered.append(
            OfferedTool(
                tool=tool,
                binding=binding,
                risk=str(policy.effective_risk(tool_snap, policy_snap)),
                approval=(row.approval or None) if row else None,
                visibility=frozenset(str(v) for v in decision.visibility),
            )
        )
    return offered
