"""Reads for authority: which tools a thread offers, and to whom."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp_bridge.models import Tool

from . import policy
from .audit import select_rows
from .models import Allowance, AppBinding, ToolPolicy
from .services import active_allowance, binding_snap, tool_snap


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
        risk=row.risk or None,
        approval=row.approval or None,
        visibility_override=(
            frozenset(row.visibility_override) if row.visibility_override is not None else None
        ),
    )


@dataclass(frozen=True)
class CallAuthority:
    """What deciding one tool call reads: the binding that applies, the tool's policy row
    under it, the tool's catalogue row and the allowance that covers it (None when
    absent)."""

    binding: AppBinding | None
    policy: policy.PolicySnap | None
    tool: Tool | None
    allowance: Allowance | None = None


def call_authority(
    *, thread: Any, server_id: int, tool_name: str, actor_kind: str = ""
) -> CallAuthority:
    """The rows ``authorize()`` decides a tool call with, read fresh for every call.

    The allowance is read only when one could decide the call (``policy.consults_allowance``;
    never for a person's own call, which is its own consent).

    Deliberately not cached: three or four lean statements (~0.05 ms each, see
    ``bindings.audit.select_rows``) cost less than checking a cache's freshness would, and a
    binding disabled, a policy changed, an allowance revoked or a tool removed — by any
    process, through the admin, a service or a plain ``QuerySet.update()`` — decides the
    very next call.
    """
    binding = None
    for row in select_rows(
        AppBinding,
        "server_id = %s AND workspace_id = %s AND (thread_id = %s OR thread_id IS NULL)",
        [server_id, thread.workspace_id, thread.pk],
    ):
        if binding is None or row.thread_id is not None:
            binding = row  # a thread binding beats the workspace's (whatever NULLs sort as)
    rule = None
    if binding is not None and tool_name:
        rules = select_rows(
            ToolPolicy, "binding_id = %s AND tool_name = %s", [binding.pk, tool_name]
        )
        rule = policy_snap_of(rules[0]) if rules else None
    tools = select_rows(
        Tool, "server_id = %s AND name = %s AND present = %s", [server_id, tool_name, True]
    )
    tool = tools[0] if tools else None
    allowance = None
    if (
        binding is not None
        and tool is not None
        and actor_kind != policy.ActorKind.USER
        and policy.consults_allowance(tool_snap(tool, server_id, tool_name), rule)
    ):
        allowance = active_allowance(binding_id=binding.pk, thread=thread, tool_name=tool_name)
    return CallAuthority(binding=binding, policy=rule, tool=tool, allowance=allowance)


def bindings_for_thread(thread: Any) -> list[AppBinding]:
    """One binding per server: a thread binding beats the workspace binding."""
    chosen: dict[int, AppBinding] = {}
    rows = AppBinding.objects.filter(workspace_id=thread.workspace_id).select_related("server")
    for binding in rows:
        if binding.thread_id not in (None, thread.pk):
            continue
        current = chosen.get(binding.server_id)
        if current is None or (current.thread_id is None and binding.thread_id is not None):
            chosen[binding.server_id] = binding
    return [b for b in chosen.values() if b.enabled and b.server.enabled]


async def ensure_thread_catalogues(thread: Any) -> None:
    """Make sure every server bound to the thread has its catalogue loaded."""
    from channels.db import database_sync_to_async

    from mcp_bridge import gateway

    bindings = await database_sync_to_async(bindings_for_thread)(thread)
    for binding in bindings:
        await gateway.ensure_catalogue(binding.server)


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
    tools = Tool.objects.filter(
        server_id__in=[b.server_id for b in bindings], present=True
    ).select_related("server")
    by_server = {b.server_id: b for b in bindings}
    thread_ref = policy.ThreadRef(id=thread.pk, workspace_id=thread.workspace_id)
    actor = policy.Actor(kind="model", user_id=None, role=role)
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
        decision = policy.decide(
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
