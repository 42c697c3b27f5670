"""The terms of the policy engine (``bindings.policy_engine.decide``): action kinds, reason
codes, the frozen snapshots it decides on, and the risk and consent rules it applies.

``decide()`` answers "may this actor do this action, in this thread, under this app
binding?" with ``allow``, ``deny`` or ``ask`` (an approval is needed first), a stable
reason code, a message for people, the tool's risk and the audit event type the service
must write. No Django imports, no I/O: the service layer builds the snapshots below from
the database, calls ``decide()``, audits the decision whatever the outcome, and acts only
on ``allow``. Anything the snapshots do not say is denied (fail closed).

The rules, in the order ``decide()`` checks them, the default approval table and how risk
is derived from MCP tool annotations: docs/policy.md.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum, StrEnum
from types import MappingProxyType
from typing import Any, TypeAlias, TypeVar

from audit.types import AuditEventType, Decision

__all__ = [
    "ALWAYS_BLOCKED_SCHEMES",
    "APP_TOOLS",
    "DEFAULT_LINK_SCHEMES",
    "DEFAULT_VISIBILITY",
    "MAX_URL_LENGTH",
    "SCHEME_RE",
    "Action",
    "ActionKind",
    "Actor",
    "ActorKind",
    "AllowanceSnap",
    "Approval",
    "ApprovalBasis",
    "BindingSnap",
    "DisplayMode",
    "ObjectId",
    "Outcome",
    "PolicyDecision",
    "PolicySnap",
    "Reason",
    "Risk",
    "RiskSource",
    "Role",
    "Scope",
    "ThreadRef",
    "ToolSnap",
    "ViewRef",
    "Visibility",
    "default_approval",
    "derive_risk",
    "effective_risk",
    "consults_allowance",
    "effective_visibility",
    "event_type_for_action",
    "grantable_scopes",
    "grant_owner",
    "is_app_only",
    "may_approve",
    "personal_grant_message",
    "risk_label",
    "risk_source",
]

# Primary keys: compare like with like (an int id never equals a str id, which
# fails closed).
ObjectId: TypeAlias = int | str | uuid.UUID


# --------------------------------------------------------------------------- enums


class ActionKind(StrEnum):
    """Everything that can be decided. Compatibility aliases are listed with the
    MCP Apps action they map onto. Apps SDK ``requestDisplayMode`` is
    ``UI_REQUEST_DISPLAY_MODE``; purely presentational requests (``ping``,
    ``size-changed``, ``notifyIntrinsicHeight``, ``requestClose``) are not
    policy decisions."""

    MODEL_TOOL_CALL = "model_tool_call"
    USER_TOOL_CALL = "user_tool_call"  # a person's /call (or tool picker)
    APP_TOOL_CALL = "app_tool_call"  # view: tools/call
    MODEL_TOOL_LIST = "model_tool_list"  # is this tool offered to the model?
    RESOURCE_READ = "resource_read"  # view: resources/read; host loading a view
    UI_MESSAGE = "ui_message"
    UI_UPDATE_MODEL_CONTEXT = "ui_update_model_context"
    UI_OPEN_LINK = "ui_open_link"
    UI_REQUEST_DISPLAY_MODE = "ui_request_display_mode"
    UI_DOWNLOAD_FILE = "ui_download_file"
    LOG_MESSAGE = "log_message"  # view: notifications/message
    LEGACY_TOOL = "legacy_tool"  # MCP-UI tool → tools/call
    LEGACY_PROMPT = "legacy_prompt"  # MCP-UI prompt → ui/message
    LEGACY_INTENT = "legacy_intent"  # MCP-UI intent → ui/message
    LEGACY_LINK = "legacy_link"  # MCP-UI link → ui/open-link
    LEGACY_NOTIFY = "legacy_notify"  # MCP-UI notify → notifications/message
    APPS_SDK_CALL_TOOL = "apps_sdk_call_tool"  # window.openai.callTool → tools/call
    APPS_SDK_FOLLOW_UP = "apps_sdk_follow_up"  # sendFollowUpMessage → ui/message
    APPS_SDK_OPEN_EXTERNAL = "apps_sdk_open_external"  # openExternal → ui/open-link
    WIDGET_STATE = "widget_state"  # setWidgetState
    APPS_SDK_REQUEST_MODAL = "apps_sdk_request_modal"  # requestModal: the view in a dialog
    VIEW_SAMPLING = "view_sampling"  # view: sampling/createMessage (draft spec)
    VIEW_TOOLS_REGISTER = "view_tools_register"  # view: the tools it provides (draft spec)
    VIEW_TOOL_CALL = "view_tool_call"  # the model → a tool an open view provides
    # Issue 26 part 4: app views and the thread's files (chat.media.view_files).
    VIEW_FILE_UPLOAD = "view_file_upload"  # Apps SDK uploadFile
    VIEW_FILE_LINK = "view_file_link"  # Apps SDK getFileDownloadUrl
    VIEW_FILES_SELECT = "view_files_select"  # Apps SDK selectFiles (the host's chooser)
    VIEW_FILE_SAVE = "view_file_save"  # MCP Apps ui/download-file: saved in the thread

    @property
    def audit_event_type(self) -> AuditEventType:
        return _EVENT_TYPE_BY_ACTION[self]


# Compatibility surfaces (legacy MCP-UI, Apps SDK) are audited under the MCP Apps action
# they map onto, so that one report finds, say, every link opened whichever surface asked
# for it; the service records the surface in the event's extra JSON. LEGACY_ACTION (407) is
# for legacy messages that have no MCP Apps equivalent.
_EVENT_TYPE_BY_ACTION: Mapping[ActionKind, AuditEventType] = MappingProxyType(
    {
        ActionKind.MODEL_TOOL_CALL: AuditEventType.TOOL_CALL_MODEL,
        ActionKind.USER_TOOL_CALL: AuditEventType.TOOL_CALL_USER,
        ActionKind.APP_TOOL_CALL: AuditEventType.TOOL_CALL_APP,
        ActionKind.LEGACY_TOOL: AuditEventType.TOOL_CALL_APP,
        ActionKind.APPS_SDK_CALL_TOOL: AuditEventType.TOOL_CALL_APP,
        ActionKind.MODEL_TOOL_LIST: AuditEventType.TOOLS_OFFERED_TO_MODEL,
        ActionKind.RESOURCE_READ: AuditEventType.RESOURCE_READ,
        ActionKind.UI_MESSAGE: AuditEventType.UI_MESSAGE,
        ActionKind.LEGACY_PROMPT: AuditEventType.UI_MESSAGE,
        ActionKind.LEGACY_INTENT: AuditEventType.UI_MESSAGE,
        ActionKind.APPS_SDK_FOLLOW_UP: AuditEventType.UI_MESSAGE,
        ActionKind.UI_UPDATE_MODEL_CONTEXT: AuditEventType.UI_UPDATE_MODEL_CONTEXT,
        ActionKind.UI_OPEN_LINK: AuditEventType.UI_OPEN_LINK,
        ActionKind.LEGACY_LINK: AuditEventType.UI_OPEN_LINK,
        ActionKind.APPS_SDK_OPEN_EXTERNAL: AuditEventType.UI_OPEN_LINK,
        ActionKind.UI_REQUEST_DISPLAY_MODE: AuditEventType.UI_REQUEST_DISPLAY_MODE,
        ActionKind.UI_DOWNLOAD_FILE: AuditEventType.UI_DOWNLOAD_FILE,
        ActionKind.LOG_MESSAGE: AuditEventType.VIEW_LOG_MESSAGE,
        ActionKind.LEGACY_NOTIFY: AuditEventType.VIEW_LOG_MESSAGE,
        ActionKind.WIDGET_STATE: AuditEventType.WIDGET_STATE_SET,
        ActionKind.APPS_SDK_REQUEST_MODAL: AuditEventType.MODAL_REQUESTED,
        ActionKind.VIEW_SAMPLING: AuditEventType.VIEW_SAMPLING_REQUESTED,
        ActionKind.VIEW_TOOLS_REGISTER: AuditEventType.VIEW_TOOLS_REGISTERED,
        ActionKind.VIEW_TOOL_CALL: AuditEventType.VIEW_TOOL_CALLED,
        ActionKind.VIEW_FILE_UPLOAD: AuditEventType.VIEW_FILE_UPLOADED,
        ActionKind.VIEW_FILE_LINK: AuditEventType.VIEW_FILE_LINK_ISSUED,
        ActionKind.VIEW_FILES_SELECT: AuditEventType.VIEW_FILES_SELECTED,
        ActionKind.VIEW_FILE_SAVE: AuditEventType.VIEW_FILE_SAVED,
    }
)


def event_type_for_action(kind: ActionKind | str) -> AuditEventType:
    """The audit event type that records a decision about an action of ``kind`` (an
    ``ActionKind`` or its string value). Raises ``ValueError`` for an unknown kind rather
    than guessing."""
    try:
        return _EVENT_TYPE_BY_ACTION[ActionKind(kind)]
    except ValueError:
        raise ValueError(f"no audit event type for action kind {kind!r}") from None


class ActorKind(StrEnum):
    USER = "user"
    MODEL = "model"
    APP_VIEW = "app_view"


class Role(StrEnum):
    OWNER = "owner"
    MEMBER = "member"
    VIEWER = "viewer"


class Scope(StrEnum):
    WORKSPACE = "workspace"
    THREAD = "thread"


class Visibility(StrEnum):
    MODEL = "model"
    APP = "app"


class Risk(StrEnum):
    READ = "read"
    WRITE = "write"
    DESTRUCTIVE = "destructive"


class RiskSource(StrEnum):
    """Where a tool's risk comes from: the admin's override, the server's own annotations,
    or the MCP default for a tool that declares nothing (treated as destructive)."""

    ADMIN = "admin"
    DECLARED = "declared"
    DEFAULT = "default"


class Approval(StrEnum):
    AUTO = "auto"
    ASK = "ask"
    DENY = "deny"


class Outcome(StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


class ApprovalBasis(StrEnum):
    """On what strength an allowed call of a risky tool runs."""

    SELF = "self"  # the user's own explicit /call
    GRANTED = "granted"  # an approval request for these exact arguments was granted
    POLICY = "policy"  # the admin set approval "auto" on this tool
    ALLOWANCE = "allowance"  # a member allowed this tool in the thread or workspace


class DisplayMode(StrEnum):
    INLINE = "inline"
    FULLSCREEN = "fullscreen"
    PIP = "pip"
    SPLIT = "split"  # the side pane beside the conversation (ext-apps PR #739, docs/side-pane.md)


class Reason(StrEnum):
    """Stable reason codes. Values are stored in audit rows and shown to clients:
    never rename one."""

    OK = "ok"
    SELF_APPROVED = "self_approved"  # no longer decided (see USER_INITIATED); kept for old rows
    USER_INITIATED = "user_initiated"
    ALLOWANCE = "allowance"
    APPROVED = "approved"
    POLICY_AUTO_APPROVED = "policy_auto_approved"
    WRONG_ACTOR = "wrong_actor"
    NOT_A_MEMBER = "not_a_member"
    VIEWER_CANNOT_ACT = "viewer_cannot_act"
    MISSING_VIEW = "missing_view"
    VIEW_NOT_IN_THREAD = "view_not_in_thread"
    CROSS_SERVER = "cross_server"
    NO_BINDING = "no_binding"
    SCOPE_MISMATCH = "scope_mismatch"
    BINDING_MISMATCH = "binding_mismatch"
    BINDING_DISABLED = "binding_disabled"
    SERVER_DISABLED = "server_disabled"
    TOOL_NOT_FOUND = "tool_not_found"
    TOOL_NOT_ENABLED = "tool_not_enabled"
    TOOL_NOT_VISIBLE_TO_APP = "tool_not_visible_to_app"
    TOOL_NOT_VISIBLE_TO_MODEL = "tool_not_visible_to_model"
    INVALID_URL = "invalid_url"
    SCHEME_NOT_ALLOWED = "scheme_not_allowed"
    RATE_LIMITED = "rate_limited"
    INVALID_DISPLAY_MODE = "invalid_display_mode"
    DISPLAY_MODE_NOT_DECLARED = "display_mode_not_declared"
    POLICY_DENIES = "policy_denies"
    APPROVAL_REQUIRED = "approval_required"
    # The call spends a member's own sign-in: only that member may consent to it.
    PERSONAL_GRANT = "personal_grant"


# ----------------------------------------------------------------------- constants

DEFAULT_VISIBILITY: frozenset[str] = frozenset({Visibility.MODEL, Visibility.APP})
DEFAULT_LINK_SCHEMES: frozenset[str] = frozenset({"https", "mailto"})
DEFAULT_UI_MESSAGE_RATE_LIMIT = 6  # per view per minute (AppBinding default)
MAX_URL_LENGTH = 8192

# Never opened, whatever a binding configures: script execution, inline
# documents, local files, browser internals.
ALWAYS_BLOCKED_SCHEMES: frozenset[str] = frozenset(
    {
        "javascript",
        "vbscript",
        "livescript",
        "data",
        "file",
        "blob",
        "filesystem",
        "about",
        "chrome",
        "chrome-extension",
        "chrome-untrusted",
        "devtools",
        "edge",
        "moz-extension",
        "safari-extension",
        "ms-browser-extension",
        "opera",
        "resource",
        "jar",
        "view-source",
    }
)

SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*", re.ASCII)


def _normalize_scheme(value: Any) -> str | None:
    """``"Figma://"`` → ``"figma"``; ``None`` if ``value`` is not a scheme."""
    if not isinstance(value, str):
        return None
    scheme = value.strip().lower().removesuffix("//").removesuffix(":")
    return scheme if SCHEME_RE.fullmatch(scheme) else None


_E = TypeVar("_E", bound=Enum)


def _coerce_optional(enum_cls: type[_E], value: Any) -> _E | None:
    """``None`` and ``""`` (a blank model field) mean "not set"."""
    return None if value is None or value == "" else enum_cls(value)


# ----------------------------------------------------------------------- snapshots
# Built by the service layer from model rows. Constructors coerce strings to the
# enums above and raise ValueError on values outside the documented sets, except
# for admin-entered lists (link schemes, visibility override), whose invalid
# entries are dropped: that only ever narrows what is allowed.


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewRef:
    """The view a request came from: exactly what its capability token names."""

    tool_call_id: ObjectId
    server_id: ObjectId
    binding_id: ObjectId
    thread_id: ObjectId


@dataclass(frozen=True, slots=True, kw_only=True)
class Actor:
    """Who initiates the action. ``role`` is the membership role, in the thread's
    workspace, of the person behind the actor (``None``: not a member)."""

    kind: ActorKind
    user_id: ObjectId | None
    role: Role | None
    view: ViewRef | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", ActorKind(self.kind))
        object.__setattr__(self, "role", _coerce_optional(Role, self.role))


@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadRef:
    id: ObjectId
    workspace_id: ObjectId


@dataclass(frozen=True, slots=True, kw_only=True)
class BindingSnap:
    """An ``AppBinding`` row: one server bound to a workspace or to one thread.

    ``enabled_tools``: ``None`` enables every tool of the server; an empty set
    enables none. (The ``AppBinding.enabled_tools`` field documents "empty means
    all": the service maps a null *or empty* field to ``None``.)
    ``deep_link_protocol``: ``None`` or ``""`` for none.
    """

    id: ObjectId
    server_id: ObjectId
    scope: Scope
    workspace_id: ObjectId
    thread_id: ObjectId | None = None
    enabled: bool = True
    enabled_tools: frozenset[str] | None = None  # None: every tool of the server
    allowed_link_schemes: frozenset[str] = DEFAULT_LINK_SCHEMES
    deep_link_protocol: str | None = None  # e.g. "figma"
    ui_message_rate_limit: int = DEFAULT_UI_MESSAGE_RATE_LIMIT  # per view per window
    granted_permissions: frozenset[str] = frozenset()
    allowed_domains: frozenset[str] = frozenset()
    # The bound server's own enabled flag: a server an admin disabled runs nothing.
    server_enabled: bool = True
    # The server signs each member in with their own account (OAuth per member): a call
    # spends the grant of the person it runs for (``grant_owner``).
    per_member_grants: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "scope", Scope(self.scope))
        if self.scope is Scope.THREAD and self.thread_id is None:
            raise ValueError("a thread-scoped binding needs a thread_id")
        if self.scope is Scope.WORKSPACE and self.thread_id is not None:
            raise ValueError("a workspace-scoped binding has no thread_id")
        if self.enabled_tools is not None:
            object.__setattr__(self, "enabled_tools", frozenset(self.enabled_tools))
        schemes = (_normalize_scheme(s) for s in self.allowed_link_schemes)
        object.__setattr__(self, "allowed_link_schemes", frozenset(s for s in schemes if s))
        object.__setattr__(self, "deep_link_protocol", _normalize_scheme(self.deep_link_protocol))
        if isinstance(self.ui_message_rate_limit, bool) or self.ui_message_rate_limit < 0:
            raise ValueError("ui_message_rate_limit must be a non-negative int")
        object.__setattr__(self, "granted_permissions", frozenset(self.granted_permissions))
        object.__setattr__(self, "allowed_domains", frozenset(self.allowed_domains))

    def covers(self, thread: ThreadRef) -> bool:
        """Whether this binding's scope includes ``thread``."""
        if self.workspace_id != thread.workspace_id:
            return False
        if self.scope is Scope.THREAD:
            return self.thread_id == thread.id
        return True

    @property
    def link_schemes(self) -> frozenset[str]:
        """Schemes ``ui/open-link`` may open (always-blocked ones removed)."""
        schemes = set(self.allowed_link_schemes)
        if self.deep_link_protocol:
            schemes.add(self.deep_link_protocol)
        return frozenset(schemes - ALWAYS_BLOCKED_SCHEMES)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSnap:
    """A catalogue ``Tool`` row. ``visibility`` and ``annotations`` come from the
    MCP server and are untrusted: ``visibility`` is the parsed
    ``_meta.ui.visibility`` (the service applies the spec default, both, when the
    server declared none); unknown entries are ignored."""

    server_id: ObjectId
    name: str
    visibility: frozenset[str] = DEFAULT_VISIBILITY
    annotations: Mapping[str, Any] = field(default_factory=dict)
    exists: bool = True  # False: the catalogue no longer lists it

    def __post_init__(self) -> None:
        object.__setattr__(self, "visibility", frozenset(self.visibility))
        annotations = self.annotations if isinstance(self.annotations, Mapping) else {}
        object.__setattr__(self, "annotations", MappingProxyType(dict(annotations)))


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicySnap:
    """A ``ToolPolicy`` row: the admin's per-tool overrides (``None``: no override)."""

    risk: Risk | None = None
    approval: Approval | None = None
    visibility_override: frozenset[str] | None = None  # may only narrow

    def __post_init__(self) -> None:
        object.__setattr__(self, "risk", _coerce_optional(Risk, self.risk))
        object.__setattr__(self, "approval", _coerce_optional(Approval, self.approval))
        if self.visibility_override is not None:
            known = {v.value: v for v in Visibility}
            object.__setattr__(
                self,
                "visibility_override",
                frozenset(known[v] for v in self.visibility_override if v in known),
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class AllowanceSnap:
    """An unrevoked ``Allowance`` row: consent to run ``tool_name`` under binding
    ``binding_id`` without asking, in one thread (``scope`` thread, ``thread_id``
    set) or in every thread the binding covers (``scope`` workspace)."""

    id: ObjectId
    binding_id: ObjectId
    tool_name: str
    scope: Scope
    workspace_id: ObjectId
    thread_id: ObjectId | None = None
    granted_by_id: ObjectId | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "scope", Scope(self.scope))
        if (self.scope is Scope.THREAD) != (self.thread_id is not None):
            raise ValueError("a thread allowance names its thread; a workspace one none")

    def covers(
        self,
        *,
        binding: BindingSnap,
        tool: ToolSnap,
        thread: ThreadRef,
        owner: ObjectId | None = None,
    ) -> bool:
        """Whether this allowance applies to a call of ``tool`` under ``binding`` in
        ``thread``. ``owner``: the member whose own sign-in the call spends
        (``grant_owner``); then only an allowance that member granted covers it."""
        if self.binding_id != binding.id:
            return False
        if self.tool_name != tool.name and not (
            self.tool_name == APP_TOOLS and self.scope is Scope.THREAD and is_app_only(tool)
        ):
            return False
        if owner is not None and self.granted_by_id != owner:
            return False
        if self.workspace_id != thread.workspace_id:
            return False
        return self.scope is Scope.WORKSPACE or self.thread_id == thread.id


# The allowance behind "Allow <app> in this thread": every tool of the binding's server
# that only its views can call (``is_app_only``), in one thread (docs/consent.md). Not a
# valid MCP tool name ("/" is outside the spec's [A-Za-z0-9_.-]).
APP_TOOLS = "ui/app-tools"


def is_app_only(tool: ToolSnap) -> bool:
    """Whether the server declares ``tool`` callable by its views only (``["app"]``)."""
    return tool.visibility == frozenset({Visibility.APP.value})


@dataclass(frozen=True, slots=True, kw_only=True)
class Action:
    """What is asked. Fields other than ``kind`` and ``server_id`` matter only to
    the kinds that use them."""

    kind: ActionKind
    server_id: ObjectId  # the server the action targets
    tool_name: str | None = None
    arguments: Mapping[str, Any] | None = None
    url: str | None = None
    display_mode: str | None = None
    requested_at: datetime | None = None
    # The service sets this only when replaying a request for which an approval
    # of exactly these frozen arguments has been recorded; ``approved_by``: who gave it.
    approved: bool = False
    approved_by: ObjectId | None = None
    # ui/message-like requests from this view in the current rate-limit window,
    # not counting this one.
    recent_ui_messages: int = 0
    # What the app declared in ui/initialize (None or empty: declared nothing).
    available_display_modes: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", ActionKind(self.kind))
        if isinstance(self.recent_ui_messages, bool) or self.recent_ui_messages < 0:
            raise ValueError("recent_ui_messages must be a non-negative int")
        modes = self.available_display_modes
        if modes is not None:
            modes = (modes,) if isinstance(modes, str) else tuple(modes)
            object.__setattr__(self, "available_display_modes", modes)


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyDecision:
    """The answer. The service audits it whatever the outcome and proceeds only
    when ``allowed``."""

    outcome: Outcome
    reason_code: Reason
    message: str
    audit_event_type: AuditEventType
    risk: Risk | None = None  # tool actions only
    risk_source: RiskSource | None = None  # with ``risk``: where it comes from
    visibility: frozenset[Visibility] = frozenset()  # the tool's effective visibility
    approval_basis: ApprovalBasis | None = None  # set when a call runs on an approval

    @property
    def allowed(self) -> bool:
        return self.outcome is Outcome.ALLOW

    @property
    def needs_approval(self) -> bool:
        return self.outcome is Outcome.ASK

    @property
    def self_approved(self) -> bool:
        return self.approval_basis is ApprovalBasis.SELF

    @property
    def audit_decision(self) -> Decision:
        """The ``Decision`` the audit row records."""
        if self.outcome is Outcome.DENY:
            return Decision.DENIED
        if self.outcome is Outcome.ASK:
            return Decision.PENDING
        if self.approval_basis in (
            ApprovalBasis.SELF,
            ApprovalBasis.GRANTED,
            ApprovalBasis.ALLOWANCE,
        ):
            return Decision.APPROVED
        return Decision.ALLOWED


# -------------------------------------------------------------------- risk & approval


def derive_risk(annotations: Mapping[str, Any] | None) -> Risk:
    """Risk from MCP tool annotations, following the spec defaults (docs/policy.md). Only
    real booleans count."""
    if not isinstance(annotations, Mapping):
        annotations = {}
    destructive = annotations.get("destructiveHint")
    if destructive is True:
        return Risk.DESTRUCTIVE
    if annotations.get("readOnlyHint") is True:
        return Risk.READ
    if destructive is False:
        return Risk.WRITE
    return Risk.DESTRUCTIVE


def effective_risk(tool: ToolSnap, policy: PolicySnap | None) -> Risk:
    """The admin's risk override if set, else the derived risk."""
    if policy is not None and policy.risk is not None:
        return policy.risk
    return derive_risk(tool.annotations)


def risk_source(tool: ToolSnap, policy: PolicySnap | None) -> RiskSource:
    """Whether ``effective_risk`` is the admin's, the server's declaration, or the MCP
    default for a tool that declares neither ``readOnlyHint: true`` nor a boolean
    ``destructiveHint`` (then it is "not declared safe", and treated as destructive)."""
    if policy is not None and policy.risk is not None:
        return RiskSource.ADMIN
    annotations = tool.annotations
    if isinstance(annotations.get("destructiveHint"), bool):
        return RiskSource.DECLARED
    if annotations.get("readOnlyHint") is True:
        return RiskSource.DECLARED
    return RiskSource.DEFAULT


_RISK_LABELS: Mapping[Risk, str] = MappingProxyType(
    {Risk.READ: "Read", Risk.WRITE: "Write", Risk.DESTRUCTIVE: "Destructive"}
)


def risk_label(risk: Risk | str, source: RiskSource | str | None) -> str:
    """What an approval card calls a tool's risk: a tool that declares nothing is not
    called destructive (it may well only read), but what it is — not declared safe, and
    treated as destructive."""
    risk = Risk(risk)
    if risk is Risk.DESTRUCTIVE and _coerce_optional(RiskSource, source) is RiskSource.DEFAULT:
        return "Not declared safe — treated as destructive"
    return _RISK_LABELS[risk]


# ------------------------------------------------------------------- personal grants


def grant_owner(
    *, per_member_grants: bool, requested_by_kind: ActorKind | str, requester_id: ObjectId | None
) -> ObjectId | None:
    """The member whose own sign-in a call spends, when that call needs someone's
    consent: on a server that signs each member in (``per_member_grants``), a model's or
    an app view's call runs with the grant of the person it runs for (the member whose
    message started the turn, whose browser holds the view). Only that member may consent
    to it (``may_approve``; an allowance only they granted covers it). ``None``: anyone
    who may decide approvals may consent (a shared or no sign-in; a person's own call is
    their own consent anyway)."""
    if not per_member_grants or ActorKind(requested_by_kind) is ActorKind.USER:
        return None
    return requester_id


def may_approve(
    *, role: Role | str | None, decider_id: ObjectId | None, owner: ObjectId | None
) -> Reason | None:
    """Why the person deciding may not approve (or allow) a request — ``None`` if they
    may. Owners and members approve; a request that spends a member's own sign-in
    (``owner``, see ``grant_owner``) only that member. Rejecting needs only the role:
    anyone who may decide may say no to someone else's request."""
    role = _coerce_optional(Role, role)
    if role is None:
        return Reason.NOT_A_MEMBER
    if role is Role.VIEWER:
        return Reason.VIEWER_CANNOT_ACT
    if owner is not None and decider_id != owner:
        return Reason.PERSONAL_GRANT
    return None


def personal_grant_message(*, owner_name: str, server_name: str) -> str:
    """Why someone else cannot approve a call that spends ``owner_name``'s own sign-in."""
    return f"Only {owner_name} can approve this: it uses their own sign-in to {server_name}."


_DEFAULT_APPROVAL: Mapping[tuple[Risk, ActorKind], Approval] = MappingProxyType(
    {
        (Risk.READ, ActorKind.USER): Approval.AUTO,
        (Risk.READ, ActorKind.MODEL): Approval.AUTO,
        (Risk.READ, ActorKind.APP_VIEW): Approval.AUTO,
        (Risk.WRITE, ActorKind.USER): Approval.AUTO,  # the call is the consent
        (Risk.WRITE, ActorKind.MODEL): Approval.ASK,
        (Risk.WRITE, ActorKind.APP_VIEW): Approval.ASK,
        (Risk.DESTRUCTIVE, ActorKind.USER): Approval.AUTO,  # the call is the consent
        (Risk.DESTRUCTIVE, ActorKind.MODEL): Approval.ASK,
        (Risk.DESTRUCTIVE, ActorKind.APP_VIEW): Approval.ASK,
    }
)


def default_approval(risk: Risk, initiator: ActorKind) -> Approval:
    """The approval rule when the admin set none (the table in docs/policy.md)."""
    return _DEFAULT_APPROVAL[(Risk(risk), ActorKind(initiator))]


def effective_visibility(tool: ToolSnap, policy: PolicySnap | None) -> frozenset[Visibility]:
    """The tool's declared visibility, narrowed by the admin's override.

    Unknown entries from the server are ignored; the override is intersected,
    so it can remove ``model`` or ``app`` but never add one.
    """
    known = {v.value: v for v in Visibility}
    visibility = frozenset(known[v] for v in tool.visibility if v in known)
    if policy is not None and policy.visibility_override is not None:
        visibility &= policy.visibility_override
    return visibility


def declares_destructive(tool: ToolSnap) -> bool:
    """The server itself says the tool destroys (``destructiveHint: true``)."""
    return tool.annotations.get("destructiveHint") is True


def consults_allowance(tool: ToolSnap, policy: PolicySnap | None) -> bool:
    """Whether an allowance can decide a (model's or view's) call of ``tool``: a write or
    destructive tool under the default approval table, that its server does not declare
    destructive. (Lets the service skip reading allowances for every other call.)"""
    if policy is not None and policy.approval is not None:
        return False
    if declares_destructive(tool):
        return False
    return effective_risk(tool, policy) is not Risk.READ


def grantable_scopes(
    *, tool: ToolSnap, policy: PolicySnap | None, binding: BindingSnap, role: Role | str | None
) -> tuple[Scope, ...]:
    """The scopes at which ``role`` may remember consent for ``tool`` (an allowance),
    narrowest first; empty: only *Approve once*.

    Nobody may remember consent for a tool its server declares destructive, nor for one
    an admin set to ``ask`` explicitly (both mean "ask for every call"). Owners and
    members may allow a tool in a thread; only owners in the whole workspace, and only
    under a workspace binding (a thread binding covers one thread anyway).
    """
    role = _coerce_optional(Role, role)
    if role not in (Role.OWNER, Role.MEMBER):
        return ()
    if declares_destructive(tool):
        return ()
    if policy is not None and policy.approval in (Approval.ASK, Approval.DENY):
        return ()
    if role is Role.OWNER and binding.scope is Scope.WORKSPACE:
        return (Scope.THREAD, Scope.WORKSPACE)
    return (Scope.THREAD,)
