"""Authority: app bindings, tool policies, approvals and the append-only audit log."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Risk(models.TextChoices):
    READ = "read", "read"
    WRITE = "write", "write"
    DESTRUCTIVE = "destructive", "destructive"


class Approval(models.TextChoices):
    AUTO = "auto", "run without asking"
    ASK = "ask", "ask a member first"
    DENY = "deny", "never run"


def default_link_schemes() -> list[str]:
    return ["https", "mailto"]


class AppBinding(models.Model):
    """One server's app bound to a workspace, or to a single thread of it."""

    server = models.ForeignKey(
        "mcp_bridge.McpServer", on_delete=models.CASCADE, related_name="bindings"
    )
    workspace = models.ForeignKey(
        "chat.Workspace", on_delete=models.CASCADE, related_name="bindings"
    )
    thread = models.ForeignKey(
        "chat.Thread",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="bindings",
        help_text="Leave empty to bind to the whole workspace.",
    )
    enabled = models.BooleanField(default=True)
    enabled_tools = models.JSONField(
        null=True, blank=True, help_text="Tool names this binding enables; empty means all."
    )
    allowed_domains = models.JSONField(
        null=True,
        blank=True,
        help_text="CSP domains an admin allows (list, or {connectDomains, resourceDomains, "
        "frameDomains, baseUriDomains}); empty allows what the server declares.",
    )
    granted_permissions = models.JSONField(default=list, blank=True)
    allowed_link_schemes = models.JSONField(default=default_link_schemes, blank=True)
    deep_link_protocol = models.CharField(max_length=40, blank=True)
    ui_message_rate_limit = models.PositiveIntegerField(
        default=6, help_text="ui/message requests per view per minute."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["workspace", "server"]
        constraints = [
            # One binding per server and scope, so the binding that applies is never a guess.
            models.UniqueConstraint(
                fields=["server", "workspace"],
                condition=models.Q(thread__isnull=True),
                name="one_workspace_binding_per_server",
            ),
            models.UniqueConstraint(
                fields=["server", "thread"],
                condition=models.Q(thread__isnull=False),
                name="one_thread_binding_per_server",
            ),
        ]

    def __str__(self) -> str:
        scope = f"thread {self.thread_id}" if self.thread_id else "workspace"
        return f"{self.server} → {self.workspace} ({scope})"

    @property
    def scope(self) -> str:
        return "thread" if self.thread_id else "workspace"


class ToolPolicy(models.Model):
    binding = models.ForeignKey(AppBinding, on_delete=models.CASCADE, related_name="policies")
    tool_name = models.CharField(max_length=200)
    risk = models.CharField(
        max_length=20, choices=Risk.choices, blank=True, help_text="Empty: from annotations."
    )
    approval = models.CharField(
        max_length=10, choices=Approval.choices, blank=True, help_text="Empty: from risk."
    )
    visibility_override = models.JSONField(
        null=True, blank=True, help_text='Can only narrow, e.g. ["app"].'
    )

    class Meta:
        verbose_name_plural = "tool policies"
        constraints = [
            models.UniqueConstraint(fields=["binding", "tool_name"], name="unique_policy_per_tool")
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.risk or 'derived'}, {self.approval or 'derived'})"


class ApprovalStatus(models.TextChoices):
    PENDING = "pending", "pending"
    APPROVED = "approved", "approved"
    REJECTED = "rejected", "rejected"
    EXPIRED = "expired", "expired"
    CANCELLED = "cancelled", "cancelled"


class ApprovalRequest(models.Model):
    thread = models.ForeignKey("chat.Thread", on_delete=models.CASCADE, related_name="approvals")
    binding = models.ForeignKey(AppBinding, on_delete=models.CASCADE, related_name="approvals")
    tool_call = models.OneToOneField(
        "chat.ToolCall", on_delete=models.CASCADE, null=True, blank=True, related_name="approval"
    )
    server = models.ForeignKey("mcp_bridge.McpServer", on_delete=models.CASCADE)
    tool_name = models.CharField(max_length=200)
    # Frozen: exactly these arguments run when approved.
    arguments = models.JSONField(default=dict)
    arguments_digest = models.CharField(max_length=64)
    risk = models.CharField(max_length=20, choices=Risk.choices)
    requested_by_kind = models.CharField(max_length=20)  # model | user | app_view
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    status = models.CharField(
        max_length=10, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "expires_at"])]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.status})"


class Allowance(models.Model):
    """Consent remembered: calls of ``tool_name`` under ``binding`` run without asking, in
    one thread (``thread`` set) or in every thread of the workspace the binding covers.

    Created only with an approval (``approval``: the request it was granted on), by an
    owner or member (workspace scope: owners). Never deleted by the app: revoking sets
    ``revoked_at``/``revoked_by`` and the decision stops reading it on the very next call.
    """

    binding = models.ForeignKey(AppBinding, on_delete=models.CASCADE, related_name="allowances")
    workspace = models.ForeignKey(
        "chat.Workspace", on_delete=models.CASCADE, related_name="allowances"
    )
    thread = models.ForeignKey(
        "chat.Thread", null=True, blank=True, on_delete=models.CASCADE, related_name="allowances"
    )
    tool_name = models.CharField(max_length=200)
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    approval = models.ForeignKey(
        ApprovalRequest,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="allowances",
        help_text="The approval request this allowance was granted on.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["binding", "tool_name", "revoked_at"]),
            models.Index(fields=["thread", "revoked_at"]),
        ]

    def __str__(self) -> str:
        where = f"thread {self.thread_id}" if self.thread_id else "workspace"
        state = "revoked" if self.revoked_at else "active"
        return f"{self.tool_name} in {where} ({state})"

    @property
    def scope(self) -> str:
        return "thread" if self.thread_id else "workspace"

    @property
    def active(self) -> bool:
        return self.revoked_at is None


class AuditQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise PermissionError("Audit events are append-only: they cannot be changed.")

    def delete(self):
        raise PermissionError("Audit events are append-only: they cannot be deleted.")


class AuditEvent(models.Model):
    """Append-only. Written only by bindings.audit.record(), inside the change it records.

    Foreign keys do not cascade and have no DB constraint: deleting a workspace or a
    server must never rewrite or remove its history.
    """

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    event_type = models.PositiveIntegerField(db_index=True)
    actor_kind = models.CharField(max_length=20)  # user | model | app_view | system
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    actor_label = models.CharField(max_length=200, blank=True)
    workspace = models.ForeignKey(
        "chat.Workspace",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    thread = models.ForeignKey(
        "chat.Thread",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    binding = models.ForeignKey(
        AppBinding,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    server = models.ForeignKey(
        "mcp_bridge.McpServer",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    tool_name = models.CharField(max_length=200, blank=True)
    action = models.CharField(max_length=40, blank=True, db_index=True)
    decision = models.CharField(max_length=10, db_index=True)
    reason = models.CharField(max_length=200, blank=True)
    argument_digest = models.CharField(max_length=64, blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    extra = models.JSONField(default=dict, blank=True)

    objects = AuditQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["workspace", "created_at"]),
            models.Index(fields=["decision", "created_at"]),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.event_type} {self.decision}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:
            raise PermissionError("Audit events are append-only: they cannot be changed.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise PermissionError("Audit events are append-only: they cannot be deleted.")
