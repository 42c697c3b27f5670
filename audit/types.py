"""Audit event types and audit decisions.

Every row of the append-only audit log (``audit.AuditEvent``) carries one
``AuditEventType`` and one ``Decision``. Event types are numbered in ranges so
that reports can group them by the hundreds digit:

====  =========================================================
1xx   foundation: workspaces, membership, threads, messages, sockets
2xx   MCP servers and their catalogue (tools, UI resources, CSP)
3xx   tool calls (who initiated them, and how they ended)
4xx   view actions (everything an app view asks the host to do)
5xx   approvals of risky tool calls; allowances (remembered consent)
6xx   administration of app bindings and tool policies
7xx   media persisted from tool results
8xx   sign-in to MCP servers (OAuth grants, and the grant each call used)
9xx   requests a server sends to a person: elicitation, sampling consent
====  =========================================================

Numbers are stored in the database: never renumber or reuse a value; add new
members inside the right range instead.

This module is pure Python (no Django imports) so that the pure policy engine
(``bindings.policy``, which maps each action kind to its event type) and any app may
import it.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum

__all__ = [
    "AuditEventType",
    "Decision",
    "EventCategory",
]


class EventCategory(StrEnum):
    """The range an event type belongs to (its hundreds digit)."""

    FOUNDATION = "foundation"
    MCP = "mcp"
    TOOL = "tool"
    VIEW = "view"
    APPROVAL = "approval"
    BINDING = "binding"
    MEDIA = "media"
    AUTH = "auth"
    SERVER_REQUEST = "server_request"


_CATEGORY_BY_HUNDREDS: dict[int, EventCategory] = {
    1: EventCategory.FOUNDATION,
    2: EventCategory.MCP,
    3: EventCategory.TOOL,
    4: EventCategory.VIEW,
    5: EventCategory.APPROVAL,
    6: EventCategory.BINDING,
    7: EventCategory.MEDIA,
    8: EventCategory.AUTH,
    9: EventCategory.SERVER_REQUEST,
}


class AuditEventType(IntEnum):
    """What an audit row records. The value is what the database stores."""

    # 1xx — foundation, authentication, membership
    WORKSPACE_CREATED = 100
    MEMBERSHIP_CHANGED = 101
    THREAD_CREATED = 102
    # Issue 23 (F1, F6): membership is live; admin edits go through audited services.
    MEMBERSHIP_REMOVED = 103
    WORKSPACE_PROVIDER_CHANGED = 104  # the provider, model, base URL or key (never its value)
    WORKSPACE_DELETED = 105
    THREAD_DELETED = 106
    SOCKET_CLOSED_MEMBERSHIP_REMOVED = 107  # an open socket of a member who was removed
    WORKSPACE_CHANGED = 108  # its name, slug or system prompt (the fields, not the prompt)
    MESSAGE_POSTED = 110
    MESSAGE_DELETED = 111  # a person's message deleted by its author or an owner (not its text)
    SOCKET_REJECTED = 120
    SOCKET_CLOSED_SESSION_ENDED = 130
    ACTION_REFUSED = 131
    RATE_LIMITED = 132
    TURN_TAKEN_OVER = 140
    # Issue 29: a member's side pane (their own layout of a thread, docs/side-pane.md).
    VIEW_PINNED = 150
    VIEW_UNPINNED = 151
    SIDE_PANE_RESIZED = 152
    VIEW_PIN_REFUSED = 153

    # 2xx — MCP servers and catalogue
    SERVER_ADDED = 200
    SERVER_CHANGED = 201
    SERVER_REMOVED = 202
    CATALOGUE_REFRESHED = 210
    UI_RESOURCE_FETCHED = 220
    CSP_DOMAIN_DROPPED = 221
    # Issue 27: a UI document over the size Atrium accepts (ui_resources), once per version.
    UI_DOCUMENT_REFUSED = 222
    SANDBOX_PAGE_REFUSED = 230
    SERVERS_IMPORTED = 240
    SERVER_IMPORT_REFUSED = 241
    # Issue 25 part 4: prompts, resources, logging (docs/mcp-client.md).
    SERVER_LOG_LEVEL_SET = 250
    PROMPT_USED = 251
    RESOURCE_ATTACHED = 252
    PROMPT_REFUSED = 253
    RESOURCE_ATTACH_REFUSED = 254

    # 3xx — tool actions
    TOOL_CALL_MODEL = 300
    TOOL_CALL_USER = 301
    TOOL_CALL_APP = 302
    TOOLS_OFFERED_TO_MODEL = 303
    TOOL_CALL_COMPLETED = 310
    TOOL_CALL_FAILED = 311
    TOOL_CALL_INPUT_STARTED = 320
    TOOL_CALL_CANCELLED = 321
    TURN_CANCELLED = 322
    # 330-339 — tool calls run as MCP tasks (chat.calls.tasks; docs/mcp-client.md)
    TASK_CREATED = 330
    TASK_STATUS_CHANGED = 331  # only when the status changes, never per poll
    TASK_CANCEL_SENT = 332
    TASK_EXPIRED = 333  # the server forgot the task (ttl, restart) before its result
    TASK_REFUSED = 334  # a task-only tool on a server that does not declare tasks

    # 4xx — view actions
    RESOURCE_READ = 400
    UI_MESSAGE = 401
    UI_UPDATE_MODEL_CONTEXT = 402
    UI_OPEN_LINK = 403
    UI_REQUEST_DISPLAY_MODE = 404
    UI_DOWNLOAD_FILE = 405
    VIEW_LOG_MESSAGE = 406
    LEGACY_ACTION = 407
    WIDGET_STATE_SET = 408
    VIEW_TOKEN_REJECTED = 409
    VIEW_OPENED = 410
    VIEW_PERMISSION_GRANTED = 420
    VIEW_PERMISSION_REFUSED = 421
    MODAL_REQUESTED = 430
    # A view's ui/message waits for its person (F11): the card's Send / Dismiss.
    VIEW_MESSAGE_SENT = 440
    VIEW_MESSAGE_DISMISSED = 441
    VIEW_MESSAGE_REFUSED = 442  # a Send/Dismiss of a stale, spent or foreign card
    # Issue 27: draft-spec host features (chat.view_tools, docs/view-bridge.md).
    VIEW_SAMPLING_REQUESTED = 460  # a view's sampling/createMessage, decided by its binding
    VIEW_TOOLS_REGISTERED = 461  # a view declared the tools it provides (tools/list)
    VIEW_TOOL_CALLED = 462  # the model called a tool an open view provides
    VIEW_TOOLS_WITHDRAWN = 463  # the view closed (or its socket): its tools are gone
    VIEW_TOOL_ANSWERED = 464  # the view answered the model's call
    VIEW_TOOL_FAILED = 465  # no view to answer, rejected, timed out or cancelled
    # Issue 26 part 4: app views and the thread's files (chat.media.view_files).
    VIEW_FILE_UPLOADED = 470  # a view's uploadFile, decided (the body: 703 / 704)
    VIEW_FILE_LINK_ISSUED = 471  # a view's getFileDownloadUrl (the link itself: 708)
    VIEW_FILES_SELECTED = 472  # a view's selectFiles, and what the person chose
    VIEW_FILE_SAVED = 473  # a view's ui/download-file, saved as a file of the thread

    # 5xx — approvals
    APPROVAL_REQUESTED = 500
    APPROVAL_APPROVED = 501
    APPROVAL_REJECTED = 502
    APPROVAL_EXPIRED = 503
    APPROVAL_CANCELLED = 504
    # Issue 23 (F5): one card per question, and a bound on the questions pending.
    APPROVAL_ASKED_AGAIN = 505  # a view asked the same question again: it joined the card
    APPROVAL_LIMIT_REACHED = 506  # a view's request refused: too many approvals pending
    # Allowances: consent remembered for a tool in a thread or a workspace.
    ALLOWANCE_CREATED = 520
    ALLOWANCE_REVOKED = 521
    ALLOWANCE_REFUSED = 522  # granting or revoking one was refused
    APPROVAL_DECISION_REFUSED = 523  # someone who may not decide approvals tried to
    # Issue 27: consent that fits how apps are built.
    APP_ALLOWANCE_CREATED = 540  # "Allow <app> in this thread": its app-only tools
    CALL_ARGUMENTS_REFUSED = 541  # arguments refused before an approval was asked

    # 6xx — bindings and policies (administration)
    BINDING_CREATED = 600
    BINDING_CHANGED = 601
    BINDING_REMOVED = 602
    POLICY_CHANGED = 610
    SERVER_CHANGE_REFUSED = 611
    BINDING_REFUSED = 630

    # 7xx — media
    MEDIA_STAGED = 700
    MEDIA_READY = 701
    MEDIA_REJECTED = 702
    # 703-719 — files members attach (chat.media.attachments)
    ATTACHMENT_UPLOADED = 703  # a member's upload reached staging
    ATTACHMENT_REFUSED = 704  # an upload refused (limit, type, name, viewer, cut off)
    ATTACHMENT_DELETED = 705  # a file deleted (its message deleted, or by an admin)
    ATTACHMENT_EXPIRED = 706  # a file deleted by the workspace's retention
    ATTACHMENT_LIMITS_CHANGED = 707  # a workspace's file limits or retention changed
    ATTACHMENT_LINK_ISSUED = 708  # a short-lived single-file link was minted
    # 710-714 — files members pass to tools (chat.media.tool_files)
    FILE_PASSED_TO_TOOL = 710  # a thread's file handed to a server (as a link or embedded)
    FILE_TO_TOOL_REFUSED = 711  # a file reference refused (other thread, not ready, too big)

    # 8xx — sign-in to MCP servers (OAuth)
    OAUTH_CONNECTED = 800
    OAUTH_DISCONNECTED = 801
    OAUTH_REFRESH_FAILED = 802
    OAUTH_CONNECT_FAILED = 803
    OAUTH_CALLBACK_REJECTED = 804
    OAUTH_CALL_AUTHORIZED = 810
    OAUTH_AUTHORIZATION_REQUIRED = 811
    # 812-829 — every way to sign in (issue 25 part 5; docs/mcp-client.md "Signing in")
    OAUTH_SCOPE_STEP_UP = 812  # a 403 insufficient_scope: the grant is kept, more is asked
    OAUTH_MACHINE_TOKEN_FAILED = 813  # client credentials refused (machine-to-machine)
    OAUTH_CALL_WITHOUT_GRANT = 814  # a call on an OAuth server nobody signed in to yet

    # 900-919 — server requests to a person (chat.server_requests)
    SERVER_REQUEST_OPENED = 900
    SERVER_REQUEST_ANSWERED = 901
    SERVER_REQUEST_EXPIRED = 902
    SERVER_REQUEST_REFUSED = 903
    SERVER_REQUEST_COMPLETED = 904
    SAMPLING_ALLOWANCE_CREATED = 905
    SAMPLING_ALLOWANCE_REVOKED = 906

    # 920-929 — sampling runs on the workspace's model (chat.server_requests.sampling)
    SAMPLING_RAN = 920  # a server's sampling request ran on the model (token counts in extra)
    SAMPLING_FAILED = 921  # it could not run: no model, provider error, malformed or too large
    MODEL_MISSING_NOTED = 922  # a thread was told once that the workspace has no model

    @property
    def label(self) -> str:
        """A short human label, e.g. for the admin and audit reports."""
        return _LABELS[self]

    @property
    def category(self) -> EventCategory:
        """The range this event type belongs to."""
        return _CATEGORY_BY_HUNDREDS[self.value // 100]

    @classmethod
    def choices(cls) -> list[tuple[int, str]]:
        """``(value, label)`` pairs, usable as Django field ``choices``."""
        return [(member.value, member.label) for member in cls]


_LABELS: dict[AuditEventType, str] = {
    AuditEventType.WORKSPACE_CREATED: "Workspace created",
    AuditEventType.MEMBERSHIP_CHANGED: "Membership changed",
    AuditEventType.THREAD_CREATED: "Thread created",
    AuditEventType.MEMBERSHIP_REMOVED: "Member removed from a workspace",
    AuditEventType.WORKSPACE_PROVIDER_CHANGED: "Workspace model provider changed",
    AuditEventType.WORKSPACE_CHANGED: "Workspace settings changed",
    AuditEventType.WORKSPACE_DELETED: "Workspace deleted",
    AuditEventType.THREAD_DELETED: "Thread deleted",
    AuditEventType.SOCKET_CLOSED_MEMBERSHIP_REMOVED: "Websocket closed: member removed",
    AuditEventType.MESSAGE_POSTED: "Message posted",
    AuditEventType.MESSAGE_DELETED: "Message deleted",
    AuditEventType.SOCKET_REJECTED: "Websocket connection rejected",
    AuditEventType.SOCKET_CLOSED_SESSION_ENDED: "Websocket closed: session ended",
    AuditEventType.ACTION_REFUSED: "Action refused",
    AuditEventType.RATE_LIMITED: "Request rate-limited",
    AuditEventType.TURN_TAKEN_OVER: "Model turn taken over (its process stopped)",
    AuditEventType.VIEW_PINNED: "App view pinned beside the conversation",
    AuditEventType.VIEW_UNPINNED: "App view unpinned from the side pane",
    AuditEventType.SIDE_PANE_RESIZED: "Side pane resized",
    AuditEventType.VIEW_PIN_REFUSED: "Pinning an app view refused",
    AuditEventType.SERVER_ADDED: "MCP server added",
    AuditEventType.SERVER_CHANGED: "MCP server changed",
    AuditEventType.SERVER_REMOVED: "MCP server removed",
    AuditEventType.CATALOGUE_REFRESHED: "Tool catalogue refreshed",
    AuditEventType.UI_RESOURCE_FETCHED: "UI resource fetched",
    AuditEventType.CSP_DOMAIN_DROPPED: "CSP domain dropped",
    AuditEventType.SANDBOX_PAGE_REFUSED: "Sandbox page refused on another server's origin",
    AuditEventType.SERVERS_IMPORTED: "MCP servers imported from a file",
    AuditEventType.SERVER_IMPORT_REFUSED: "MCP server entry refused by an import",
    AuditEventType.SERVER_LOG_LEVEL_SET: "Server log level set",
    AuditEventType.PROMPT_USED: "Server prompt posted into a thread",
    AuditEventType.RESOURCE_ATTACHED: "Server resource attached to a message",
    AuditEventType.PROMPT_REFUSED: "Server prompt refused",
    AuditEventType.RESOURCE_ATTACH_REFUSED: "Attaching a server resource refused",
    AuditEventType.UI_DOCUMENT_REFUSED: "UI document refused: larger than Atrium accepts",
    AuditEventType.TOOL_CALL_MODEL: "Tool call by the model",
    AuditEventType.TOOL_CALL_USER: "Tool call by a user",
    AuditEventType.TOOL_CALL_APP: "Tool call by an app view",
    AuditEventType.TOOLS_OFFERED_TO_MODEL: "Tools offered to the model",
    AuditEventType.TOOL_CALL_COMPLETED: "Tool call completed",
    AuditEventType.TOOL_CALL_FAILED: "Tool call failed",
    AuditEventType.TOOL_CALL_INPUT_STARTED: "Tool call started streaming its arguments",
    AuditEventType.TOOL_CALL_CANCELLED: "Tool call cancelled",
    AuditEventType.TURN_CANCELLED: "Model turn cancelled",
    AuditEventType.TASK_CREATED: "Tool call started as a server task",
    AuditEventType.TASK_STATUS_CHANGED: "Server task status changed",
    AuditEventType.TASK_CANCEL_SENT: "Server task cancel sent",
    AuditEventType.TASK_EXPIRED: "Server task expired before its result",
    AuditEventType.TASK_REFUSED: "Task-only tool refused (server declares no tasks)",
    AuditEventType.RESOURCE_READ: "Resource read by an app view",
    AuditEventType.UI_MESSAGE: "Message posted by an app view",
    AuditEventType.UI_UPDATE_MODEL_CONTEXT: "Model context updated by an app view",
    AuditEventType.UI_OPEN_LINK: "Link opened by an app view",
    AuditEventType.UI_REQUEST_DISPLAY_MODE: "Display mode requested by an app view",
    AuditEventType.UI_DOWNLOAD_FILE: "File download requested by an app view",
    AuditEventType.VIEW_LOG_MESSAGE: "Log message from an app view",
    AuditEventType.LEGACY_ACTION: "Legacy MCP-UI action",
    AuditEventType.WIDGET_STATE_SET: "Widget state saved",
    AuditEventType.VIEW_TOKEN_REJECTED: "View capability token rejected",
    AuditEventType.VIEW_OPENED: "App view opened",
    AuditEventType.VIEW_PERMISSION_GRANTED: "Permission granted to an app from its view",
    AuditEventType.VIEW_PERMISSION_REFUSED: "Permission grant from a view refused",
    AuditEventType.MODAL_REQUESTED: "Modal requested by an app view",
    AuditEventType.VIEW_MESSAGE_SENT: "Message from an app view sent by its member",
    AuditEventType.VIEW_MESSAGE_DISMISSED: "Message from an app view dismissed by its member",
    AuditEventType.VIEW_MESSAGE_REFUSED: "Send or dismissal of an app view's message refused",
    AuditEventType.VIEW_SAMPLING_REQUESTED: "App view asked to use the workspace's model",
    AuditEventType.VIEW_TOOLS_REGISTERED: "App view provided tools",
    AuditEventType.VIEW_TOOL_CALLED: "Model called an app view's tool",
    AuditEventType.VIEW_TOOLS_WITHDRAWN: "App view's tools withdrawn (view closed)",
    AuditEventType.VIEW_TOOL_ANSWERED: "App view answered a tool call",
    AuditEventType.VIEW_TOOL_FAILED: "App view tool call failed",
    AuditEventType.VIEW_FILE_UPLOADED: "File uploaded by an app view",
    AuditEventType.VIEW_FILE_LINK_ISSUED: "File link given to an app view",
    AuditEventType.VIEW_FILES_SELECTED: "Files chosen for an app view",
    AuditEventType.VIEW_FILE_SAVED: "File saved in the thread by an app view",
    AuditEventType.APPROVAL_REQUESTED: "Approval requested",
    AuditEventType.APPROVAL_APPROVED: "Approval granted",
    AuditEventType.APPROVAL_REJECTED: "Approval rejected",
    AuditEventType.APPROVAL_EXPIRED: "Approval expired",
    AuditEventType.APPROVAL_CANCELLED: "Approval cancelled",
    AuditEventType.APPROVAL_ASKED_AGAIN: "Approval asked again",
    AuditEventType.APPROVAL_LIMIT_REACHED: "Approval refused: too many pending",
    AuditEventType.ALLOWANCE_CREATED: "Allowance granted",
    AuditEventType.ALLOWANCE_REVOKED: "Allowance revoked",
    AuditEventType.ALLOWANCE_REFUSED: "Allowance refused",
    AuditEventType.APPROVAL_DECISION_REFUSED: "Approval decision refused",
    AuditEventType.APP_ALLOWANCE_CREATED: "App allowed in a thread (its app-only tools)",
    AuditEventType.CALL_ARGUMENTS_REFUSED: "Tool call arguments refused before approval",
    AuditEventType.BINDING_CREATED: "App binding created",
    AuditEventType.BINDING_CHANGED: "App binding changed",
    AuditEventType.BINDING_REMOVED: "App binding removed",
    AuditEventType.POLICY_CHANGED: "Tool policy changed",
    AuditEventType.SERVER_CHANGE_REFUSED: "MCP server change refused (superusers only)",
    AuditEventType.BINDING_REFUSED: "App binding refused",
    AuditEventType.MEDIA_STAGED: "Media staged",
    AuditEventType.MEDIA_READY: "Media stored",
    AuditEventType.MEDIA_REJECTED: "Media rejected",
    AuditEventType.ATTACHMENT_UPLOADED: "File attached",
    AuditEventType.ATTACHMENT_REFUSED: "File upload refused",
    AuditEventType.ATTACHMENT_DELETED: "File deleted",
    AuditEventType.ATTACHMENT_EXPIRED: "File expired (retention)",
    AuditEventType.ATTACHMENT_LIMITS_CHANGED: "File limits changed",
    AuditEventType.ATTACHMENT_LINK_ISSUED: "File link issued",
    AuditEventType.FILE_PASSED_TO_TOOL: "File passed to a tool",
    AuditEventType.FILE_TO_TOOL_REFUSED: "File for a tool refused",
    AuditEventType.OAUTH_CONNECTED: "Server sign-in connected",
    AuditEventType.OAUTH_DISCONNECTED: "Server sign-in disconnected",
    AuditEventType.OAUTH_REFRESH_FAILED: "Server sign-in refresh failed",
    AuditEventType.OAUTH_CONNECT_FAILED: "Server sign-in failed",
    AuditEventType.OAUTH_CALLBACK_REJECTED: "Sign-in callback rejected",
    AuditEventType.OAUTH_CALL_AUTHORIZED: "Tool call signed in",
    AuditEventType.OAUTH_AUTHORIZATION_REQUIRED: "Tool call needs sign-in",
    AuditEventType.OAUTH_SCOPE_STEP_UP: "Server asked for a larger sign-in scope",
    AuditEventType.OAUTH_MACHINE_TOKEN_FAILED: "Machine-to-machine sign-in failed",
    AuditEventType.OAUTH_CALL_WITHOUT_GRANT: "Tool call made without sign-in",
    AuditEventType.SERVER_REQUEST_OPENED: "Server asked a person (elicitation or sampling)",
    AuditEventType.SERVER_REQUEST_ANSWERED: "Server request answered",
    AuditEventType.SERVER_REQUEST_EXPIRED: "Server request expired",
    AuditEventType.SERVER_REQUEST_REFUSED: "Server request refused",
    AuditEventType.SERVER_REQUEST_COMPLETED: "Server request completed (web page finished)",
    AuditEventType.SAMPLING_ALLOWANCE_CREATED: "Sampling allowed in a thread",
    AuditEventType.SAMPLING_ALLOWANCE_REVOKED: "Sampling allowance revoked",
    AuditEventType.SAMPLING_RAN: "Sampling request ran on the workspace's model",
    AuditEventType.SAMPLING_FAILED: "Sampling request failed",
    AuditEventType.MODEL_MISSING_NOTED: "Thread told the workspace has no model",
}


class Decision(StrEnum):
    """The decision an audit row records."""

    ALLOWED = "allowed"  # ran / accepted without needing an approval, or by standing policy
    DENIED = "denied"  # refused by the policy
    PENDING = "pending"  # waiting for an approval
    APPROVED = "approved"  # ran on the strength of a recorded approval
    REJECTED = "rejected"  # an approver said no
    FAILED = "failed"  # accepted, but failed while running

    @property
    def label(self) -> str:
        return self.value.capitalize()

    @classmethod
    def choices(cls) -> list[tuple[str, str]]:
        """``(value, label)`` pairs, usable as Django field ``choices``."""
        return [(member.value, member.label) for member in cls]
