"""Authority: app bindings, tool policies, approvals and allowances.

A workspace, thread or tool call (``chat``, the layer above) is referred to by its id only,
never by a foreign key, so bindings' migrations never depend on chat's. Deleting one of
them deletes what refers to it through ``bindings.services`` (chat's receivers call it).
"""

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


class CspDomainMode(models.TextChoices):
    """Which declared CSP domains a binding's views may reach when its admin list is empty
    (``mcp_bridge.csp.binding_allowed``)."""

    DECLARED = "declared", "declared: every public domain the server declares"
    LISTED = "listed", "listed: only the domains listed below"


class AppBinding(models.Model):
    """One server's app bound to a workspace, or to a single thread of it."""

    server = models.ForeignKey(
        "mcp_bridge.McpServer", on_delete=models.CASCADE, related_name="bindings"
    )
    workspace_id = models.BigIntegerField(db_index=True, verbose_name="workspace")
    thread_id = models.BigIntegerField(
        null=True,
        blank=True,
        db_index=True,
        verbose_name="thread",
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
    # "declared" keeps what the official MCP Apps examples need (CDN domains they declare);
    # "listed" turns an empty list into "none" (docs/sandbox.md).
    csp_domain_mode = models.CharField(
        max_length=10,
        choices=CspDomainMode.choices,
        default=CspDomainMode.DECLARED,
        verbose_name="CSP domains",
        help_text='With no allowed domains listed, "declared" lets the views reach every '
        "public domain the server declares (what the official MCP Apps examples need for "
        'their CDN); "listed" lets them reach only the domains listed, none if the list '
        "is empty. A list always narrows what the server declares.",
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
        ordering = ["workspace_id", "server"]
        constraints = [
            # One binding per server and scope, so the binding that applies is never a guess.
            models.UniqueConstraint(
                fields=["server", "workspace_id"],
                condition=models.Q(thread_id__isnull=True),
                name="one_workspace_binding_per_server",
            ),
            models.UniqueConstraint(
                fields=["server", "thread_id"],
                condition=models.Q(thread_id__isnull=False),
                name="one_thread_binding_per_server",
            ),
        ]

    def __str__(self) -> str:
        scope = f"thread {self.thread_id}" if self.thread_id else "workspace"
        return f"{self.server} → workspace {self.workspace_id} ({scope})"

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
    thread_id = models.BigIntegerField(db_index=True, verbose_name="thread")
    binding = models.ForeignKey(AppBinding, on_delete=models.CASCADE, related_name="approvals")
    # At most one approval per tool call (the call that waits for it).
    tool_call_id = models.BigIntegerField(
        null=True, blank=True, unique=True, verbose_name="tool call"
    )
    server = models.ForeignKey("mcp_bridge.McpServer", on_delete=models.CASCADE)
    tool_name = models.CharField(max_length=200)
    # Frozen: exactly these arguments run when approved.
    arguments = models.JSONField(default=dict)
    arguments_digest = models.CharField(max_length=64)
    risk = models.CharField(max_length=20, choices=Risk.choices)
    # Where the risk comes from (policy.RiskSource: admin | declared | default); blank on
    # rows from before it was recorded.
    risk_source = models.CharField(max_length=10, blank=True)
    requested_by_kind = models.CharField(max_length=20)  # model | user | app_view
    # The app view that asked (its tool call's id), for a view's request: the same view
    # asking the same question again while this one waits joins it (``asks`` counts).
    view_id = models.BigIntegerField(null=True, blank=True, verbose_name="view")
    asks = models.PositiveIntegerField(default=1)
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
        indexes = [
            models.Index(fields=["status", "expires_at"]),
            models.Index(fields=["view_id", "status"]),
        ]

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
    workspace_id = models.BigIntegerField(db_index=True, verbose_name="workspace")
    thread_id = models.BigIntegerField(null=True, blank=True, db_index=True, verbose_name="thread")
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
            models.Index(fields=["thread_id", "revoked_at"]),
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


class CspDropsAudited(models.Model):
    """The CSP sources a view's resource asked for and Atrium dropped, audited once per
    resource content, binding and set of drops (not on every opening of the view): a row
    here is the claim, taken with the audit rows in one transaction; the unique key makes
    it hold across processes and restarts."""

    binding_id = models.BigIntegerField(default=0)  # 0: a call with no binding
    content_hash = models.CharField(max_length=64)
    drops_digest = models.CharField(max_length=64)  # sha256 of the dropped sources
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["binding_id", "content_hash", "drops_digest"],
                name="csp_drops_audited_once",
            )
        ]

    def __str__(self) -> str:
        return f"CSP drops of {self.content_hash[:10]} (binding {self.binding_id}) audited"
