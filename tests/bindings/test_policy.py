"""The policy engine, as a table of cases. Pure: no database, no Django.

Run alone with ``.venv/bin/pytest -p no:django tests/bindings/test_policy.py -q``.

The main table (``CASES``) has one row per case: actor, thread, binding, tool,
policy, action, expected outcome and reason code. Rows are grouped by rule;
some groups are generated from literal expectation tables (persona matrix,
actor kinds, hostile links) so that a reviewer reads the expectation, not the
loop.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from audit.types import AuditEventType, Decision
from bindings.policy import (
    ALWAYS_BLOCKED_SCHEMES,
    Action,
    ActionKind,
    Actor,
    ActorKind,
    AllowanceSnap,
    Approval,
    ApprovalBasis,
    BindingSnap,
    Outcome,
    PolicyDecision,
    PolicySnap,
    Reason,
    Risk,
    Role,
    ThreadRef,
    ToolSnap,
    ViewRef,
    Visibility,
    default_approval,
    derive_risk,
    effective_risk,
    effective_visibility,
    event_type_for_action,
    grantable_scopes,
)
from bindings.policy_engine import decide

K = ActionKind
ALLOW, DENY, ASK = Outcome.ALLOW, Outcome.DENY, Outcome.ASK

# ------------------------------------------------------------------------ the world

WS, OTHER_WS = 1, 2
THREAD_ID, OTHER_THREAD_ID = 10, 11
SERVER, OTHER_SERVER = 100, 101
BINDING_ID, OTHER_BINDING_ID = 1000, 1001
TOOL_CALL_ID = 5000

THREAD = ThreadRef(id=THREAD_ID, workspace_id=WS)
OTHER_THREAD_SAME_WS = ThreadRef(id=OTHER_THREAD_ID, workspace_id=WS)
THREAD_IN_OTHER_WS = ThreadRef(id=OTHER_THREAD_ID, workspace_id=OTHER_WS)

VIEW = ViewRef(
    tool_call_id=TOOL_CALL_ID, server_id=SERVER, binding_id=BINDING_ID, thread_id=THREAD_ID
)

WS_BINDING = BindingSnap(id=BINDING_ID, server_id=SERVER, scope="workspace", workspace_id=WS)
THREAD_BINDING = BindingSnap(
    id=BINDING_ID, server_id=SERVER, scope="thread", workspace_id=WS, thread_id=THREAD_ID
)

READ_ONLY = {"readOnlyHint": True}
WRITE = {"readOnlyHint": False, "destructiveHint": False}
DESTRUCTIVE = {"destructiveHint": True}

READ_TOOL = ToolSnap(server_id=SERVER, name="list_items", annotations=READ_ONLY)
WRITE_TOOL = ToolSnap(server_id=SERVER, name="rename_item", annotations=WRITE)
DESTRUCTIVE_TOOL = ToolSnap(server_id=SERVER, name="delete_item", annotations=DESTRUCTIVE)
UNANNOTATED_TOOL = ToolSnap(server_id=SERVER, name="echo")
APP_ONLY_TOOL = ToolSnap(
    server_id=SERVER, name="poll_status", visibility={"app"}, annotations=READ_ONLY
)
MODEL_ONLY_TOOL = ToolSnap(
    server_id=SERVER, name="summarize", visibility={"model"}, annotations=READ_ONLY
)


def binding(**changes: Any) -> BindingSnap:
    return dataclasses.replace(WS_BINDING, **changes)


def tool(base: ToolSnap = READ_TOOL, **changes: Any) -> ToolSnap:
    return dataclasses.replace(base, **changes)


def view(**changes: Any) -> ViewRef:
    return dataclasses.replace(VIEW, **changes)


def user(role: str | None = "member") -> Actor:
    return Actor(kind="user", user_id=7, role=role)


def model(role: str | None = "member") -> Actor:
    """The model acting for the member whose message started the turn."""
    return Actor(kind="model", user_id=7, role=role)


def app(role: str | None = "member", view_ref: ViewRef | None = VIEW) -> Actor:
    """An app view held by a member's browser."""
    return Actor(kind="app_view", user_id=7, role=role, view=view_ref)


def call(kind: ActionKind, target: ToolSnap = READ_TOOL, **fields: Any) -> Action:
    fields.setdefault("server_id", SERVER)
    return Action(kind=kind, tool_name=target.name, arguments={"id": 1}, **fields)


def act(kind: ActionKind, **fields: Any) -> Action:
    fields.setdefault("server_id", SERVER)
    return Action(kind=kind, **fields)


def case(
    case_id: str,
    *,
    actor: Actor,
    action: Action,
    expect: tuple[Outcome, Reason],
    binding: BindingSnap | None = WS_BINDING,
    tool: ToolSnap | None = None,
    policy: PolicySnap | None = None,
    thread: ThreadRef = THREAD,
) -> Any:
    outcome, reason = expect
    return pytest.param(actor, thread, binding, tool, policy, action, outcome, reason, id=case_id)


OK = (ALLOW, Reason.OK)

# ---------------------------------------------------------------- action kinds

APP_TOOL_KINDS = (K.APP_TOOL_CALL, K.LEGACY_TOOL, K.APPS_SDK_CALL_TOOL)
MESSAGE_KINDS = (K.UI_MESSAGE, K.LEGACY_PROMPT, K.LEGACY_INTENT, K.APPS_SDK_FOLLOW_UP)
LINK_KINDS = (K.UI_OPEN_LINK, K.LEGACY_LINK, K.APPS_SDK_OPEN_EXTERNAL)
TOOL_KINDS = (K.MODEL_TOOL_CALL, K.USER_TOOL_CALL, K.MODEL_TOOL_LIST, *APP_TOOL_KINDS)

# Who may initiate each kind (written out independently of the implementation).
ALLOWED_ACTORS: dict[ActionKind, frozenset[str]] = {
    K.MODEL_TOOL_CALL: frozenset({"model"}),
    K.USER_TOOL_CALL: frozenset({"user"}),
    K.APP_TOOL_CALL: frozenset({"app_view"}),
    K.MODEL_TOOL_LIST: frozenset({"model"}),
    K.RESOURCE_READ: frozenset({"app_view", "user"}),
    K.UI_MESSAGE: frozenset({"app_view"}),
    K.UI_UPDATE_MODEL_CONTEXT: frozenset({"app_view"}),
    K.UI_OPEN_LINK: frozenset({"app_view"}),
    K.UI_REQUEST_DISPLAY_MODE: frozenset({"app_view"}),
    K.UI_DOWNLOAD_FILE: frozenset({"app_view"}),
    K.LOG_MESSAGE: frozenset({"app_view"}),
    K.LEGACY_TOOL: frozenset({"app_view"}),
    K.LEGACY_PROMPT: frozenset({"app_view"}),
    K.LEGACY_INTENT: frozenset({"app_view"}),
    K.LEGACY_LINK: frozenset({"app_view"}),
    K.LEGACY_NOTIFY: frozenset({"app_view"}),
    K.APPS_SDK_CALL_TOOL: frozenset({"app_view"}),
    K.APPS_SDK_FOLLOW_UP: frozenset({"app_view"}),
    K.APPS_SDK_OPEN_EXTERNAL: frozenset({"app_view"}),
    K.WIDGET_STATE: frozenset({"app_view"}),
    K.APPS_SDK_REQUEST_MODAL: frozenset({"app_view"}),
    K.VIEW_SAMPLING: frozenset({"app_view"}),  # issue 27 (chat/view_tools)
    K.VIEW_TOOLS_REGISTER: frozenset({"app_view"}),
    K.VIEW_TOOL_CALL: frozenset({"app_view"}),
    K.VIEW_FILE_UPLOAD: frozenset({"app_view"}),  # issue 26 part 4 (chat.media.view_files)
    K.VIEW_FILE_LINK: frozenset({"app_view"}),
    K.VIEW_FILES_SELECT: frozenset({"app_view"}),
    K.VIEW_FILE_SAVE: frozenset({"app_view"}),
}

ACTOR_FACTORIES = {"user": user, "model": model, "app_view": app}


def happy_action(kind: ActionKind) -> Action:
    """A request of ``kind`` that a member may make (read-only tool, good URL…)."""
    if kind in TOOL_KINDS:
        return call(kind)
    if kind in LINK_KINDS:
        return act(kind, url="https://example.com/docs")
    if kind is K.UI_REQUEST_DISPLAY_MODE:
        return act(kind, display_mode="fullscreen")
    return act(kind)


def happy_actor_kind(kind: ActionKind) -> str:
    return "app_view" if "app_view" in ALLOWED_ACTORS[kind] else next(iter(ALLOWED_ACTORS[kind]))


# ------------------------------------------------------------ persona matrix
# kind: (owner, member, viewer, outsider). Viewers may read and do what only
# touches their own browser; outsiders may do nothing.

VIEWER_NO = (DENY, Reason.VIEWER_CANNOT_ACT)
OUTSIDER_NO = (DENY, Reason.NOT_A_MEMBER)

PERSONA_MATRIX: dict[ActionKind, tuple[tuple[Outcome, Reason], ...]] = {
    K.MODEL_TOOL_CALL: (OK, OK, VIEWER_NO, OUTSIDER_NO),
    K.USER_TOOL_CALL: (OK, OK, VIEWER_NO, OUTSIDER_NO),
    K.APP_TOOL_CALL: (OK, OK, VIEWER_NO, OUTSIDER_NO),
    K.MODEL_TOOL_LIST: (OK, OK, VIEWER_NO, OUTSIDER_NO),
    K.RESOURCE_READ: (OK, OK, OK, OUTSIDER_NO),
    K.UI_MESSAGE: (OK, OK, VIEWER_NO, OUTSIDER_NO),
    K.UI_UPDATE_MODEL_CONTEXT: (OK, OK, VIEWER_NO, OUTSIDER_NO),
    K.UI_OPEN_LINK: (OK, OK, OK, OUTSIDER_NO),
    K.UI_REQUEST_DISPLAY_MODE: (OK, OK, OK, OUTSIDER_NO),
    K.UI_DOWNLOAD_FILE: (OK, OK, OK, OUTSIDER_NO),
    K.LOG_MESSAGE: (OK, OK, OK, OUTSIDER_NO),
    K.LEGACY_TOOL: (OK, OK, VIEWER_NO, OUTSIDER_NO),
    K.LEGACY_PROMPT: (OK, OK, VIEWER_NO, OUTSIDER_NO),
    K.LEGACY_INTENT: (OK, OK, VIEWER_NO, OUTSIDER_NO),
    K.LEGACY_LINK: (OK, OK, OK, OUTSIDER_NO),
    K.LEGACY_NOTIFY: (OK, OK, OK, OUTSIDER_NO),
    K.APPS_SDK_CALL_TOOL: (OK, OK, VIEWER_NO, OUTSIDER_NO),
    K.APPS_SDK_FOLLOW_UP: (OK, OK, VIEWER_NO, OUTSIDER_NO),
    K.APPS_SDK_OPEN_EXTERNAL: (OK, OK, OK, OUTSIDER_NO),
    K.WIDGET_STATE: (OK, OK, VIEWER_NO, OUTSIDER_NO),
    K.APPS_SDK_REQUEST_MODAL: (OK, OK, OK, OUTSIDER_NO),
    K.VIEW_SAMPLING: (OK, OK, VIEWER_NO, OUTSIDER_NO),  # issue 27: members only
    K.VIEW_TOOLS_REGISTER: (OK, OK, VIEWER_NO, OUTSIDER_NO),
    K.VIEW_TOOL_CALL: (OK, OK, VIEWER_NO, OUTSIDER_NO),
    K.VIEW_FILE_UPLOAD: (OK, OK, VIEWER_NO, OUTSIDER_NO),  # issue 26 part 4: members only
    K.VIEW_FILE_LINK: (OK, OK, VIEWER_NO, OUTSIDER_NO),
    K.VIEW_FILES_SELECT: (OK, OK, VIEWER_NO, OUTSIDER_NO),
    K.VIEW_FILE_SAVE: (OK, OK, VIEWER_NO, OUTSIDER_NO),
}
PERSONAS = ("owner", "member", "viewer", None)


def persona_cases() -> list[Any]:
    rows = []
    for kind, expectations in PERSONA_MATRIX.items():
        actor_kind = happy_actor_kind(kind)
        for role, expect in zip(PERSONAS, expectations, strict=True):
            rows.append(
                case(
                    f"persona-{role or 'outsider'}-{kind}",
                    actor=ACTOR_FACTORIES[actor_kind](role),
                    action=happy_action(kind),
                    tool=READ_TOOL,
                    expect=expect,
                )
            )
    # The host page loading a view is a user-initiated resources/read.
    for role, expect in zip(PERSONAS, (OK, OK, OK, OUTSIDER_NO), strict=True):
        rows.append(
            case(
                f"persona-{role or 'outsider'}-resource_read-by-user",
                actor=user(role),
                action=act(K.RESOURCE_READ),
                expect=expect,
            )
        )
    return rows


def wrong_actor_cases() -> list[Any]:
    rows = []
    for kind, allowed in ALLOWED_ACTORS.items():
        for actor_kind, factory in ACTOR_FACTORIES.items():
            if actor_kind not in allowed:
                rows.append(
                    case(
                        f"wrong-actor-{actor_kind}-{kind}",
                        actor=factory("owner"),
                        action=happy_action(kind),
                        tool=READ_TOOL,
                        expect=(DENY, Reason.WRONG_ACTOR),
                    )
                )
    return rows


# ------------------------------------------------------------ view capability

VIEW_CASES = [
    case(
        "view-missing",
        actor=app(view_ref=None),
        action=call(K.APP_TOOL_CALL),
        tool=READ_TOOL,
        expect=(DENY, Reason.MISSING_VIEW),
    ),
    case(
        "view-of-other-thread",
        actor=app(view_ref=view(thread_id=OTHER_THREAD_ID)),
        action=call(K.APP_TOOL_CALL),
        tool=READ_TOOL,
        expect=(DENY, Reason.VIEW_NOT_IN_THREAD),
    ),
    case(
        "view-of-other-thread-widget-state",
        actor=app(view_ref=view(thread_id=OTHER_THREAD_ID)),
        action=act(K.WIDGET_STATE),
        expect=(DENY, Reason.VIEW_NOT_IN_THREAD),
    ),
    case(
        "view-of-other-thread-ui-message",
        actor=app(view_ref=view(thread_id=OTHER_THREAD_ID)),
        action=act(K.UI_MESSAGE),
        expect=(DENY, Reason.VIEW_NOT_IN_THREAD),
    ),
    case(
        "view-calls-other-server-tool",
        actor=app(),
        action=call(K.APP_TOOL_CALL, server_id=OTHER_SERVER),
        binding=binding(server_id=OTHER_SERVER),
        tool=tool(server_id=OTHER_SERVER),
        expect=(DENY, Reason.CROSS_SERVER),
    ),
    case(
        "view-reads-other-server-resource",
        actor=app(),
        action=act(K.RESOURCE_READ, server_id=OTHER_SERVER),
        binding=binding(server_id=OTHER_SERVER),
        expect=(DENY, Reason.CROSS_SERVER),
    ),
    case(
        "view-legacy-tool-other-server",
        actor=app(),
        action=call(K.LEGACY_TOOL, server_id=OTHER_SERVER),
        binding=binding(server_id=OTHER_SERVER),
        tool=tool(server_id=OTHER_SERVER),
        expect=(DENY, Reason.CROSS_SERVER),
    ),
    case(
        "view-apps-sdk-call-other-server",
        actor=app(),
        action=call(K.APPS_SDK_CALL_TOOL, server_id=OTHER_SERVER),
        binding=binding(server_id=OTHER_SERVER),
        tool=tool(server_id=OTHER_SERVER),
        expect=(DENY, Reason.CROSS_SERVER),
    ),
    case(
        "view-from-other-binding",
        actor=app(view_ref=view(binding_id=OTHER_BINDING_ID)),
        action=call(K.APP_TOOL_CALL),
        tool=READ_TOOL,
        expect=(DENY, Reason.BINDING_MISMATCH),
    ),
    case(
        "view-outlived-its-binding-replaced-by-thread-binding",
        actor=app(),
        action=act(K.UI_MESSAGE),
        binding=dataclasses.replace(THREAD_BINDING, id=OTHER_BINDING_ID),
        expect=(DENY, Reason.BINDING_MISMATCH),
    ),
    case(
        "model-ignores-a-stray-view",
        actor=Actor(kind="model", user_id=7, role="member", view=view(thread_id=999)),
        action=call(K.MODEL_TOOL_CALL),
        tool=READ_TOOL,
        expect=OK,
    ),
    case(
        "viewer-check-comes-before-view-check",
        actor=app(role="viewer", view_ref=None),
        action=call(K.APP_TOOL_CALL),
        tool=READ_TOOL,
        expect=VIEWER_NO,
    ),
    case(
        "outsider-check-comes-first",
        actor=app(role=None, view_ref=view(thread_id=OTHER_THREAD_ID)),
        action=call(K.APP_TOOL_CALL),
        tool=READ_TOOL,
        expect=OUTSIDER_NO,
    ),
]

# ------------------------------------------------------------------ binding & scope

SCOPE_CASES = [
    case(
        "scope-workspace-binding-covers-thread",
        actor=app(),
        action=call(K.APP_TOOL_CALL),
        tool=READ_TOOL,
        expect=OK,
    ),
    case(
        "scope-workspace-binding-covers-another-thread-of-its-workspace",
        actor=model(),
        action=call(K.MODEL_TOOL_CALL),
        tool=READ_TOOL,
        thread=OTHER_THREAD_SAME_WS,
        expect=OK,
    ),
    case(
        "scope-workspace-binding-other-workspace",
        actor=model(),
        action=call(K.MODEL_TOOL_CALL),
        tool=READ_TOOL,
        binding=binding(workspace_id=OTHER_WS),
        expect=(DENY, Reason.SCOPE_MISMATCH),
    ),
    case(
        "scope-thread-in-other-workspace",
        actor=user(),
        action=call(K.USER_TOOL_CALL),
        tool=READ_TOOL,
        thread=THREAD_IN_OTHER_WS,
        expect=(DENY, Reason.SCOPE_MISMATCH),
    ),
    case(
        "scope-thread-binding-its-thread",
        actor=app(),
        action=call(K.APP_TOOL_CALL),
        binding=THREAD_BINDING,
        tool=READ_TOOL,
        expect=OK,
    ),
    case(
        "scope-thread-binding-its-thread-user",
        actor=user(),
        action=call(K.USER_TOOL_CALL),
        binding=THREAD_BINDING,
        tool=READ_TOOL,
        expect=OK,
    ),
    case(
        "scope-thread-binding-other-thread-model",
        actor=model(),
        action=call(K.MODEL_TOOL_CALL),
        binding=THREAD_BINDING,
        tool=READ_TOOL,
        thread=OTHER_THREAD_SAME_WS,
        expect=(DENY, Reason.SCOPE_MISMATCH),
    ),
    case(
        "scope-thread-binding-other-thread-tool-list",
        actor=model(),
        action=call(K.MODEL_TOOL_LIST),
        binding=THREAD_BINDING,
        tool=READ_TOOL,
        thread=OTHER_THREAD_SAME_WS,
        expect=(DENY, Reason.SCOPE_MISMATCH),
    ),
    case(
        "scope-thread-binding-same-thread-id-other-workspace",
        actor=model(),
        action=call(K.MODEL_TOOL_CALL),
        binding=dataclasses.replace(THREAD_BINDING, workspace_id=OTHER_WS),
        tool=READ_TOOL,
        expect=(DENY, Reason.SCOPE_MISMATCH),
    ),
    case(
        "scope-mismatched-id-types-fail-closed",
        actor=model(),
        action=call(K.MODEL_TOOL_CALL),
        binding=binding(workspace_id=str(WS)),
        tool=READ_TOOL,
        expect=(DENY, Reason.SCOPE_MISMATCH),
    ),
    case(
        "binding-missing-model",
        actor=model(),
        action=call(K.MODEL_TOOL_CALL),
        binding=None,
        tool=READ_TOOL,
        expect=(DENY, Reason.NO_BINDING),
    ),
    case(
        "binding-missing-tool-list",
        actor=model(),
        action=call(K.MODEL_TOOL_LIST),
        binding=None,
        tool=READ_TOOL,
        expect=(DENY, Reason.NO_BINDING),
    ),
    case(
        "binding-missing-view-link",
        actor=app(),
        action=act(K.UI_OPEN_LINK, url="https://example.com"),
        binding=None,
        expect=(DENY, Reason.NO_BINDING),
    ),
    case(
        "binding-of-other-server",
        actor=user(),
        action=call(K.USER_TOOL_CALL),
        binding=binding(server_id=OTHER_SERVER),
        tool=READ_TOOL,
        expect=(DENY, Reason.CROSS_SERVER),
    ),
    case(
        "binding-disabled-app-call",
        actor=app(),
        action=call(K.APP_TOOL_CALL),
        binding=binding(enabled=False),
        tool=READ_TOOL,
        expect=(DENY, Reason.BINDING_DISABLED),
    ),
    case(
        "binding-disabled-tool-list",
        actor=model(),
        action=call(K.MODEL_TOOL_LIST),
        binding=binding(enabled=False),
        tool=READ_TOOL,
        expect=(DENY, Reason.BINDING_DISABLED),
    ),
    case(
        "binding-disabled-resource-read",
        actor=app(role="viewer"),
        action=act(K.RESOURCE_READ),
        binding=binding(enabled=False),
        expect=(DENY, Reason.BINDING_DISABLED),
    ),
    case(
        "binding-disabled-log",
        actor=app(),
        action=act(K.LOG_MESSAGE),
        binding=binding(enabled=False),
        expect=(DENY, Reason.BINDING_DISABLED),
    ),
    case(
        "binding-disabled-beats-an-approved-replay",
        actor=app(),
        action=call(K.APP_TOOL_CALL, WRITE_TOOL, approved=True),
        binding=binding(enabled=False),
        tool=WRITE_TOOL,
        expect=(DENY, Reason.BINDING_DISABLED),
    ),
    case(
        "binding-disabled-viewer-is-told-viewer-first",
        actor=app(role="viewer"),
        action=act(K.WIDGET_STATE),
        binding=binding(enabled=False),
        expect=VIEWER_NO,
    ),
]

# ------------------------------------------------------------------------- the tool

TOOL_CASES = [
    case(
        "tool-missing",
        actor=model(),
        action=act(K.MODEL_TOOL_CALL, tool_name="nope"),
        tool=None,
        expect=(DENY, Reason.TOOL_NOT_FOUND),
    ),
    case(
        "tool-removed-from-catalogue",
        actor=app(),
        action=call(K.APP_TOOL_CALL),
        tool=tool(exists=False),
        expect=(DENY, Reason.TOOL_NOT_FOUND),
    ),
    case(
        "tool-name-differs-from-request",
        actor=user(),
        action=act(K.USER_TOOL_CALL, tool_name="delete_item"),
        tool=READ_TOOL,
        expect=(DENY, Reason.TOOL_NOT_FOUND),
    ),
    case(
        "tool-no-name-in-request",
        actor=app(),
        action=act(K.APP_TOOL_CALL),
        tool=READ_TOOL,
        expect=(DENY, Reason.TOOL_NOT_FOUND),
    ),
    case(
        "tool-of-other-server-for-model",
        actor=model(),
        action=call(K.MODEL_TOOL_CALL),
        tool=tool(server_id=OTHER_SERVER),
        expect=(DENY, Reason.CROSS_SERVER),
    ),
    case(
        "tool-of-other-server-for-app",
        actor=app(),
        action=call(K.APP_TOOL_CALL),
        tool=tool(server_id=OTHER_SERVER),
        expect=(DENY, Reason.CROSS_SERVER),
    ),
    case(
        "tool-enabled-explicitly",
        actor=app(),
        action=call(K.APP_TOOL_CALL),
        binding=binding(enabled_tools={"list_items", "other"}),
        tool=READ_TOOL,
        expect=OK,
    ),
    case(
        "tool-not-enabled-app",
        actor=app(),
        action=call(K.APP_TOOL_CALL),
        binding=binding(enabled_tools={"other"}),
        tool=READ_TOOL,
        expect=(DENY, Reason.TOOL_NOT_ENABLED),
    ),
    case(
        "tool-not-enabled-not-offered-to-model",
        actor=model(),
        action=call(K.MODEL_TOOL_LIST),
        binding=binding(enabled_tools={"other"}),
        tool=READ_TOOL,
        expect=(DENY, Reason.TOOL_NOT_ENABLED),
    ),
    case(
        "tool-empty-enabled-set-enables-none",
        actor=user(),
        action=call(K.USER_TOOL_CALL),
        binding=binding(enabled_tools=frozenset()),
        tool=READ_TOOL,
        expect=(DENY, Reason.TOOL_NOT_ENABLED),
    ),
]

# --------------------------------------------------------------------- visibility

APP_ONLY_BY_APP = [
    case(
        f"visibility-app-only-by-{kind}",
        actor=app(),
        action=call(kind, APP_ONLY_TOOL),
        tool=APP_ONLY_TOOL,
        expect=OK,
    )
    for kind in APP_TOOL_KINDS
]
MODEL_ONLY_BY_APP = [
    case(
        f"visibility-model-only-by-{kind}",
        actor=app(),
        action=call(kind, MODEL_ONLY_TOOL),
        tool=MODEL_ONLY_TOOL,
        expect=(DENY, Reason.TOOL_NOT_VISIBLE_TO_APP),
    )
    for kind in APP_TOOL_KINDS
]
NOT_VISIBLE_TO_MODEL = (DENY, Reason.TOOL_NOT_VISIBLE_TO_MODEL)
NOT_VISIBLE_TO_APP = (DENY, Reason.TOOL_NOT_VISIBLE_TO_APP)

VISIBILITY_CASES = [
    *APP_ONLY_BY_APP,
    *MODEL_ONLY_BY_APP,
    case(
        "visibility-app-only-not-offered-to-model",
        actor=model(),
        action=call(K.MODEL_TOOL_LIST, APP_ONLY_TOOL),
        tool=APP_ONLY_TOOL,
        expect=NOT_VISIBLE_TO_MODEL,
    ),
    case(
        "visibility-app-only-not-callable-by-model",
        actor=model(),
        action=call(K.MODEL_TOOL_CALL, APP_ONLY_TOOL),
        tool=APP_ONLY_TOOL,
        expect=NOT_VISIBLE_TO_MODEL,
    ),
    case(
        "visibility-app-only-not-callable-by-user-command",
        actor=user("owner"),
        action=call(K.USER_TOOL_CALL, APP_ONLY_TOOL),
        tool=APP_ONLY_TOOL,
        expect=NOT_VISIBLE_TO_MODEL,
    ),
    case(
        "visibility-model-only-offered-to-model",
        actor=model(),
        action=call(K.MODEL_TOOL_LIST, MODEL_ONLY_TOOL),
        tool=MODEL_ONLY_TOOL,
        expect=OK,
    ),
    case(
        "visibility-model-only-callable-by-user",
        actor=user(),
        action=call(K.USER_TOOL_CALL, MODEL_ONLY_TOOL),
        tool=MODEL_ONLY_TOOL,
        expect=OK,
    ),
    case(
        "visibility-override-app-hides-from-model",
        actor=model(),
        action=call(K.MODEL_TOOL_LIST),
        tool=READ_TOOL,
        policy=PolicySnap(visibility_override={"app"}),
        expect=NOT_VISIBLE_TO_MODEL,
    ),
    case(
        "visibility-override-app-keeps-app",
        actor=app(),
        action=call(K.APP_TOOL_CALL),
        tool=READ_TOOL,
        policy=PolicySnap(visibility_override={"app"}),
        expect=OK,
    ),
    case(
        "visibility-override-model-hides-from-app",
        actor=app(),
        action=call(K.APP_TOOL_CALL),
        tool=READ_TOOL,
        policy=PolicySnap(visibility_override={"model"}),
        expect=NOT_VISIBLE_TO_APP,
    ),
    case(
        "visibility-override-cannot-widen-app-only-to-model",
        actor=model(),
        action=call(K.MODEL_TOOL_LIST, APP_ONLY_TOOL),
        tool=APP_ONLY_TOOL,
        policy=PolicySnap(visibility_override={"model"}),
        expect=NOT_VISIBLE_TO_MODEL,
    ),
    case(
        "visibility-override-model-on-app-only-leaves-nothing-for-app",
        actor=app(),
        action=call(K.APP_TOOL_CALL, APP_ONLY_TOOL),
        tool=APP_ONLY_TOOL,
        policy=PolicySnap(visibility_override={"model"}),
        expect=NOT_VISIBLE_TO_APP,
    ),
    case(
        "visibility-override-both-cannot-widen-app-only",
        actor=model(),
        action=call(K.MODEL_TOOL_CALL, APP_ONLY_TOOL),
        tool=APP_ONLY_TOOL,
        policy=PolicySnap(visibility_override={"model", "app"}),
        expect=NOT_VISIBLE_TO_MODEL,
    ),
    case(
        "visibility-override-both-cannot-widen-model-only",
        actor=app(),
        action=call(K.APP_TOOL_CALL, MODEL_ONLY_TOOL),
        tool=MODEL_ONLY_TOOL,
        policy=PolicySnap(visibility_override={"model", "app"}),
        expect=NOT_VISIBLE_TO_APP,
    ),
    case(
        "visibility-override-empty-hides-from-app",
        actor=app(),
        action=call(K.APP_TOOL_CALL),
        tool=READ_TOOL,
        policy=PolicySnap(visibility_override=set()),
        expect=NOT_VISIBLE_TO_APP,
    ),
    case(
        "visibility-override-empty-hides-from-model",
        actor=model(),
        action=call(K.MODEL_TOOL_LIST),
        tool=READ_TOOL,
        policy=PolicySnap(visibility_override=set()),
        expect=NOT_VISIBLE_TO_MODEL,
    ),
    case(
        "visibility-unknown-values-from-server-ignored",
        actor=model(),
        action=call(K.MODEL_TOOL_CALL),
        tool=tool(visibility={"Model", "admin", "everyone"}),
        expect=NOT_VISIBLE_TO_MODEL,
    ),
    case(
        "visibility-empty-declared-hides-from-app",
        actor=app(),
        action=call(K.APP_TOOL_CALL),
        tool=tool(visibility=frozenset()),
        expect=NOT_VISIBLE_TO_APP,
    ),
    case(
        "visibility-is-checked-before-approval",
        actor=model(),
        action=call(K.MODEL_TOOL_CALL, APP_ONLY_TOOL, approved=True),
        tool=APP_ONLY_TOOL,
        policy=PolicySnap(approval="auto"),
        expect=NOT_VISIBLE_TO_MODEL,
    ),
]

# --------------------------------------------------------------- risk & approval

USER_INITIATED = (ALLOW, Reason.USER_INITIATED)
APPROVED = (ALLOW, Reason.APPROVED)
NEEDS_APPROVAL = (ASK, Reason.APPROVAL_REQUIRED)
POLICY_DENIES = (DENY, Reason.POLICY_DENIES)
POLICY_AUTO = (ALLOW, Reason.POLICY_AUTO_APPROVED)

# (tool, initiator, policy, approved, expected) — the default table and the
# admin's overrides, for each initiator.
CALL_KIND_BY_INITIATOR = {
    "user": K.USER_TOOL_CALL,
    "model": K.MODEL_TOOL_CALL,
    "app_view": K.APP_TOOL_CALL,
}
APPROVAL_TABLE: list[tuple[str, ToolSnap, str, PolicySnap | None, bool, tuple[Outcome, Reason]]] = [
    # default approval: read runs; a person's own call runs (it is the consent); the
    # model's and a view's calls of write and destructive tools ask
    ("read-user", READ_TOOL, "user", None, False, OK),
    ("read-model", READ_TOOL, "model", None, False, OK),
    ("read-app", READ_TOOL, "app_view", None, False, OK),
    ("write-user-initiated", WRITE_TOOL, "user", None, False, USER_INITIATED),
    ("write-model-asks", WRITE_TOOL, "model", None, False, NEEDS_APPROVAL),
    ("write-model-approved", WRITE_TOOL, "model", None, True, APPROVED),
    ("write-app-asks", WRITE_TOOL, "app_view", None, False, NEEDS_APPROVAL),
    ("write-app-approved", WRITE_TOOL, "app_view", None, True, APPROVED),
    ("destructive-user-initiated", DESTRUCTIVE_TOOL, "user", None, False, USER_INITIATED),
    ("destructive-user-flag-changes-nothing", DESTRUCTIVE_TOOL, "user", None, True, USER_INITIATED),
    ("destructive-model-asks", DESTRUCTIVE_TOOL, "model", None, False, NEEDS_APPROVAL),
    ("destructive-model-approved", DESTRUCTIVE_TOOL, "model", None, True, APPROVED),
    ("destructive-app-asks", DESTRUCTIVE_TOOL, "app_view", None, False, NEEDS_APPROVAL),
    ("destructive-app-approved", DESTRUCTIVE_TOOL, "app_view", None, True, APPROVED),
    # unannotated tools: the MCP default is "may be destructive"
    ("unannotated-user-initiated", UNANNOTATED_TOOL, "user", None, False, USER_INITIATED),
    ("unannotated-model-asks", UNANNOTATED_TOOL, "model", None, False, NEEDS_APPROVAL),
    ("unannotated-app-asks", UNANNOTATED_TOOL, "app_view", None, False, NEEDS_APPROVAL),
    # the admin's risk override replaces the derived risk
    ("risk-override-read-model", DESTRUCTIVE_TOOL, "model", PolicySnap(risk="read"), False, OK),
    ("risk-override-read-app", UNANNOTATED_TOOL, "app_view", PolicySnap(risk="read"), False, OK),
    ("risk-override-write-user", UNANNOTATED_TOOL, "user", PolicySnap(risk="write"), False, USER_INITIATED),
    ("risk-override-write-model", READ_TOOL, "model", PolicySnap(risk="write"), False, NEEDS_APPROVAL),
    ("risk-override-destructive-user", READ_TOOL, "user", PolicySnap(risk="destructive"), False, USER_INITIATED),
    ("risk-override-blank-means-derived", WRITE_TOOL, "user", PolicySnap(risk="", approval=""), False, USER_INITIATED),
    # the admin's approval override wins over the default table
    ("approval-deny-read-user", READ_TOOL, "user", PolicySnap(approval="deny"), False, POLICY_DENIES),
    ("approval-deny-read-model", READ_TOOL, "model", PolicySnap(approval="deny"), False, POLICY_DENIES),
    ("approval-deny-read-app", READ_TOOL, "app_view", PolicySnap(approval="deny"), False, POLICY_DENIES),
    ("approval-deny-survives-an-approval", WRITE_TOOL, "model", PolicySnap(approval="deny"), True, POLICY_DENIES),
    ("approval-ask-read-user", READ_TOOL, "user", PolicySnap(approval="ask"), False, USER_INITIATED),
    ("approval-ask-read-model-approved", READ_TOOL, "model", PolicySnap(approval="ask"), True, APPROVED),
    ("approval-ask-write-user", WRITE_TOOL, "user", PolicySnap(approval="ask"), False, USER_INITIATED),
    ("approval-ask-read-app", READ_TOOL, "app_view", PolicySnap(approval="ask"), False, NEEDS_APPROVAL),
    ("approval-auto-destructive-app", DESTRUCTIVE_TOOL, "app_view", PolicySnap(approval="auto"), False, POLICY_AUTO),
    ("approval-auto-destructive-model", DESTRUCTIVE_TOOL, "model", PolicySnap(approval="auto"), False, POLICY_AUTO),
    ("approval-auto-write-user", WRITE_TOOL, "user", PolicySnap(approval="auto"), False, USER_INITIATED),
    ("approval-auto-read-is-just-ok", READ_TOOL, "model", PolicySnap(approval="auto"), False, OK),
    ("approval-needless-approved-flag-on-read", READ_TOOL, "app_view", None, True, OK),
]  # fmt: skip


def approval_cases() -> list[Any]:
    rows = []
    for case_id, target, initiator, policy, approved, expect in APPROVAL_TABLE:
        kind = CALL_KIND_BY_INITIATOR[initiator]
        rows.append(
            case(
                f"approval-{case_id}",
                actor=ACTOR_FACTORIES[initiator]("member"),
                action=call(kind, target, approved=approved),
                tool=target,
                policy=policy,
                expect=expect,
            )
        )
    # The same call through the compatibility surfaces.
    for kind in (K.LEGACY_TOOL, K.APPS_SDK_CALL_TOOL):
        rows.append(
            case(
                f"approval-write-{kind}-asks",
                actor=app(),
                action=call(kind, WRITE_TOOL),
                tool=WRITE_TOOL,
                expect=NEEDS_APPROVAL,
            )
        )
    return rows


TOOL_LIST_CASES = [
    case(
        "tool-list-offers-destructive-tools-they-ask-when-called",
        actor=model(),
        action=call(K.MODEL_TOOL_LIST, DESTRUCTIVE_TOOL),
        tool=DESTRUCTIVE_TOOL,
        expect=OK,
    ),
    case(
        "tool-list-offers-ask-policy-tools",
        actor=model(),
        action=call(K.MODEL_TOOL_LIST, WRITE_TOOL),
        tool=WRITE_TOOL,
        policy=PolicySnap(approval="ask"),
        expect=OK,
    ),
    case(
        "tool-list-hides-denied-tools",
        actor=model(),
        action=call(K.MODEL_TOOL_LIST),
        tool=READ_TOOL,
        policy=PolicySnap(approval="deny"),
        expect=POLICY_DENIES,
    ),
]

# ---------------------------------------------------------------------------- links

ALLOWED_LINKS = [
    ("https", "https://example.com"),
    ("https-path-query-fragment", "https://example.com/a/b?q=1&r=%20x#frag"),
    ("https-uppercase-scheme", "HTTPS://EXAMPLE.COM/"),
    ("https-port", "https://example.com:8443/x"),
    ("https-ipv6", "https://[::1]:8443/"),
    ("https-idn", "https://bücher.example/"),
    ("https-at-in-path", "https://example.com/users/@alice"),
    ("mailto", "mailto:someone@example.com?subject=Hi"),
    ("mailto-bare", "mailto:"),
]

# (id, url, expected reason) — under the default binding (https, mailto; no deep link).
HOSTILE_LINKS: list[tuple[str, Any, Reason]] = [
    ("javascript", "javascript:alert(1)", Reason.SCHEME_NOT_ALLOWED),
    ("javascript-mixed-case", "JaVaScRiPt:alert(1)", Reason.SCHEME_NOT_ALLOWED),
    ("javascript-upper", "JAVASCRIPT:alert(document.cookie)", Reason.SCHEME_NOT_ALLOWED),
    ("javascript-slashes", "javascript://example.com/%0Aalert(1)", Reason.SCHEME_NOT_ALLOWED),
    ("javascript-leading-space", " javascript:alert(1)", Reason.INVALID_URL),
    ("javascript-trailing-space-scheme", "javascript :alert(1)", Reason.INVALID_URL),
    ("javascript-newline", "java\nscript:alert(1)", Reason.INVALID_URL),
    ("javascript-tab", "java\tscript:alert(1)", Reason.INVALID_URL),
    ("javascript-cr", "java\rscript:alert(1)", Reason.INVALID_URL),
    ("javascript-nul-prefix", "\x00javascript:alert(1)", Reason.INVALID_URL),
    ("javascript-nul-inside", "javascript\x00:alert(1)", Reason.INVALID_URL),
    ("javascript-zero-width-space", "java\u200bscript:alert(1)", Reason.INVALID_URL),
    ("javascript-bidi-override", "\u202ejavascript:alert(1)", Reason.INVALID_URL),
    ("javascript-nbsp", "\u00a0javascript:alert(1)", Reason.INVALID_URL),
    ("javascript-html-entity", "jav&#x09;ascript:alert(1)", Reason.INVALID_URL),
    ("javascript-percent-encoded-scheme", "%6Aavascript:alert(1)", Reason.INVALID_URL),
    ("javascript-fullwidth", "ｊａｖａｓｃｒｉｐｔ:alert(1)", Reason.INVALID_URL),
    ("javascript-fullwidth-colon", "javascript\uff1aalert(1)", Reason.INVALID_URL),
    ("vbscript", "vbscript:msgbox(1)", Reason.SCHEME_NOT_ALLOWED),
    ("data-html", "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==", Reason.SCHEME_NOT_ALLOWED),
    ("data-upper", "DATA:text/html,<script>alert(1)</script>", Reason.SCHEME_NOT_ALLOWED),
    ("file", "file:///etc/passwd", Reason.SCHEME_NOT_ALLOWED),
    ("blob", "blob:https://example.com/550e8400-e29b-41d4-a716-446655440000", Reason.SCHEME_NOT_ALLOWED),
    ("about", "about:blank", Reason.SCHEME_NOT_ALLOWED),
    ("chrome", "chrome://settings", Reason.SCHEME_NOT_ALLOWED),
    ("chrome-extension", "chrome-extension://abc/page.html", Reason.SCHEME_NOT_ALLOWED),
    ("view-source", "view-source:https://example.com", Reason.SCHEME_NOT_ALLOWED),
    ("filesystem", "filesystem:https://example.com/temporary/x", Reason.SCHEME_NOT_ALLOWED),
    ("http-not-configured", "http://example.com", Reason.SCHEME_NOT_ALLOWED),
    ("ftp", "ftp://example.com/file", Reason.SCHEME_NOT_ALLOWED),
    ("tel-not-configured", "tel:+15555550100", Reason.SCHEME_NOT_ALLOWED),
    ("deep-link-not-configured", "figma://file/123", Reason.SCHEME_NOT_ALLOWED),
    ("scheme-relative", "//evil.example/path", Reason.INVALID_URL),
    ("relative-path", "/settings", Reason.INVALID_URL),
    ("no-scheme", "evil.example", Reason.INVALID_URL),
    ("empty", "", Reason.INVALID_URL),
    ("none", None, Reason.INVALID_URL),
    ("not-a-string", {"href": "https://example.com"}, Reason.INVALID_URL),
    ("too-long", "https://example.com/" + "a" * 9000, Reason.INVALID_URL),
    ("https-credentials", "https://bank.example@evil.example/", Reason.INVALID_URL),
    ("https-user-password", "https://user:pass@example.com/", Reason.INVALID_URL),
    ("https-no-slashes", "https:evil.example", Reason.INVALID_URL),
    ("https-no-host", "https:///path", Reason.INVALID_URL),
    ("https-bad-port", "https://example.com:99999/", Reason.INVALID_URL),
    ("https-backslash", "https://example.com\\@evil.example", Reason.INVALID_URL),
    ("https-backslashes-host", "https:\\\\evil.example", Reason.INVALID_URL),
    ("https-backslash-in-path", "https://example.com/a\\b", Reason.INVALID_URL),
    ("https-space-in-host", "https://exa mple.com", Reason.INVALID_URL),
    ("https-trailing-newline", "https://example.com\n", Reason.INVALID_URL),
    ("https-del-char", "https://example.com/\x7f", Reason.INVALID_URL),
]  # fmt: skip

FIGMA_BINDING = binding(deep_link_protocol="figma")
HTTP_BINDING = binding(allowed_link_schemes={"https", "http", "mailto"})
HOSTILE_CONFIG_BINDING = binding(
    allowed_link_schemes={"https", "javascript", "data", "file", "vbscript", "blob", "about"},
    deep_link_protocol="javascript",
)


def link_cases() -> list[Any]:
    rows = [
        case(
            f"link-allowed-{name}",
            actor=app(),
            action=act(K.UI_OPEN_LINK, url=url),
            expect=OK,
        )
        for name, url in ALLOWED_LINKS
    ]
    rows += [
        case(
            f"link-hostile-{name}",
            actor=app(),
            action=act(K.UI_OPEN_LINK, url=url),
            expect=(DENY, reason),
        )
        for name, url, reason in HOSTILE_LINKS
    ]
    rows += [
        case(
            "link-deep-link-configured",
            actor=app(),
            action=act(K.UI_OPEN_LINK, url="figma://file/123"),
            binding=FIGMA_BINDING,
            expect=OK,
        ),
        case(
            "link-deep-link-configured-with-suffix",
            actor=app(),
            action=act(K.UI_OPEN_LINK, url="FIGMA://file/123"),
            binding=binding(deep_link_protocol="Figma://"),
            expect=OK,
        ),
        case(
            "link-deep-link-blank",
            actor=app(),
            action=act(K.UI_OPEN_LINK, url="figma://file/123"),
            binding=binding(deep_link_protocol=""),
            expect=(DENY, Reason.SCHEME_NOT_ALLOWED),
        ),
        case(
            "link-deep-link-other-app",
            actor=app(),
            action=act(K.UI_OPEN_LINK, url="slack://open"),
            binding=FIGMA_BINDING,
            expect=(DENY, Reason.SCHEME_NOT_ALLOWED),
        ),
        case(
            "link-https-still-allowed-with-deep-link",
            actor=app(),
            action=act(K.UI_OPEN_LINK, url="https://figma.com/file/1"),
            binding=FIGMA_BINDING,
            expect=OK,
        ),
        case(
            "link-http-configured",
            actor=app(),
            action=act(K.UI_OPEN_LINK, url="http://intranet.example/"),
            binding=HTTP_BINDING,
            expect=OK,
        ),
        case(
            "link-http-configured-still-needs-host",
            actor=app(),
            action=act(K.UI_OPEN_LINK, url="http:intranet"),
            binding=HTTP_BINDING,
            expect=(DENY, Reason.INVALID_URL),
        ),
        case(
            "link-tel-configured",
            actor=app(),
            action=act(K.UI_OPEN_LINK, url="tel:+15555550100"),
            binding=binding(allowed_link_schemes={"https", "tel:"}),
            expect=OK,
        ),
        case(
            "link-mailto-removed-by-admin",
            actor=app(),
            action=act(K.UI_OPEN_LINK, url="mailto:a@example.com"),
            binding=binding(allowed_link_schemes={"https"}),
            expect=(DENY, Reason.SCHEME_NOT_ALLOWED),
        ),
        case(
            "link-no-schemes-configured",
            actor=app(),
            action=act(K.UI_OPEN_LINK, url="https://example.com"),
            binding=binding(allowed_link_schemes=frozenset()),
            expect=(DENY, Reason.SCHEME_NOT_ALLOWED),
        ),
        case(
            "link-invalid-configured-schemes-are-dropped",
            actor=app(),
            action=act(K.UI_OPEN_LINK, url="https://example.com"),
            binding=binding(allowed_link_schemes={"https", "not a scheme", "", 42}),
            expect=OK,
        ),
    ]
    for blocked in ("javascript:alert(1)", "data:text/html,x", "file:///etc/passwd", "about:x"):
        rows.append(
            case(
                f"link-configured-but-always-blocked-{blocked.split(':')[0]}",
                actor=app(),
                action=act(K.UI_OPEN_LINK, url=blocked),
                binding=HOSTILE_CONFIG_BINDING,
                expect=(DENY, Reason.SCHEME_NOT_ALLOWED),
            )
        )
    for kind in LINK_KINDS:
        rows.append(
            case(
                f"link-{kind}-javascript",
                actor=app(),
                action=act(kind, url="javascript:alert(1)"),
                expect=(DENY, Reason.SCHEME_NOT_ALLOWED),
            )
        )
        rows.append(
            case(
                f"link-{kind}-viewer-https",
                actor=app("viewer"),
                action=act(kind, url="https://example.com"),
                expect=OK,
            )
        )
        rows.append(
            case(
                f"link-{kind}-viewer-javascript",
                actor=app("viewer"),
                action=act(kind, url="javascript:alert(1)"),
                expect=(DENY, Reason.SCHEME_NOT_ALLOWED),
            )
        )
    return rows


# ----------------------------------------------------------------------- rate limit

RATE_LIMITED = (DENY, Reason.RATE_LIMITED)


def rate_limit_cases() -> list[Any]:
    rows = []
    for kind in MESSAGE_KINDS:
        for recent, expect in ((0, OK), (4, OK), (5, RATE_LIMITED), (6, RATE_LIMITED)):
            rows.append(
                case(
                    f"rate-{kind}-limit-5-recent-{recent}",
                    actor=app(),
                    action=act(kind, recent_ui_messages=recent),
                    binding=binding(ui_message_rate_limit=5),
                    expect=expect,
                )
            )
        rows.append(
            case(
                f"rate-{kind}-limit-0-turns-messages-off",
                actor=app(),
                action=act(kind, recent_ui_messages=0),
                binding=binding(ui_message_rate_limit=0),
                expect=RATE_LIMITED,
            )
        )
    rows += [
        case(
            "rate-default-limit-boundary-allowed",
            actor=app(),
            action=act(K.UI_MESSAGE, recent_ui_messages=5),
            expect=OK,
        ),
        case(
            "rate-default-limit-boundary-limited",
            actor=app(),
            action=act(K.UI_MESSAGE, recent_ui_messages=6),
            expect=RATE_LIMITED,
        ),
        case(
            "rate-not-applied-to-log-messages",
            actor=app(),
            action=act(K.LOG_MESSAGE, recent_ui_messages=1000),
            binding=binding(ui_message_rate_limit=0),
            expect=OK,
        ),
        case(
            "rate-not-applied-to-model-context",
            actor=app(),
            action=act(K.UI_UPDATE_MODEL_CONTEXT, recent_ui_messages=1000),
            binding=binding(ui_message_rate_limit=0),
            expect=OK,
        ),
        case(
            "rate-viewer-is-told-viewer-not-rate",
            actor=app("viewer"),
            action=act(K.UI_MESSAGE, recent_ui_messages=1000),
            expect=VIEWER_NO,
        ),
    ]
    return rows


# -------------------------------------------------------------------- display modes

NOT_DECLARED = (DENY, Reason.DISPLAY_MODE_NOT_DECLARED)
INVALID_MODE = (DENY, Reason.INVALID_DISPLAY_MODE)

DISPLAY_TABLE: list[tuple[str, Any, Any, tuple[Outcome, Reason]]] = [
    ("inline-nothing-declared", "inline", None, OK),
    ("fullscreen-nothing-declared", "fullscreen", None, OK),
    ("pip-nothing-declared", "pip", None, OK),
    ("pip-empty-declaration", "pip", (), OK),
    ("fullscreen-declared", "fullscreen", ("inline", "fullscreen"), OK),
    ("pip-declared", "pip", ("inline", "pip"), OK),
    ("fullscreen-not-declared", "fullscreen", ("inline",), NOT_DECLARED),
    ("pip-not-declared", "pip", ("inline", "fullscreen"), NOT_DECLARED),
    ("inline-only-junk-declared", "inline", ("huge",), NOT_DECLARED),
    ("uppercase", "FULLSCREEN", None, INVALID_MODE),
    ("unknown-mode", "maximized", None, INVALID_MODE),
    ("unknown-mode-even-if-declared", "modal", ("modal",), INVALID_MODE),
    ("missing-mode", None, None, INVALID_MODE),
    ("empty-mode", "", None, INVALID_MODE),
    ("non-string-mode", ["fullscreen"], None, INVALID_MODE),
    ("declaration-as-bare-string", "pip", "fullscreen", NOT_DECLARED),
    ("declaration-as-bare-string-matching", "pip", "pip", OK),
]


def display_cases() -> list[Any]:
    rows = [
        case(
            f"display-{name}",
            actor=app(),
            action=act(K.UI_REQUEST_DISPLAY_MODE, display_mode=mode, available_display_modes=avail),
            expect=expect,
        )
        for name, mode, avail, expect in DISPLAY_TABLE
    ]
    rows.append(
        case(
            "display-viewer-may-change-own-view",
            actor=app("viewer"),
            action=act(K.UI_REQUEST_DISPLAY_MODE, display_mode="pip"),
            expect=OK,
        )
    )
    return rows


# --------------------------------------------------------------------- widget state

WIDGET_CASES = [
    case("widget-owner", actor=app("owner"), action=act(K.WIDGET_STATE), expect=OK),
    case("widget-member", actor=app("member"), action=act(K.WIDGET_STATE), expect=OK),
    case("widget-viewer", actor=app("viewer"), action=act(K.WIDGET_STATE), expect=VIEWER_NO),
    case("widget-outsider", actor=app(None), action=act(K.WIDGET_STATE), expect=OUTSIDER_NO),
    case(
        "widget-thread-binding",
        actor=app(),
        action=act(K.WIDGET_STATE),
        binding=THREAD_BINDING,
        expect=OK,
    ),
    case(
        "widget-view-of-other-thread",
        actor=app(view_ref=view(thread_id=OTHER_THREAD_ID)),
        action=act(K.WIDGET_STATE),
        thread=THREAD,
        expect=(DENY, Reason.VIEW_NOT_IN_THREAD),
    ),
    case(
        "widget-request-for-other-thread-with-this-view",
        actor=app(),
        action=act(K.WIDGET_STATE),
        thread=OTHER_THREAD_SAME_WS,
        expect=(DENY, Reason.VIEW_NOT_IN_THREAD),
    ),
]

CASES = [
    *persona_cases(),
    *wrong_actor_cases(),
    *VIEW_CASES,
    *SCOPE_CASES,
    *TOOL_CASES,
    *VISIBILITY_CASES,
    *approval_cases(),
    *TOOL_LIST_CASES,
    *link_cases(),
    *rate_limit_cases(),
    *display_cases(),
    *WIDGET_CASES,
]


@pytest.mark.parametrize(
    ("actor", "thread", "binding", "tool", "policy", "action", "outcome", "reason"), CASES
)
def test_decide(
    actor: Actor,
    thread: ThreadRef,
    binding: BindingSnap | None,
    tool: ToolSnap | None,
    policy: PolicySnap | None,
    action: Action,
    outcome: Outcome,
    reason: Reason,
) -> None:
    decision = decide(
        actor=actor, thread=thread, binding=binding, tool=tool, policy=policy, action=action
    )
    assert (decision.outcome, decision.reason_code) == (outcome, reason), decision.message
    # Invariants every decision satisfies.
    assert decision.message
    assert decision.audit_event_type is event_type_for_action(action.kind)
    if decision.outcome is not Outcome.ALLOW:
        assert decision.approval_basis is None
    if decision.approval_basis is not None:  # only tool calls are approved
        assert decision.risk is not None
    if decision.reason_code in (Reason.POLICY_AUTO_APPROVED, Reason.ALLOWANCE):
        assert decision.risk in (Risk.WRITE, Risk.DESTRUCTIVE)
    if decision.reason_code is Reason.USER_INITIATED:  # also a read tool an admin set to ask
        assert decision.approval_basis is ApprovalBasis.SELF


def test_case_ids_are_unique() -> None:
    ids = [param.id for param in CASES]
    assert len(ids) == len(set(ids))


def test_every_action_kind_is_in_the_tables() -> None:
    assert set(PERSONA_MATRIX) == set(ActionKind)
    assert set(ALLOWED_ACTORS) == set(ActionKind)


def test_hostile_link_table_is_large() -> None:
    assert len(HOSTILE_LINKS) >= 20


def test_configured_blocked_scheme_is_explained_as_never_opened() -> None:
    decision = decide(
        actor=app(),
        thread=THREAD,
        binding=HOSTILE_CONFIG_BINDING,
        tool=None,
        policy=None,
        action=act(K.UI_OPEN_LINK, url="javascript:alert(1)"),
    )
    assert decision.reason_code is Reason.SCHEME_NOT_ALLOWED
    assert "never" in decision.message


@pytest.mark.parametrize(
    "url", [url for _, url, _ in HOSTILE_LINKS] + [u for _, u in ALLOWED_LINKS]
)
def test_link_aliases_agree(url: Any) -> None:
    """ui/open-link, legacy MCP-UI link and Apps SDK openExternal decide alike."""
    decisions = {
        decide(
            actor=app(),
            thread=THREAD,
            binding=WS_BINDING,
            tool=None,
            policy=None,
            action=act(kind, url=url),
        ).reason_code
        for kind in LINK_KINDS
    }
    assert len(decisions) == 1


# ----------------------------------------------------------------- approval flow


@pytest.mark.parametrize(
    ("initiator", "target"),
    [
        ("model", WRITE_TOOL),
        ("app_view", WRITE_TOOL),
        ("app_view", DESTRUCTIVE_TOOL),
        ("model", UNANNOTATED_TOOL),
    ],
)
def test_ask_then_approved_replay_is_allowed_and_audited_as_approved(
    initiator: str, target: ToolSnap
) -> None:
    kind = CALL_KIND_BY_INITIATOR[initiator]
    actor = ACTOR_FACTORIES[initiator]("member")
    request = call(kind, target)

    first = decide(
        actor=actor, thread=THREAD, binding=WS_BINDING, tool=target, policy=None, action=request
    )
    assert first.needs_approval
    assert first.audit_decision is Decision.PENDING
    assert first.reason_code is Reason.APPROVAL_REQUIRED

    replay = dataclasses.replace(request, approved=True)
    second = decide(
        actor=actor, thread=THREAD, binding=WS_BINDING, tool=target, policy=None, action=replay
    )
    assert second.allowed
    assert second.reason_code is Reason.APPROVED
    assert second.approval_basis is ApprovalBasis.GRANTED
    assert second.audit_decision is Decision.APPROVED
    assert second.risk is first.risk

    # The replay re-checks everything: a policy tightened in between wins.
    tightened = decide(
        actor=actor,
        thread=THREAD,
        binding=WS_BINDING,
        tool=target,
        policy=PolicySnap(approval="deny"),
        action=replay,
    )
    assert tightened.reason_code is Reason.POLICY_DENIES


@pytest.mark.parametrize("target", [WRITE_TOOL, DESTRUCTIVE_TOOL, UNANNOTATED_TOOL])
def test_user_call_is_its_own_consent(target: ToolSnap) -> None:
    decision = decide(
        actor=user(),
        thread=THREAD,
        binding=WS_BINDING,
        tool=target,
        policy=None,
        action=call(K.USER_TOOL_CALL, target),
    )
    assert decision.allowed and decision.self_approved
    assert decision.reason_code is Reason.USER_INITIATED
    assert decision.audit_decision is Decision.APPROVED
    assert decision.risk in (Risk.WRITE, Risk.DESTRUCTIVE)
    assert decision.audit_event_type is AuditEventType.TOOL_CALL_USER


def test_decision_carries_risk_visibility_and_event_type() -> None:
    decision = decide(
        actor=app(),
        thread=THREAD,
        binding=WS_BINDING,
        tool=DESTRUCTIVE_TOOL,
        policy=PolicySnap(visibility_override={"app"}),
        action=call(K.LEGACY_TOOL, DESTRUCTIVE_TOOL),
    )
    assert decision.outcome is Outcome.ASK
    assert decision.risk is Risk.DESTRUCTIVE
    assert decision.visibility == {Visibility.APP}
    assert decision.audit_event_type is AuditEventType.TOOL_CALL_APP


@pytest.mark.parametrize(
    ("outcome", "basis", "expected"),
    [
        (Outcome.ALLOW, None, Decision.ALLOWED),
        (Outcome.ALLOW, ApprovalBasis.POLICY, Decision.ALLOWED),
        (Outcome.ALLOW, ApprovalBasis.SELF, Decision.APPROVED),
        (Outcome.ALLOW, ApprovalBasis.GRANTED, Decision.APPROVED),
        (Outcome.DENY, None, Decision.DENIED),
        (Outcome.ASK, None, Decision.PENDING),
    ],
)
def test_audit_decision(outcome: Outcome, basis: ApprovalBasis | None, expected: Decision) -> None:
    decision = PolicyDecision(
        outcome=outcome,
        reason_code=Reason.OK,
        message="m",
        audit_event_type=AuditEventType.TOOL_CALL_APP,
        approval_basis=basis,
    )
    assert decision.audit_decision is expected


# --------------------------------------------------------------- risk derivation

RISK_TABLE: list[tuple[str, Any, Risk]] = [
    ("none", None, Risk.DESTRUCTIVE),
    ("empty", {}, Risk.DESTRUCTIVE),
    ("not-a-mapping", ["readOnlyHint"], Risk.DESTRUCTIVE),
    ("read-only", {"readOnlyHint": True}, Risk.READ),
    ("read-only-destructive-false", {"readOnlyHint": True, "destructiveHint": False}, Risk.READ),
    ("read-only-contradicted-by-destructive", {"readOnlyHint": True, "destructiveHint": True}, Risk.DESTRUCTIVE),
    ("not-read-only", {"readOnlyHint": False}, Risk.DESTRUCTIVE),
    ("not-destructive", {"destructiveHint": False}, Risk.WRITE),
    ("write", {"readOnlyHint": False, "destructiveHint": False}, Risk.WRITE),
    ("destructive", {"destructiveHint": True}, Risk.DESTRUCTIVE),
    ("idempotent-only", {"idempotentHint": True}, Risk.DESTRUCTIVE),
    ("open-world-only", {"openWorldHint": False}, Risk.DESTRUCTIVE),
    ("idempotent-write", {"destructiveHint": False, "idempotentHint": True}, Risk.WRITE),
    ("string-true-is-not-true", {"readOnlyHint": "true"}, Risk.DESTRUCTIVE),
    ("one-is-not-true", {"readOnlyHint": 1}, Risk.DESTRUCTIVE),
    ("string-false-is-not-false", {"destructiveHint": "false"}, Risk.DESTRUCTIVE),
    ("zero-is-not-false", {"destructiveHint": 0}, Risk.DESTRUCTIVE),
]  # fmt: skip


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [pytest.param(a, r, id=i) for i, a, r in RISK_TABLE],
)
def test_derive_risk(annotations: Any, expected: Risk) -> None:
    assert derive_risk(annotations) is expected


@pytest.mark.parametrize(
    ("annotations", "override", "expected"),
    [
        (READ_ONLY, None, Risk.READ),
        (READ_ONLY, "destructive", Risk.DESTRUCTIVE),
        ({}, "read", Risk.READ),
        (DESTRUCTIVE, "write", Risk.WRITE),
        (WRITE, "", Risk.WRITE),
    ],
)
def test_effective_risk(annotations: dict[str, Any], override: str | None, expected: Risk) -> None:
    target = tool(annotations=annotations)
    assert effective_risk(target, PolicySnap(risk=override)) is expected
    assert effective_risk(target, None) is derive_risk(annotations)


DEFAULT_APPROVAL_TABLE = [
    ("read", "user", "auto"),
    ("read", "model", "auto"),
    ("read", "app_view", "auto"),
    ("write", "user", "auto"),
    ("write", "model", "ask"),
    ("write", "app_view", "ask"),
    ("destructive", "user", "auto"),
    ("destructive", "model", "ask"),
    ("destructive", "app_view", "ask"),
]


@pytest.mark.parametrize(("risk", "initiator", "expected"), DEFAULT_APPROVAL_TABLE)
def test_default_approval(risk: str, initiator: str, expected: str) -> None:
    assert default_approval(Risk(risk), ActorKind(initiator)) is Approval(expected)


# ------------------------------------------------------------------- visibility

VISIBILITY_TABLE: list[tuple[str, set[str], set[str] | None, set[str]]] = [
    ("default-both", {"model", "app"}, None, {"model", "app"}),
    ("app-only", {"app"}, None, {"app"}),
    ("model-only", {"model"}, None, {"model"}),
    ("narrow-to-app", {"model", "app"}, {"app"}, {"app"}),
    ("narrow-to-model", {"model", "app"}, {"model"}, {"model"}),
    ("narrow-to-nothing", {"model", "app"}, set(), set()),
    ("cannot-widen-app-only", {"app"}, {"model", "app"}, {"app"}),
    ("cannot-add-model", {"app"}, {"model"}, set()),
    ("cannot-add-app", {"model"}, {"app"}, set()),
    ("junk-from-server-ignored", {"model", "root", "APP"}, None, {"model"}),
    ("junk-in-override-dropped", {"model", "app"}, {"app", "everything"}, {"app"}),
    ("nothing-declared", set(), None, set()),
]


@pytest.mark.parametrize(
    ("declared", "override", "expected"),
    [pytest.param(d, o, e, id=i) for i, d, o, e in VISIBILITY_TABLE],
)
def test_effective_visibility(
    declared: set[str], override: set[str] | None, expected: set[str]
) -> None:
    policy = None if override is None else PolicySnap(visibility_override=override)
    assert effective_visibility(tool(visibility=declared), policy) == expected


# ---------------------------------------------------------------- snapshots


def test_snapshots_coerce_strings_to_enums() -> None:
    actor = Actor(kind="app_view", user_id=1, role="viewer", view=VIEW)
    assert actor.kind is ActorKind.APP_VIEW and actor.role is Role.VIEWER
    policy = PolicySnap(risk="write", approval="ask", visibility_override=["app"])
    assert policy.risk is Risk.WRITE and policy.approval is Approval.ASK
    assert policy.visibility_override == frozenset({Visibility.APP})
    assert PolicySnap(risk="", approval="").risk is None
    assert act("ui_message").kind is K.UI_MESSAGE


def test_binding_snapshot_normalizes_schemes() -> None:
    snap = binding(
        allowed_link_schemes=["HTTPS:", "Mailto", "bad scheme"], deep_link_protocol="Figma://"
    )
    assert snap.allowed_link_schemes == {"https", "mailto"}
    assert snap.deep_link_protocol == "figma"
    assert snap.link_schemes == {"https", "mailto", "figma"}
    assert binding(deep_link_protocol="").deep_link_protocol is None
    assert binding(allowed_link_schemes={"https", "javascript"}).link_schemes == {"https"}


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: Actor(kind="robot", user_id=1, role="member"), id="bad-actor-kind"),
        pytest.param(lambda: Actor(kind="user", user_id=1, role="admin"), id="bad-role"),
        pytest.param(lambda: binding(scope="galaxy"), id="bad-scope"),
        pytest.param(lambda: binding(scope="thread", thread_id=None), id="thread-scope-no-thread"),
        pytest.param(lambda: binding(thread_id=THREAD_ID), id="workspace-scope-with-thread"),
        pytest.param(lambda: binding(ui_message_rate_limit=-1), id="negative-rate-limit"),
        pytest.param(lambda: PolicySnap(risk="catastrophic"), id="bad-risk"),
        pytest.param(lambda: PolicySnap(approval="maybe"), id="bad-approval"),
        pytest.param(lambda: act("teleport"), id="bad-action-kind"),
        pytest.param(lambda: act(K.UI_MESSAGE, recent_ui_messages=-1), id="negative-count"),
    ],
)
def test_snapshots_reject_values_outside_their_sets(build: Any) -> None:
    with pytest.raises(ValueError):
        build()


def test_snapshots_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        WS_BINDING.enabled = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        READ_TOOL.annotations["readOnlyHint"] = False  # type: ignore[index]


# ---------------------------------------------------------------- property test

HOSTILE_PREFIXES = ["javascript:", "data:", "file:", "vbscript:", "blob:", "about:", "http:", ""]


@given(
    prefix=st.sampled_from(HOSTILE_PREFIXES + ["https://", "mailto:", " ", "\t"]),
    rest=st.text(max_size=60),
    kind=st.sampled_from(LINK_KINDS),
)
def test_only_allowed_schemes_ever_open(prefix: str, rest: str, kind: ActionKind) -> None:
    url = prefix + rest
    decision = decide(
        actor=app(),
        thread=THREAD,
        binding=WS_BINDING,
        tool=None,
        policy=None,
        action=act(kind, url=url),
    )
    if decision.allowed:
        scheme = url.split(":", 1)[0].lower()
        assert scheme in {"https", "mailto"}
        assert url == url.strip() and "\n" not in url and "\t" not in url


# --------------------------------------------------------------------- events


def test_every_action_kind_has_an_event_type() -> None:
    for kind in ActionKind:
        assert isinstance(event_type_for_action(kind), AuditEventType)
        assert kind.audit_event_type is event_type_for_action(kind.value)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (K.MODEL_TOOL_CALL, AuditEventType.TOOL_CALL_MODEL),
        (K.USER_TOOL_CALL, AuditEventType.TOOL_CALL_USER),
        (K.APP_TOOL_CALL, AuditEventType.TOOL_CALL_APP),
        (K.LEGACY_TOOL, AuditEventType.TOOL_CALL_APP),
        (K.APPS_SDK_CALL_TOOL, AuditEventType.TOOL_CALL_APP),
        (K.MODEL_TOOL_LIST, AuditEventType.TOOLS_OFFERED_TO_MODEL),
        (K.RESOURCE_READ, AuditEventType.RESOURCE_READ),
        (K.UI_MESSAGE, AuditEventType.UI_MESSAGE),
        (K.LEGACY_PROMPT, AuditEventType.UI_MESSAGE),
        (K.LEGACY_INTENT, AuditEventType.UI_MESSAGE),
        (K.APPS_SDK_FOLLOW_UP, AuditEventType.UI_MESSAGE),
        (K.UI_UPDATE_MODEL_CONTEXT, AuditEventType.UI_UPDATE_MODEL_CONTEXT),
        (K.UI_OPEN_LINK, AuditEventType.UI_OPEN_LINK),
        (K.LEGACY_LINK, AuditEventType.UI_OPEN_LINK),
        (K.APPS_SDK_OPEN_EXTERNAL, AuditEventType.UI_OPEN_LINK),
        (K.UI_REQUEST_DISPLAY_MODE, AuditEventType.UI_REQUEST_DISPLAY_MODE),
        (K.UI_DOWNLOAD_FILE, AuditEventType.UI_DOWNLOAD_FILE),
        (K.LOG_MESSAGE, AuditEventType.VIEW_LOG_MESSAGE),
        (K.LEGACY_NOTIFY, AuditEventType.VIEW_LOG_MESSAGE),
        (K.WIDGET_STATE, AuditEventType.WIDGET_STATE_SET),
    ],
)
def test_event_type_for_action(kind: ActionKind, expected: AuditEventType) -> None:
    assert event_type_for_action(kind) is expected


def test_event_type_for_unknown_action_raises() -> None:
    with pytest.raises(ValueError):
        event_type_for_action("teleport")


def test_reason_codes_are_snake_case() -> None:
    for reason in Reason:
        assert reason.value == reason.name.lower()


def test_always_blocked_schemes_cover_the_classics() -> None:
    assert {"javascript", "data", "file", "vbscript", "blob", "about", "chrome"} <= (
        ALWAYS_BLOCKED_SCHEMES
    )


# ------------------------------------------------------------------- allowances

THREAD_ALLOWANCE = AllowanceSnap(
    id=1, binding_id=BINDING_ID, tool_name="echo", scope="thread", workspace_id=WS,
    thread_id=THREAD_ID,
)  # fmt: skip
WS_ALLOWANCE = AllowanceSnap(
    id=2, binding_id=BINDING_ID, tool_name="echo", scope="workspace", workspace_id=WS
)
ALLOWED_BY_IT = (ALLOW, Reason.ALLOWANCE)


def allowance(base: AllowanceSnap = THREAD_ALLOWANCE, **changes: Any) -> AllowanceSnap:
    return dataclasses.replace(base, **changes)


# (case, allowance, tool, initiator, thread, policy, expected)
ALLOWANCE_TABLE: list[tuple[str, AllowanceSnap | None, ToolSnap, str, ThreadRef, PolicySnap | None, tuple[Outcome, Reason]]] = [
    ("none-app-asks", None, UNANNOTATED_TOOL, "app_view", THREAD, None, NEEDS_APPROVAL),
    ("thread-app", THREAD_ALLOWANCE, UNANNOTATED_TOOL, "app_view", THREAD, None, ALLOWED_BY_IT),
    ("thread-model", THREAD_ALLOWANCE, UNANNOTATED_TOOL, "model", THREAD, None, ALLOWED_BY_IT),
    ("thread-other-thread-asks", THREAD_ALLOWANCE, UNANNOTATED_TOOL, "model", OTHER_THREAD_SAME_WS, None, NEEDS_APPROVAL),
    ("workspace-other-thread", WS_ALLOWANCE, UNANNOTATED_TOOL, "model", OTHER_THREAD_SAME_WS, None, ALLOWED_BY_IT),
    ("workspace-of-another-workspace-asks", allowance(WS_ALLOWANCE, workspace_id=OTHER_WS), UNANNOTATED_TOOL, "model", THREAD, None, NEEDS_APPROVAL),
    ("other-tool-asks", allowance(tool_name="other"), UNANNOTATED_TOOL, "app_view", THREAD, None, NEEDS_APPROVAL),
    ("other-binding-asks", allowance(binding_id=OTHER_BINDING_ID), UNANNOTATED_TOOL, "app_view", THREAD, None, NEEDS_APPROVAL),
    ("write-tool", allowance(tool_name="rename_item"), WRITE_TOOL, "app_view", THREAD, None, ALLOWED_BY_IT),
    ("declared-destructive-never", allowance(tool_name="delete_item"), DESTRUCTIVE_TOOL, "app_view", THREAD, None, NEEDS_APPROVAL),
    ("admin-ask-wins", THREAD_ALLOWANCE, UNANNOTATED_TOOL, "app_view", THREAD, PolicySnap(approval="ask"), NEEDS_APPROVAL),
    ("admin-deny-wins", THREAD_ALLOWANCE, UNANNOTATED_TOOL, "app_view", THREAD, PolicySnap(approval="deny"), POLICY_DENIES),
    ("admin-risk-override-still-allowed", THREAD_ALLOWANCE, UNANNOTATED_TOOL, "app_view", THREAD, PolicySnap(risk="write"), ALLOWED_BY_IT),
    ("read-needs-none", THREAD_ALLOWANCE, READ_TOOL, "app_view", THREAD, None, OK),
]  # fmt: skip


@pytest.mark.parametrize(
    ("allowed", "target", "initiator", "where", "rule", "expected"),
    [pytest.param(*row[1:], id=row[0]) for row in ALLOWANCE_TABLE],
)
def test_allowance_decides_only_the_calls_it_covers(
    allowed: AllowanceSnap | None,
    target: ToolSnap,
    initiator: str,
    where: ThreadRef,
    rule: PolicySnap | None,
    expected: tuple[Outcome, Reason],
) -> None:
    actor = ACTOR_FACTORIES[initiator]("member")
    if initiator == "app_view":
        actor = app("member", view(thread_id=where.id))
    decision = decide(
        actor=actor,
        thread=where,
        binding=WS_BINDING,
        tool=target,
        policy=rule,
        action=call(CALL_KIND_BY_INITIATOR[initiator], target),
        allowance=allowed,
    )
    assert (decision.outcome, decision.reason_code) == expected, decision.message
    if expected == ALLOWED_BY_IT:
        assert decision.approval_basis is ApprovalBasis.ALLOWANCE
        assert decision.audit_decision is Decision.APPROVED


def test_allowance_does_not_let_a_viewer_act() -> None:
    decision = decide(
        actor=app("viewer"),
        thread=THREAD,
        binding=WS_BINDING,
        tool=UNANNOTATED_TOOL,
        policy=None,
        action=call(K.APP_TOOL_CALL, UNANNOTATED_TOOL),
        allowance=THREAD_ALLOWANCE,
    )
    assert decision.reason_code is Reason.VIEWER_CANNOT_ACT


def test_allowance_scope_names_its_thread() -> None:
    with pytest.raises(ValueError):
        AllowanceSnap(id=3, binding_id=1, tool_name="x", scope="thread", workspace_id=WS)
    with pytest.raises(ValueError):
        AllowanceSnap(
            id=3, binding_id=1, tool_name="x", scope="workspace", workspace_id=WS, thread_id=1
        )


BOTH = ("thread", "workspace")
# (case, role, tool, policy, binding, expected scopes)
GRANTABLE_TABLE = [
    ("owner-unannotated", "owner", UNANNOTATED_TOOL, None, WS_BINDING, BOTH),
    ("owner-write", "owner", WRITE_TOOL, None, WS_BINDING, BOTH),
    ("owner-read", "owner", READ_TOOL, None, WS_BINDING, BOTH),
    ("owner-declared-destructive", "owner", DESTRUCTIVE_TOOL, None, WS_BINDING, ()),
    ("owner-admin-ask", "owner", WRITE_TOOL, PolicySnap(approval="ask"), WS_BINDING, ()),
    ("owner-admin-deny", "owner", WRITE_TOOL, PolicySnap(approval="deny"), WS_BINDING, ()),
    ("owner-thread-binding", "owner", WRITE_TOOL, None, THREAD_BINDING, ("thread",)),
    ("owner-risk-override-keeps-hint", "owner", DESTRUCTIVE_TOOL, PolicySnap(risk="write"), WS_BINDING, ()),
    ("member-unannotated", "member", UNANNOTATED_TOOL, None, WS_BINDING, ("thread",)),
    ("member-declared-destructive", "member", DESTRUCTIVE_TOOL, None, WS_BINDING, ()),
    ("viewer", "viewer", UNANNOTATED_TOOL, None, WS_BINDING, ()),
    ("outsider", None, UNANNOTATED_TOOL, None, WS_BINDING, ()),
]  # fmt: skip


@pytest.mark.parametrize(
    ("role", "target", "rule", "bound", "expected"),
    [pytest.param(*row[1:], id=row[0]) for row in GRANTABLE_TABLE],
)
def test_grantable_scopes(
    role: str | None,
    target: ToolSnap,
    rule: PolicySnap | None,
    bound: BindingSnap,
    expected: tuple[str, ...],
) -> None:
    scopes = grantable_scopes(tool=target, policy=rule, binding=bound, role=role)
    assert tuple(str(s) for s in scopes) == expected
