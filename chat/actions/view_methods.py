"""The view bridge's methods: one declarative table (DESIGN §2 and §7, docs/view-bridge.md).

A row is one method a view sends its host: a request (answered) or a notification, and
who handles it — the server (the browser forwards it as ``view.request`` / ``view.notify``
and the server decides) or the browser alone (``side="host"``: the handshake, size and
Esc reports; the server never sees them). From the rows derive:

- dispatch: ``chat/actions/app_views.py`` binds a handler to each server row (``handles``)
  and finds the row of a message with :func:`view_method` (aliases included);
- the policy kind a request is decided and audited as (``kind``), per compatibility layer
  (``compat``: MCP-UI actions and the Apps SDK send ``params._compat``); the audit event
  type is the kind's (``ActionKind.audit_event_type``);
- the rate buckets beyond the bridge's own two (:data:`RATE_LIMITS`: names and defaults;
  ``settings.ATRIUM_RATE_LIMITS`` overrides them);
- the browser's own copy, ``static/chat/app_views/methods.js``, which
  ``tests/chat/test_view_methods.py`` checks against this one.

Adding a method is a row here and in methods.js, its handler, and its test.
Pure: no Django imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from bindings.policy import ActionKind

Message = Literal["request", "notification"]
Side = Literal["server", "host"]


@dataclass(frozen=True)
class RateBucket:
    """A token bucket (``bindings.ratelimit``) a method's requests also take from."""

    name: str
    per: Literal["view", "user"]  # one bucket per view, or per person across their views
    what: str  # the refusal says "Too many <what>; try again in …"
    # (burst, tokens per second); None when the bucket is not the bridge's own and its
    # default lives in settings (``tool_call`` also paces /call and the tool picker).
    default: tuple[int, float] | None = None


# Every message of a view, and of a person's views together, takes from these first
# (before any database work); view.open takes from the person's too.
VIEW_REQUEST = RateBucket("view_request", "view", "requests from this view", (60, 20.0))
USER_VIEW_REQUEST = RateBucket("user_view_request", "user", "requests from this view", (120, 40.0))
TOOL_CALLS = RateBucket("tool_call", "user", "tool calls")
MODEL_CONTEXT = RateBucket("view_model_context", "view", "model context updates", (20, 2.0))
WIDGET_STATE = RateBucket("view_widget_state", "view", "widget state updates", (20, 2.0))
# Draft spec (issue 27): a view's sampling runs on the workspace's model, after consent.
VIEW_SAMPLING = RateBucket("view_sampling", "view", "sampling requests", (5, 0.1))
# Issue 26 part 4 (chat.media.view_files): files a view uploads, saves or has chosen, and
# the links it asks for.
VIEW_FILES = RateBucket("view_files", "view", "file requests", (10, 0.2))
VIEW_FILE_LINKS = RateBucket("view_file_link", "view", "file links", (30, 1.0))


@dataclass(frozen=True)
class ViewMethod:
    """One row: a method a view sends, and everything the host derives from it."""

    name: str
    message: Message
    side: Side = "server"
    # What the policy decides (and the audit log records) it as; None: no policy decision
    # (``ping``, size and teardown reports: the socket, session and token are still checked).
    kind: ActionKind | None = None
    # params._compat → the kind a compatibility layer's request is decided as instead.
    compat: Mapping[str, ActionKind] = field(default_factory=dict)
    # Other names of the same method (the draft spec's renames).
    aliases: tuple[str, ...] = ()
    bucket: RateBucket | None = None
    # Answered from a task (it may wait for an approval): the socket stays free meanwhile.
    deferred: bool = False

    def kind_for(self, params: Mapping[str, Any]) -> ActionKind | None:
        """The kind this request is decided as, given where it came from (``_compat``)."""
        compat = params.get("_compat")
        return self.compat.get(compat if isinstance(compat, str) else "", self.kind)


def _server_request(name: str, kind: ActionKind | None = None, **row: Any) -> ViewMethod:
    return ViewMethod(name, "request", "server", kind, **row)


_RESOURCE_READ = ActionKind.RESOURCE_READ

VIEW_METHODS: tuple[ViewMethod, ...] = (
    # Requests the server answers (view.request).
    _server_request(
        "tools/call",
        ActionKind.APP_TOOL_CALL,
        compat={"legacy": ActionKind.LEGACY_TOOL, "openai": ActionKind.APPS_SDK_CALL_TOOL},
        bucket=TOOL_CALLS,  # taken with the view's two, in one trip (app_views.view_request)
        deferred=True,
    ),
    _server_request("resources/read", _RESOURCE_READ),
    _server_request("resources/list", _RESOURCE_READ),
    _server_request("resources/templates/list", _RESOURCE_READ),
    _server_request("prompts/list", _RESOURCE_READ),
    _server_request(
        "ui/message",
        ActionKind.UI_MESSAGE,
        compat={
            "legacy": ActionKind.LEGACY_PROMPT,
            "legacy-intent": ActionKind.LEGACY_INTENT,
            "openai": ActionKind.APPS_SDK_FOLLOW_UP,
        },
    ),
    _server_request(
        "ui/update-model-context", ActionKind.UI_UPDATE_MODEL_CONTEXT, bucket=MODEL_CONTEXT
    ),
    _server_request(
        "ui/open-link",
        ActionKind.UI_OPEN_LINK,
        compat={"legacy": ActionKind.LEGACY_LINK, "openai": ActionKind.APPS_SDK_OPEN_EXTERNAL},
    ),
    _server_request("ui/request-display-mode", ActionKind.UI_REQUEST_DISPLAY_MODE),
    # Saved as a file of the thread ("<app> saved report.csv"), members only.
    _server_request("ui/download-file", ActionKind.VIEW_FILE_SAVE, bucket=VIEW_FILES),
    _server_request("atrium/setWidgetState", ActionKind.WIDGET_STATE, bucket=WIDGET_STATE),
    _server_request("openai/requestModal", ActionKind.APPS_SDK_REQUEST_MODAL),
    # Apps SDK setOpenInAppUrl: the host's "Open in <app>" link, decided as a link
    # (https only, then the binding's schemes), audited with extra.openInApp.
    _server_request("openai/setOpenInAppUrl", ActionKind.APPS_SDK_OPEN_EXTERNAL),
    # Apps SDK files (issue 26 part 4, chat.media.view_files): the host sends the body of an
    # upload itself, and shows its own chooser for selectFiles (file_chooser.js).
    _server_request("openai/uploadFile", ActionKind.VIEW_FILE_UPLOAD, bucket=VIEW_FILES),
    _server_request("openai/getFileDownloadUrl", ActionKind.VIEW_FILE_LINK, bucket=VIEW_FILE_LINKS),
    _server_request("openai/selectFiles", ActionKind.VIEW_FILES_SELECT, bucket=VIEW_FILES),
    _server_request("ping"),
    # Draft spec (chat/view_tools, chat/actions/view_tools.py): consent card, then the model.
    _server_request(
        "sampling/createMessage", ActionKind.VIEW_SAMPLING, bucket=VIEW_SAMPLING, deferred=True
    ),
    # Notifications the browser forwards (view.notify); only the log is recorded.
    ViewMethod(
        "notifications/message",
        "notification",
        kind=ActionKind.LOG_MESSAGE,
        compat={"legacy": ActionKind.LEGACY_NOTIFY},
        aliases=("ui/log",),  # the draft spec's name
    ),
    ViewMethod("ui/notifications/size-changed", "notification"),
    ViewMethod("ui/notifications/request-teardown", "notification"),
    # Handled by the browser alone.
    ViewMethod("ui/initialize", "request", "host"),
    ViewMethod("ui/notifications/sandbox-proxy-ready", "notification", "host"),
    ViewMethod("ui/notifications/initialized", "notification", "host"),
    # Esc inside the frame, relayed by the proxy: it only leaves full screen.
    ViewMethod("ui/notifications/sandbox-escape", "notification", "host"),
    # The view's own tools changed: the browser lists them again (view_tools.js).
    ViewMethod("notifications/tools/list_changed", "notification", "host"),
)

_BY_NAME: Mapping[tuple[Message, str], ViewMethod] = MappingProxyType(
    {(row.message, name): row for row in VIEW_METHODS for name in (row.name, *row.aliases)}
)


def view_method(name: str, message: Message) -> ViewMethod | None:
    """The row of a request or notification named ``name`` (or one of its aliases)."""
    return _BY_NAME.get((message, name))


# The defaults of the bridge's own buckets (bindings.ratelimit: kind → (burst, rate)).
RATE_LIMITS: Mapping[str, tuple[int, float]] = MappingProxyType(
    {
        bucket.name: bucket.default
        for bucket in (
            VIEW_REQUEST,
            USER_VIEW_REQUEST,
            *(row.bucket for row in VIEW_METHODS if row.bucket),
        )
        if bucket.default is not None
    }
)
