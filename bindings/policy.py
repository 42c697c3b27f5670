"""The policy engine: one pure function that decides every action.

``decide()`` answers "may this actor do this action, in this thread, under this
app binding?" with ``allow``, ``deny`` or ``ask`` (an approval is needed first),
a stable reason code, a message for people, the tool's risk and the audit event
type the service must write. It has no Django imports and does no I/O: the
service layer builds frozen snapshots (``Actor``, ``ThreadRef``, ``BindingSnap``,
``ToolSnap``, ``PolicySnap``, ``Action``) from the database, calls ``decide()``,
writes the audit event whatever the outcome, and acts only on ``allow``.
Anything the snapshots do not say is denied (fail closed).

The rules, in the order they are checked (the first failing rule is the reason):

1.  **Right kind of actor.** Each action kind has the actors that may initiate
    it: tool calls by the model (and "which tools are offered to the model") by
    the model; ``/call`` by a user; every bridge request (``tools/call``,
    ``ui/*``, logging, widget state and their legacy MCP-UI and Apps SDK
    aliases) by an app view; ``resources/read`` by an app view or a user (the
    host loading a view). Anything else: ``wrong_actor``.
2.  **Membership.** The actor must be a member of the thread's workspace. The
    model and an app view act on behalf of a person (the member whose message
    started the turn; the member whose browser holds the view) and carry that
    person's role. No role: ``not_a_member``.
3.  **Viewers read, they never act.** A viewer may load views
    (``resources/read``), and may do what only touches their own browser:
    open a link, change a view's display mode, download a file a view offers,
    and emit log messages. A viewer may not call tools, be offered tools, post
    messages, feed the model context or save widget state:
    ``viewer_cannot_act``. Owners and members are treated alike here;
    administering bindings is not decided by this function.
4.  **The view's capability.** An app view's request must name a view
    (``missing_view``) of this very thread (``view_not_in_thread``), and target
    the view's own server (``cross_server``).
5.  **The binding.** A binding of the target server must exist
    (``no_binding``), be a binding of that server (``cross_server``), cover the
    thread (``scope_mismatch``: a workspace binding covers every thread of its
    workspace, a thread binding only its thread), be the binding the view was
    rendered under (``binding_mismatch``: a replaced binding retires its old
    views), and be enabled (``binding_disabled``); the server itself must be
    enabled too (``server_disabled``): disabling a server stops every open view,
    pending approval and model offer of it at once.
6.  **The tool** (tool calls and tool offers). It must exist in the catalogue
    under that name (``tool_not_found``), belong to the target server
    (``cross_server``), be enabled by the binding (``tool_not_enabled``) and be
    visible to the caller: app calls need ``app`` (``tool_not_visible_to_app``);
    model calls, tool offers and a user's ``/call`` need ``model``
    (``tool_not_visible_to_model``). Effective visibility is the tool's
    declared visibility intersected with the admin's override: an override can
    only narrow, never widen.
7.  **Action-specific checks.**
    Links (``ui/open-link``, legacy ``link``, Apps SDK ``openExternal``): the
    URL must be absolute, at most 8192 characters, without whitespace, control,
    invisible/bidi characters or backslashes (``invalid_url``); its scheme must
    be in the binding's allowed schemes (default ``https`` and ``mailto``; an
    admin may remove ``mailto`` or add e.g. ``http``) or be the binding's
    deep-link protocol (``scheme_not_allowed``). ``javascript``, ``data``,
    ``file``, ``vbscript``, ``blob``, ``about``, ``chrome`` and other browser
    internals are rejected even when configured. ``http``/``https`` links need
    a host and may not carry credentials (``https://bank.example@evil.example``).
    Messages (``ui/message``, legacy ``prompt``/``intent``, Apps SDK
    ``sendFollowUpMessage``): at most ``ui_message_rate_limit`` per view in the
    current window (``rate_limited``; a limit of 0 turns them off).
    Display modes: ``inline``, ``fullscreen`` or ``pip``
    (``invalid_display_mode``), and one the app declared in
    ``availableDisplayModes`` when it declared any
    (``display_mode_not_declared``; the service then reports the current mode).
8.  **Risk and consent** (tool calls only). Risk is the admin's override if
    set, else derived from the tool's annotations (``derive_risk``). The
    approval rule is the admin's (``ToolPolicy.approval``) if set, else the
    default table (``default_approval``):

    ============  ======  =====  ========
    risk          user    model  app view
    ============  ======  =====  ========
    read          auto    auto   auto
    write         auto*   ask    ask
    destructive   auto*   ask    ask
    ============  ======  =====  ========

    ``deny`` denies (``policy_denies``; such a tool is not offered to the model
    either), whoever asks. Otherwise:

    - (*) **A person's own call is consent.** A ``/call`` or tool-picker call
      by an owner or member runs whatever the tool's risk (and whatever an
      admin's ``ask``): ``user_initiated``, recorded as ``approved`` with that
      person as approver. Viewers never get here (rule 3).
    - ``ask`` asks (``approval_required``) until one of:
      the service replays the request with ``Action.approved`` set — an
      approval recorded for exactly these frozen arguments — (``approved``);
      or an **allowance** covers the call (``allowance``): consent a member
      gave for this tool of this binding, in this thread or in the whole
      workspace, and that nobody revoked. An allowance never covers a tool the
      server declares ``destructiveHint: true`` nor one an admin set to
      ``ask`` explicitly (both ask for every call: see ``grantable_scopes``).
      **A personal grant needs its owner.** On a server that signs each member
      in with their own account (``BindingSnap.per_member_grants``), a model's or
      view's call spends the grant of the member it runs for (``grant_owner``):
      only that member's approval counts (``personal_grant`` otherwise), and only
      an allowance that member granted covers it. Who may decide a request is
      ``may_approve`` (the same rule, for the service and the card).
    - ``auto`` allows: ``ok`` for read tools; ``policy_auto_approved`` when an
      admin set ``auto`` on a risky tool (a standing approval, recorded in the
      audit log when the policy was changed).

    So, as DESIGN §8.4 requires, a write or destructive tool never runs without
    consent recorded in the audit log, whoever initiated it: the person's own
    call, a granted approval, an allowance (whose creation is audited), or the
    admin's standing policy. Every decision is re-taken when an approved
    request is replayed, so an approval does not survive a binding that was
    disabled or a policy that was tightened in the meantime; an allowance is
    read afresh for every call, so revoking one decides the very next call.

Risk derivation (MCP tool annotations are untrusted hints from the server; only
real booleans count, so ``"false"`` is not ``False``). The MCP spec defaults are
``readOnlyHint = false`` and ``destructiveHint = true``, i.e. a tool that says
nothing may be destructive. We follow the spec:

- ``destructiveHint: true`` → destructive (even if it also claims read-only:
  contradictory claims resolve to the riskier one);
- ``readOnlyHint: true`` → read;
- ``destructiveHint: false`` (and not read-only) → write;
- otherwise (no annotations) → destructive.

Most published servers annotate nothing, so most tools rate destructive: a
person's own call still runs at once, and a view's or the model's calls ask
until someone allows the tool in the thread or workspace; an admin who knows
better sets the tool's risk in its ``ToolPolicy``.

Why a user's ``/call`` needs ``model`` visibility: app-only tools (visibility
``["app"]``) are internal to their UI — polling endpoints, callbacks that expect
arguments only the view produces. A slash command is a person doing what the
model could do, so it sees the model's tools.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum, StrEnum
from types import MappingProxyType
from typing import Any, TypeAlias, TypeVar
from urllib.parse import urlsplit

from audit.types import AuditEventType, Decision, event_type_for_action

__all__ = [
    "ALWAYS_BLOCKED_SCHEMES",
    "DEFAULT_LINK_SCHEMES",
    "DEFAULT_VISIBILITY",
    "MAX_URL_LENGTH",
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
    "decide",
    "default_approval",
    "derive_risk",
    "effective_risk",
    "consults_allowance",
    "effective_visibility",
    "grantable_scopes",
    "grant_owner",
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

    @property
    def audit_event_type(self) -> AuditEventType:
        return event_type_for_action(self)


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

_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*", re.ASCII)
# Whitespace, control, format (zero-width, bidi overrides), separators,
# surrogates and private-use characters: never legitimate raw in a URL.
_FORBIDDEN_URL_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Zs", "Zl", "Zp"})


def _normalize_scheme(value: Any) -> str | None:
    """``"Figma://"`` → ``"figma"``; ``None`` if ``value`` is not a scheme."""
    if not isinstance(value, str):
        return None
    scheme = value.strip().lower().removesuffix("//").removesuffix(":")
    return scheme if _SCHEME_RE.fullmatch(scheme) else None


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
        if self.binding_id != binding.id or self.tool_name != tool.name:
            return False
        if owner is not None and self.granted_by_id != owner:
            return False
        if self.workspace_id != thread.workspace_id:
            return False
        return self.scope is Scope.WORKSPACE or self.thread_id == thread.id


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
    """Risk from MCP tool annotations, following the spec defaults (see the module
    docstring). Only real booleans count."""
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
    """The approval rule when the admin set none (table in the module docstring)."""
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
    if not colon or not _SCHEME_RE.fullmatch(scheme):
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
            f"Unknown display mode {mode!r}: use inline, fullscreen or pip.",
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
    The rules are listed in the module docstring, in the order they are checked.
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
