from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from bindings.models import ApprovalRequest, ApprovalStatus
from bindings.services import BindingError, approval_expire_due

# Importing the admin of bindings' rows registers it (it shows chat's workspaces and threads).
from .admin_bindings import ApprovalWorkspaceFilter, with_scope_names
from .models import MediaAsset, Membership, Message, Thread, ThreadEvent, ToolCall, Workspace
from .selectors import membership_for
from .services.approvals import approval_decide_blocking


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


class WorkspaceForm(forms.ModelForm):
    # Write-only: the stored key is never rendered back into the page.
    provider_api_key = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Leave empty to keep the current key.",
    )

    class Meta:
        model = Workspace
        fields = [
            "name",
            "slug",
            "provider",
            "model",
            "provider_base_url",
            "provider_api_key",
            "system_prompt",
        ]

    def clean_provider_api_key(self) -> str:
        value = self.cleaned_data.get("provider_api_key") or ""
        return value or (self.instance.provider_api_key if self.instance.pk else "")


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    form = WorkspaceForm
    list_display = ["name", "slug", "provider", "model", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "workspace", "role", "created_at"]
    list_filter = ["role", "workspace"]
    list_select_related = ["user", "workspace"]
    autocomplete_fields = ["user", "workspace"]


@admin.register(Thread)
class ThreadAdmin(admin.ModelAdmin):
    list_display = ["title", "workspace", "created_by", "last_seq", "updated_at"]
    list_filter = ["workspace"]
    list_select_related = ["workspace", "created_by"]
    search_fields = ["title"]
    readonly_fields = ["last_seq"]


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["id", "thread", "role", "author", "author_label", "status", "created_at"]
    list_filter = ["role", "status"]
    list_select_related = ["thread", "author"]
    search_fields = ["text"]
    raw_id_fields = ["thread", "author", "via_tool_call"]


@admin.register(ToolCall)
class ToolCallAdmin(admin.ModelAdmin):
    list_display = ["id", "thread", "server", "tool_name", "origin", "status", "latency_ms"]
    list_filter = ["status", "origin", "server"]
    list_select_related = ["thread", "server"]
    search_fields = ["tool_name"]
    raw_id_fields = ["thread", "message", "parent_view", "requested_by", "ui_resource", "binding"]


@admin.register(MediaAsset)
class MediaAssetAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "mime_type", "size", "status", "reason", "created_at"]
    list_filter = ["status", "kind"]
    raw_id_fields = ["thread", "tool_call"]


@admin.register(ThreadEvent)
class ThreadEventAdmin(admin.ModelAdmin):
    list_display = ["thread", "seq", "kind", "created_at"]
    list_filter = ["kind"]
    list_select_related = ["thread"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


# ---------------------------------------------------------------------------- approvals
# The approvals admin lives in chat: deciding one runs the call (``approval_decide``).


def decide_from_admin(
    *, request: HttpRequest, approval: ApprovalRequest, approve: bool, remember: str = ""
) -> str:
    """Decide one approval as the admin user (``remember``: also allow the tool at that
    scope). Returns a message; raises ``PermissionError`` (not an owner/member) or
    ``BindingError`` (already decided, expired, may not allow…)."""
    workspace_id = approval.binding.workspace_id
    membership = membership_for(user=request.user, workspace_id=workspace_id)
    role = membership.role if membership else None
    if role not in ("owner", "member"):
        name = Workspace.objects.filter(pk=workspace_id).values_list("name", flat=True).first()
        raise PermissionError(
            f"You are not an owner or member of “{name or workspace_id}”: only they can "
            "decide its approvals (staff status is not enough)."
        )
    call = approval_decide_blocking(
        approval_id=approval.pk,
        decider=request.user,
        role=role,
        approve=approve,
        remember=remember,
        actor_label="admin",
    )
    verb = "Approved" if approve else "Rejected"
    if call is None:
        return f"{verb} {approval.tool_name} (no call to run)."
    where = {
        "thread": " and allowed it in its thread",
        "workspace": " and allowed it in the workspace",
    }
    return (
        f"{verb} {approval.tool_name} (#{approval.pk}){where.get(remember, '')}; "
        f"the call is {call.get_status_display()}."
    )


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(admin.ModelAdmin):
    """Approvals: decided here on the chat's path, by owners/members of the workspace only."""

    list_display = [
        "tool_name",
        "server",
        "workspace",
        "thread",
        "risk",
        "status",
        "requested",
        "decided_by",
        "created_at",
        "expires",
    ]
    list_filter = ["status", "server", ApprovalWorkspaceFilter, "risk", "requested_by_kind"]
    list_select_related = ["server", "binding", "requested_by", "decided_by"]
    search_fields = ["tool_name", "arguments_digest", "reason"]
    date_hierarchy = "created_at"
    actions = [
        "approve_selected",
        "allow_in_thread_selected",
        "allow_in_workspace_selected",
        "reject_selected",
        "expire_due",
    ]
    readonly_fields = [f.name for f in ApprovalRequest._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApprovalRequest]:
        # An approval's workspace is its binding's (the binding applied to its thread).
        return with_scope_names(super().get_queryset(request), "binding__workspace_id", "thread_id")

    @admin.display(description="workspace", ordering="_workspace_name")
    def workspace(self, obj: ApprovalRequest) -> str:
        return getattr(obj, "_workspace_name", None) or "–"

    @admin.display(description="thread", ordering="_thread_title")
    def thread(self, obj: ApprovalRequest) -> str:
        return getattr(obj, "_thread_title", None) or f"#{obj.thread_id}"

    @admin.display(description="requested by")
    def requested(self, obj: ApprovalRequest) -> str:
        who = obj.requested_by.get_username() if obj.requested_by else ""
        return f"{obj.requested_by_kind.replace('_', ' ')}" + (f" ({who})" if who else "")

    @admin.display(description="expires", ordering="expires_at")
    def expires(self, obj: ApprovalRequest) -> str:
        if obj.status != ApprovalStatus.PENDING:
            return "–"
        if obj.expires_at <= timezone.now():
            return "overdue"
        return timezone.localtime(obj.expires_at).strftime("%Y-%m-%d %H:%M")

    def _decide(
        self,
        request: HttpRequest,
        queryset: QuerySet[ApprovalRequest],
        approve: bool,
        remember: str = "",
    ):
        done = 0
        for approval in queryset.select_related("binding"):
            try:
                text = decide_from_admin(
                    request=request, approval=approval, approve=approve, remember=remember
                )
            except PermissionError as exc:
                self.message_user(request, str(exc), messages.ERROR)
            except BindingError as exc:
                self.message_user(
                    request, f"#{approval.pk} {approval.tool_name}: {exc.message}", messages.ERROR
                )
            else:
                done += 1
                self.message_user(request, text, messages.SUCCESS)
        return done

    @admin.action(description="Approve selected requests (as yourself)", permissions=["change"])
    def approve_selected(self, request: HttpRequest, queryset: QuerySet[ApprovalRequest]) -> None:
        self._decide(request, queryset, approve=True)

    @admin.action(
        description="Approve, and allow each tool in its thread (as yourself)",
        permissions=["change"],
    )
    def allow_in_thread_selected(
        self, request: HttpRequest, queryset: QuerySet[ApprovalRequest]
    ) -> None:
        self._decide(request, queryset, approve=True, remember="thread")

    @admin.action(
        description="Approve, and always allow each tool for its app in the workspace "
        "(owners, as yourself)",
        permissions=["change"],
    )
    def allow_in_workspace_selected(
        self, request: HttpRequest, queryset: QuerySet[ApprovalRequest]
    ) -> None:
        self._decide(request, queryset, approve=True, remember="workspace")

    @admin.action(description="Reject selected requests (as yourself)", permissions=["change"])
    def reject_selected(self, request: HttpRequest, queryset: QuerySet[ApprovalRequest]) -> None:
        self._decide(request, queryset, approve=False)

    @admin.action(description="Expire every overdue pending request", permissions=["change"])
    def expire_due(self, request: HttpRequest, queryset: QuerySet[ApprovalRequest]) -> None:
        expired = approval_expire_due()
        self.message_user(
            request,
            f"Expired {len(expired)} overdue request{'s' if len(expired) != 1 else ''}."
            if expired
            else "No pending request is overdue.",
        )
