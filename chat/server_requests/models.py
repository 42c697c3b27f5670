"""Server requests to a person (DESIGN §3): an elicitation or a sampling consent card.

Its app is chat (``chat.models`` imports this module); relations name chat's models by label,
so this module imports nothing of chat.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ServerRequestKind(models.TextChoices):
    ELICITATION_FORM = "elicitation_form", "question (form)"
    ELICITATION_URL = "elicitation_url", "question (web page)"
    SAMPLING = "sampling", "sampling request"
    # The model calling a tool an open app view provides (chat.view_tools): its consent.
    VIEW_TOOL = "view_tool", "app view tool call"


class Requester(models.TextChoices):
    """Who asks: the server during one of our calls, or its app's view (issue 27)."""

    SERVER = "server", "server"
    APP_VIEW = "app_view", "app view"


class ServerRequestStatus(models.TextChoices):
    PENDING = "pending", "pending"
    ACCEPTED = "accepted", "accepted"
    DECLINED = "declined", "declined"
    CANCELLED = "cancelled", "cancelled"
    EXPIRED = "expired", "expired"
    FAILED = "failed", "failed"


class ServerRequest(models.Model):
    """One request a server sent while one of our calls ran, and its outcome.

    ``params``: the request as the server sent it, sanitised and size-capped (sampling's
    ``_meta`` removed). ``outcome``: what was answered, never a form's values (field names
    only). ``completed_at``: a URL elicitation the server (``notifications/elicitation/
    complete``) or the person ("I've finished") said is done.
    """

    kind = models.CharField(max_length=20, choices=ServerRequestKind.choices)
    thread = models.ForeignKey(
        "chat.Thread", on_delete=models.CASCADE, related_name="server_requests"
    )
    workspace_id = models.BigIntegerField(db_index=True, verbose_name="workspace")
    tool_call = models.ForeignKey(
        "chat.ToolCall",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="server_requests",
    )
    server = models.ForeignKey("mcp_bridge.McpServer", on_delete=models.CASCADE, related_name="+")
    for_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(
        max_length=12, choices=ServerRequestStatus.choices, default=ServerRequestStatus.PENDING
    )
    params = models.JSONField(default=dict, blank=True)
    # The server itself, or its app's view (``tool_call`` is then the view's call).
    requester = models.CharField(max_length=12, choices=Requester.choices, default="server")
    # URL mode: the server's id for it (notifications/elicitation/complete names it).
    elicitation_id = models.CharField(max_length=200, blank=True, db_index=True)
    # What the waiting handler listens on (chat.server_requests.waiting); not shown.
    wait_key = models.CharField(max_length=64, blank=True)
    # URL mode from a URLElicitationRequired error: the call is retried after completion.
    retries_call = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    outcome = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["thread", "status"])]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk} ({self.status})"


class SamplingAllowance(models.Model):
    """*Allow in this thread* for one server's sampling requests (revocable, audited)."""

    thread = models.ForeignKey(
        "chat.Thread", on_delete=models.CASCADE, related_name="sampling_allowances"
    )
    server = models.ForeignKey("mcp_bridge.McpServer", on_delete=models.CASCADE, related_name="+")
    # A server's own sampling and its app view's are allowed separately.
    requester = models.CharField(max_length=12, choices=Requester.choices, default="server")
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    server_request = models.ForeignKey(
        ServerRequest, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["thread", "server"])]

    def __str__(self) -> str:
        return f"sampling by server {self.server_id} in thread {self.thread_id}"
