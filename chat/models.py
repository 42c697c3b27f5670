"""Workspaces, people, threads, and what happens in them."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.text import slugify

from bindings.models import ApprovalRequest
from chat.providers.registry import provider_choices
from mcp_bridge.sealed_fields import SealedTextField

# Django registers the models of a module it has imported; it imports chat.models only.
from .layout import models as layout_models  # noqa: F401
from .media import models as media_models  # noqa: F401
from .server_context import models as server_context_models  # noqa: F401
from .server_requests import models as server_request_models  # noqa: F401
from .view_tools import models as view_tool_models  # noqa: F401


class Role(models.TextChoices):
    OWNER = "owner", "owner"
    MEMBER = "member", "member"
    VIEWER = "viewer", "viewer"


class Workspace(models.Model):
    name = models.CharField(max_length=100)
    slug = models.SlugField(max_length=60, unique=True)
    provider = models.CharField(
        max_length=20,
        blank=True,
        choices=provider_choices(),
        help_text="Empty: the ATRIUM_PROVIDER default.",
    )
    model = models.CharField(max_length=100, blank=True)
    provider_base_url = models.URLField(max_length=300, blank=True)
    # Sealed at rest (mcp_bridge.sealing, like OAuth grants); never shown back in the admin.
    provider_api_key = SealedTextField(blank=True)
    system_prompt = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        if not self.slug:
            self.slug = slugify(self.name)[:60] or "workspace"
        super().save(*args, **kwargs)


class Membership(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "user"], name="unique_membership")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.workspace} ({self.role})"

    @property
    def can_act(self) -> bool:
        return self.role in (Role.OWNER, Role.MEMBER)


class Thread(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="threads")
    title = models.CharField(max_length=200)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    # The last event sequence number handed out (see chat.realtime.events.emit).
    last_seq = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return self.title


class ThreadEvent(models.Model):
    """Every event of a thread, stored before it is broadcast, for replay by sequence."""

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=40)
    payload = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)
    # The process that stored it (chat.realtime.events.process_origin): a web process tailing
    # the table skips the events it broadcast itself (chat.realtime.event_tail).
    origin = models.CharField(max_length=32, blank=True, default="")

    class Meta:
        ordering = ["thread", "seq"]
        constraints = [models.UniqueConstraint(fields=["thread", "seq"], name="unique_event_seq")]

    def __str__(self) -> str:
        return f"{self.thread_id}#{self.seq} {self.kind}"


class MessageRole(models.TextChoices):
    USER = "user", "user"
    ASSISTANT = "assistant", "assistant"
    TOOL = "tool", "tool"
    SYSTEM = "system", "system"


class MessageStatus(models.TextChoices):
    STREAMING = "streaming", "streaming"
    COMPLETE = "complete", "complete"
    ERROR = "error", "error"


class Message(models.Model):
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=10, choices=MessageRole.choices)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    # Who posted it when not a person: "Assistant", "Board app (via view)".
    author_label = models.CharField(max_length=200, blank=True)
    text = models.TextField(blank=True)
    status = models.CharField(
        max_length=10, choices=MessageStatus.choices, default=MessageStatus.COMPLETE
    )
    # Set when an app view posted this message through ui/message.
    via_tool_call = models.ForeignKey(
        "ToolCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["thread", "id"])]

    def __str__(self) -> str:
        return f"{self.role}: {self.text[:40]}"


class TurnLease(models.Model):
    """Who runs the model turn of a thread: one turn per thread across every process.

    ``token`` is the fencing token (+1 on every acquisition): each write of a turn checks it
    under the row lock, so a turn whose lease was taken over can no longer write.
    ``answered_up_to`` is the newest user message a finished turn saw: a process that
    acquires the lease never answers those messages again.
    """

    thread = models.OneToOneField(
        Thread, on_delete=models.CASCADE, primary_key=True, related_name="turn_lease"
    )
    holder = models.CharField(max_length=200, blank=True)  # "" when nobody runs a turn
    token = models.PositiveBigIntegerField(default=0)
    expires_at = models.DateTimeField(null=True, blank=True)
    answered_up_to = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"turn lease of thread {self.thread_id} ({self.holder or 'free'})"


class ToolCallStatus(models.TextChoices):
    # A model is still streaming the arguments: the call is not decided yet, but its view
    # is already mounted (it receives ui/notifications/tool-input-partial).
    STREAMING = "streaming", "receiving arguments"
    AWAITING_APPROVAL = "awaiting_approval", "awaiting approval"
    RUNNING = "running", "running"
    SUCCESS = "success", "success"
    ERROR = "error", "error"
    REJECTED = "rejected", "rejected"
    CANCELLED = "cancelled", "cancelled"


class Origin(models.TextChoices):
    MODEL = "model", "model"
    USER = "user", "user"
    APP_VIEW = "app_view", "app view"


def attach_approvals(calls: list[ToolCall]) -> None:
    """Load the approvals of these calls in one query (bindings keeps a call's id, not a
    foreign key to it, so there is no ``select_related`` for them). The approval is kept in
    the call's ``_approval``, the way a prefetch keeps its rows (``ToolCall.approval`` reads
    it); a service that already holds the approval passes it on in a typed value instead."""
    pending = [call for call in calls if call.pk is not None and "_approval" not in call.__dict__]
    if not pending:
        return
    found = {
        approval.tool_call_id: approval
        for approval in ApprovalRequest.objects.select_related("decided_by").filter(
            tool_call_id__in=[call.pk for call in pending]
        )
    }
    for call in pending:
        call.__dict__["_approval"] = found.get(call.pk)


class ToolCallQuerySet(models.QuerySet):
    """Tool calls; ``with_approvals()`` loads their approvals as a prefetch would."""

    _with_approvals = False

    def with_approvals(self) -> ToolCallQuerySet:
        clone = self._chain()
        clone._with_approvals = True
        return clone

    def _clone(self) -> ToolCallQuerySet:
        clone = super()._clone()
        clone._with_approvals = self._with_approvals
        return clone

    def _fetch_all(self) -> None:
        fetching = self._result_cache is None
        super()._fetch_all()
        if fetching and self._with_approvals:
            attach_approvals([row for row in self._result_cache if isinstance(row, ToolCall)])


class ToolCall(models.Model):
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="tool_calls")
    message = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="tool_calls"
    )
    server = models.ForeignKey("mcp_bridge.McpServer", on_delete=models.PROTECT)
    binding = models.ForeignKey(
        "bindings.AppBinding", null=True, blank=True, on_delete=models.SET_NULL
    )
    tool_name = models.CharField(max_length=200)
    arguments = models.JSONField(default=dict, blank=True)
    status = models.CharField(
        max_length=20, choices=ToolCallStatus.choices, default=ToolCallStatus.RUNNING
    )
    origin = models.CharField(max_length=10, choices=Origin.choices)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    # The view that made this call (app-initiated calls), if any.
    parent_view = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="view_calls"
    )
    # The model's own id for this call (provider tool_call_id), if any.
    provider_call_id = models.CharField(max_length=200, blank=True)
    # The canonical sanitized result (DESIGN §4) once finished.
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    progress = models.JSONField(null=True, blank=True)
    # The UI resource version this call's view renders, if the tool has a view.
    ui_resource = models.ForeignKey(
        "mcp_bridge.UiResource", null=True, blank=True, on_delete=models.SET_NULL
    )
    widget_state = models.JSONField(null=True, blank=True)
    model_context = models.JSONField(null=True, blank=True)
    model_context_updated_at = models.DateTimeField(null=True, blank=True)
    display_mode = models.CharField(max_length=20, default="inline")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    # The process running the call and when it last said so (chat.calls.runners): a
    # running call whose process died is failed by the beat sweep.
    runner = models.CharField(max_length=120, blank=True, default="")
    runner_seen_at = models.DateTimeField(null=True, blank=True)
    # A call run as an MCP task (chat.calls.tasks): empty task_status for every other call;
    # "submitted" until the server answered with its task, then the server's status.
    task_id = models.CharField(max_length=255, blank=True, default="")
    task_status = models.CharField(max_length=20, blank=True, default="")
    task_status_message = models.CharField(max_length=500, blank=True, default="")
    task_poll_interval_ms = models.PositiveIntegerField(null=True, blank=True)
    task_ttl_ms = models.PositiveBigIntegerField(null=True, blank=True)
    # The worker polling it says so here on every poll; the beat sweep re-queues a task
    # whose poller went quiet (chat.tasks.requeue_tool_call_tasks).
    task_polled_at = models.DateTimeField(null=True, blank=True)

    objects = ToolCallQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["thread", "id"])]

    def __str__(self) -> str:
        return f"{self.server_id}.{self.tool_name} ({self.status})"

    @property
    def approval(self) -> ApprovalRequest | None:
        """The approval this call waits or waited on, if any (read once, then cached like a
        related object; ``refresh_from_db`` reads it again)."""
        if "_approval" not in self.__dict__:
            attach_approvals([self])
        return self.__dict__.get("_approval")

    def refresh_from_db(self, *args, **kwargs) -> None:
        self.__dict__.pop("_approval", None)
        super().refresh_from_db(*args, **kwargs)
