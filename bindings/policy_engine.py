"""The policy engine: ``decide()``, one pure function that decides every action.

The rule table (``_RULES``: per action kind, who may initiate it, whether a viewer may,
which visibility it needs, whether risk and approval apply, which action-specific check
runs), the action-specific checks, and ``decide()``, which applies the rules in the order
docs/policy.md lists them. The vocabulary, the snapshots it reads and the risk and consent
rules are in ``bindings.policy``. No Django imports, no I/O.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from bindings.policy import (
    ALWAYS_BLOCKED_SCHEMES,
    MAX_URL_LENGTH,
    SCHEME_RE,
    Action,
    ActionKind,
    Actor,
    ActorKind,
    AllowanceSnap,
    Approval,
    ApprovalBasis,
    BindingSnap,
    DisplayMode,
    Outcome,
    PolicyDecision,
    PolicySnap,
    Reason,
    Risk,
    RiskSource,
    Role,
    Scope,
    ThreadRef,
    ToolSnap,
    Visibility,
    consults_allowance,
    default_approval,
    effective_risk,
    effective_visibility,
    event_type_for_action,
    grant_owner,
    risk_source,
)

__all__ = ["decide"]

# Whitespace, control, format (zero-width, bidi overrides), separators,
# surrogates and private-use characters: never legitimate raw in a URL.
_FORBIDDEN_URL_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Zs", "Zl", "Zp"})


# ------------------------------------------------------------------------ rule table


class _Check(StrEnum):
    NONE = "none"
    LINK = "link"
    RATE = "rate"
    DISPLAY = "display"


@dataclass(frozen=True, slots=True)
class _Rule:
    actors: frozenset[ActorKind]
    viewer_may: bool = False  # touches only the viewer's own browser / reads
    needs_visibility: Visibility | None = None  # set: the action names a tool
    runs_tool: bool = False  # risk and approval apply
    check: _Check = _Check.NONE


_APP = frozenset({ActorKind.APP_VIEW})
_APP_TOOL_CALL = _Rule(_APP, needs_visibility=Visibility.APP, runs_tool=True)
_APP_MESSAGE = _Rule(_APP, check=_Check.RATE)
_APP_LINK = _Rule(_APP, viewer_may=True, check=_Check.LINK)
_APP_LOG = _Rule(_APP, viewer_may=True)

_RULES: Mapping[ActionKind, _Rule] = MappingProxyType(
    {
        ActionKind.MODEL_TOOL_CALL: _Rule(
            frozenset({ActorKind.MODEL}), needs_visibility=Visibility.MODEL, runs_tool=True
        ),
        ActionKind.USER_TOOL_CALL: _Rule(
            frozenset({ActorKind.USER}), needs_visibility=Visibility.MODEL, runs_tool=True
        ),
        ActionKind.MODEL_TOOL_LIST: _Rule(
            frozenset({ActorKind.MODEL}), needs_visibility=Visibility.MODEL
        ),
        ActionKind.APP_TOOL_CALL: _APP_TOOL_CALL,
        ActionKind.LEGACY_TOOL: _APP_TOOL_CALL,
        ActionKind.APPS_SDK_CALL_TOOL: _APP_TOOL_CALL,
        ActionKind.RESOURCE_READ: _Rule(
            frozenset({ActorKind.APP_VIEW, ActorKind.USER}), viewer_may=True
        ),
        ActionKind.UI_MESSAGE: _APP_MESSAGE,
        ActionKind.LEGACY_PROMPT: _APP_MESSAGE,
        ActionKind.LEGACY_INTENT: _APP_MESSAGE,
        ActionKind.APPS_SDK_FOLLOW_UP: _APP_MESSAGE,
        ActionKind.UI_UPDATE_MODEL_CONTEXT: _Rule(_APP),
        ActionKind.UI_OPEN_LINK: _APP_LINK,
        ActionKind.LEGACY_LINK: _APP_LINK,
        ActionKind.APPS_SDK_OPEN_EXTERNAL: _APP_LINK,
        ActionKind.UI_REQUEST_DISPLAY_MODE: _Rule(_APP, viewer_may=True, check=_Check.DISPLAY),
        ActionKind.UI_DOWNLOAD_FILE: _Rule(_APP, viewer_may=True),
        ActionKind.LOG_MESSAGE: _APP_LOG,
        ActionKind.LEGACY_NOTIFY: _APP_LOG,
        ActionKind.WIDGET_STATE: _Rule(_APP),
        # A dialog in the viewer's own browser, titled with the app's name by the host.
        ActionKind.APPS_SDK_REQUEST_MODAL: _Rule(_APP, viewer_may=True),
        # Draft-spec features (chat.view_tools): members only; consent is asked beyond this.
        ActionKind.VIEW_SAMPLING: _Rule(_APP),
        ActionKind.VIEW_TOOLS_REGISTER: _Rule(_APP),
        ActionKind.VIEW_TOOL_CALL: _Rule(_APP),
        # App views and the thread's files (chat.media.view_files): members only.
        ActionKind.VIEW_FILE_UPLOAD: _Rule(_APP),
        ActionKind.VIEW_FILE_LINK: _Rule(_APP),
        ActionKind.VIEW_FILES_SELECT: _Rule(_APP),
        ActionKind.VIEW_FILE_SAVE: _Rule(_APP),
    }
)


# ---------------------------------------------------------------------------- checks


def _check_link(url: Any, binding: BindingSnap) -> tuple[Reason, str] | None:
    """``None`` if ``url`` may be opened under ``binding``, else why not."""
    if not isinstance(url, str) or not url:
        return Reason.INVALID_URL, "The link is missing or not text."
    if len(url) > MAX_URL_LENGTH:
        return Reason.INVALID_URL, f"The link is longer than {MAX_URL_LENGTH} characters."
    for char in url:
        if char == "\\" or unicodedata.category(char) in _FORBIDDEN_URL_CATEGORIES:
            return (
                Reason.INVALID_URL,
                "The link contains whitespace, control, invisible characters or a backslash.",
            )
    scheme, colon, rest = url.partition(":")
    if not colon or not SCHEME_RE.fullmatch(scheme):
        return Reason.INVALID_URL, "The link is not an absolute URL with a scheme."
    scheme = scheme.lower()
    if scheme in ALWAYS_BLOCKED_SCHEMES:
        return Reason.SCHEME_NOT_ALLOWED, f"{scheme}: links are never opened."
    if scheme not in binding.link_schemes:
        allowed = ", ".join(f"{s}:" for s in sorted(binding.link_schemes)) or "none"
        return (
            Reason.SCHEME_NOT_ALLOWED,
            f"{scheme}: links are not allowed for this app (allowed: {allowed}).",
        )
    if scheme in ("http", "https"):
        if not rest.startswith("//"):
            return Reason.INVALID_URL, "The web link has no host."
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 — raises ValueError on a malformed port
        except ValueError:
            return Reason.INVALID_URL, "The web link is malformed."
        if "@" in parts.netloc:
            return Reason.INVALID_URL, "Web links with a user name or password are not opened."
        if not parts.hostname:
            return Reason.INVALID_URL, "The web link has no host."
    return None


def _check_display_mode(action: Action) -> tuple[Reason, str] | None:
    mode = action.display_mode
    if not isinstance(mode, str) or mode not in {m.value for m in DisplayMode}:
        return (
            Reason.INVALID_DISPLAY_MODE,
            f"Unknown display mode {mode!r}: use inline, fullscreen, pip or split.",
        )
    declared = action.available_display_modes
    if declared and mode not in declared:
        return (
            Reason.DISPLAY_MODE_NOT_DECLARED,
            f"The app did not declare the {mode} display mode; it stays as it is.",
        )
    return None


_ACTOR_NAMES: Mapping[ActorKind, str] = MappingProxyType(
    {ActorKind.USER: "A user", ActorKind.MODEL: "The model", ActorKind.APP_VIEW: "An app view"}
)


def _allowed_names(values: Iterable[str]) -> str:
    return ", ".join(sorted(values)) or "none"


# --------------------------------------------------------------------------- decide


def decide(
    *,
    actor: Actor,
    thread: ThreadRef,
    binding: BindingSnap | None,
    tool: ToolSnap | None,
    policy: PolicySnap | None,
    action: Action,
    allowance: AllowanceSnap | None = None,
) -> PolicyDecision:
    """Decide ``action`` by ``actor`` in ``thread`` under ``binding``.

    ``binding`` is the binding of ``action.server_id`` that applies to the thread
    (``None`` if there is none); ``tool``/``policy`` are the catalogue row and
    ``ToolPolicy`` of ``action.tool_name`` (``None`` if missing / not set);
    ``allowance`` the unrevoked allowance of that tool that applies to the thread,
    if any (it is checked again here: one that does not cover the call is ignored).
    The rules are listed in docs/policy.md, in the order they are checked.
    """
    kind = action.kind
    event_type = event_type_for_action(kind)
    risk: Risk | None = None
    source: RiskSource | None = None
    visibility: frozenset[Visibility] = frozenset()

    def result(
        outcome: Outcome,
        reason: Reason,
        message: str,
        basis: ApprovalBasis | None = None,
    ) -> PolicyDecision:
        return PolicyDecision(
            outcome=outcome,
            reason_code=reason,
            message=message,
            audit_event_type=event_type,
            risk=risk,
            risk_source=source,
            visibility=visibility,
            approval_basis=basis,
        )

    def deny(reason: Reason, message: str) -> PolicyDecision:
        return result(Outcome.DENY, reason, message)

    rule = _RULES[kind]

    # 1. Right kind of actor.
    if actor.kind not in rule.actors:
        return deny(
            Reason.WRONG_ACTOR,
            f"{_ACTOR_NAMES[actor.kind]} cannot perform {kind.value}.",
        )

    # 2. Membership.
    if actor.role is None:
        return deny(Reason.NOT_A_MEMBER, "You are not a member of this workspace.")

    # 3. Viewers read, they never act.
    if actor.role is Role.VIEWER and not rule.viewer_may:
        return deny(
            Reason.VIEWER_CANNOT_ACT,
            "Viewers can follow this thread but cannot run tools, post or change state.",
        )

    # 4. The view's capability (only app views carry one; it is ignored otherwise).
    view = actor.view if actor.kind is ActorKind.APP_VIEW else None
    if actor.kind is ActorKind.APP_VIEW:
        if view is None:
            return deny(Reason.MISSING_VIEW, "The request does not come from a known app view.")
        if view.thread_id != thread.id:
            return deny(Reason.VIEW_NOT_IN_THREAD, "This app view belongs to another thread.")
        if view.server_id != action.server_id:
            return deny(Reason.CROSS_SERVER, "An app view may only talk to its own server.")

    # 5. The binding.
    if binding is None:
        return deny(Reason.NO_BINDING, "This app is not enabled here.")
    if binding.server_id != action.server_id:
        return deny(Reason.CROSS_SERVER, "The binding belongs to another server.")
    if not binding.covers(thread):
        return deny(Reason.SCOPE_MISMATCH, "This app is bound to another workspace or thread.")
    if view is not None and view.binding_id != binding.id:
        return deny(
            Reason.BINDING_MISMATCH,
            "This app view was rendered under a binding that no longer applies; reload it.",
        )
    if not binding.enabled:
        return deny(Reason.BINDING_DISABLED, "This app is disabled here.")
    if not binding.server_enabled:
        return deny(Reason.SERVER_DISABLED, "An administrator has disabled this app's server.")

    # 6. The tool.
    if rule.needs_visibility is not None:
        if tool is None or not tool.exists or tool.name != action.tool_name:
            return deny(Reason.TOOL_NOT_FOUND, f"The tool {action.tool_name!r} does not exist.")
        if tool.server_id != action.server_id:
            return deny(Reason.CROSS_SERVER, f"{tool.name} belongs to another server.")
        if binding.enabled_tools is not None and tool.name not in binding.enabled_tools:
            return deny(Reason.TOOL_NOT_ENABLED, f"{tool.name} is not enabled for this app.")
        visibility = effective_visibility(tool, policy)
        risk = effective_risk(tool, policy)
        source = risk_source(tool, policy)
        if rule.needs_visibility not in visibility:
            shown = _allowed_names(visibility)
            if rule.needs_visibility is Visibility.APP:
                return deny(
                    Reason.TOOL_NOT_VISIBLE_TO_APP,
                    f"{tool.name} cannot be called from its app view (visibility: {shown}).",
                )
            who = "you" if actor.kind is ActorKind.USER else "the model"
            return deny(
                Reason.TOOL_NOT_VISIBLE_TO_MODEL,
                f"{tool.name} is not available to {who} (visibility: {shown}); "
                "app-only tools can be called only from their app view.",
            )

    # 7. Action-specific checks.
    problem: tuple[Reason, str] | None = None
    if rule.check is _Check.LINK:
        problem = _check_link(action.url, binding)
    elif rule.check is _Check.RATE:
        if action.recent_ui_messages >= binding.ui_message_rate_limit:
            problem = (
                Reason.RATE_LIMITED,
                f"This app may post at most {binding.ui_message_rate_limit} messages "
                "per minute; try again shortly.",
            )
    elif rule.check is _Check.DISPLAY:
        problem = _check_display_mode(action)
    if problem is not None:
        return deny(*problem)

    # 8. Risk and approval.
    if tool is None or risk is None:
        return result(Outcome.ALLOW, Reason.OK, "Allowed.")
    admin_approval = policy.approval if policy is not None else None
    approval = admin_approval or default_approval(risk, actor.kind)
    if approval is Approval.DENY:
        return deny(Reason.POLICY_DENIES, f"An administrator has blocked {tool.name} here.")
    if not rule.runs_tool:
        return result(Outcome.ALLOW, Reason.OK, f"{tool.name} is offered to the model.")
    if risk is Risk.READ and approval is Approval.AUTO:
        return result(Outcome.ALLOW, Reason.OK, "Allowed.")
    if actor.kind is ActorKind.USER:
        # Only owners and members get here (rule 3): their own call is their consent.
        return result(
            Outcome.ALLOW,
            Reason.USER_INITIATED,
            f"You ran {tool.name} yourself; your call is recorded as its approval.",
            ApprovalBasis.SELF,
        )
    if approval is Approval.ASK:
        owner = grant_owner(
            per_member_grants=binding.per_member_grants,
            requested_by_kind=actor.kind,
            requester_id=actor.user_id,
        )
        if action.approved and owner is not None and action.approved_by != owner:
            return deny(
                Reason.PERSONAL_GRANT,
                f"{tool.name} runs with the requester's own sign-in: only they can approve it.",
            )
        if action.approved:
            return result(
                Outcome.ALLOW,
                Reason.APPROVED,
                f"{tool.name} was approved.",
                ApprovalBasis.GRANTED,
            )
        if (
            allowance is not None
            and allowance.covers(binding=binding, tool=tool, thread=thread, owner=owner)
            and consults_allowance(tool, policy)
        ):
            where = "this thread" if allowance.scope is Scope.THREAD else "this workspace"
            return result(
                Outcome.ALLOW,
                Reason.ALLOWANCE,
                f"{tool.name} is allowed in {where}.",
                ApprovalBasis.ALLOWANCE,
            )
        return result(
            Outcome.ASK,
            Reason.APPROVAL_REQUIRED,
            f"{tool.name} is a {risk.value} tool: it runs once someone approves this call.",
        )
    if risk is Risk.READ:
        return result(Outcome.ALLOW, Reason.OK, "Allowed.")
    # Only an admin's standing policy reaches here: `auto` on a risky tool.
    return result(
        Outcome.ALLOW,
        Reason.POLICY_AUTO_APPROVED,
        f"{tool.name} is pre-approved by an administrator.",
        ApprovalBasis.POLICY,
    )
