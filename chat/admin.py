from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest
from django.utils import timezone

from bindings.models import ApprovalRequest, ApprovalStatus
from bindings.services.approvals import approval_expire_due
from bindings.services.errors import BindingError

# Importing the admin of bindings' rows registers it (it shows chat's workspaces and threads).
from .admin_bindings import ApprovalWorkspaceFilter, with_scope_names
from .calls.approvals import approval_decide_blocking
from .media.models import MediaAsset
from .models import Membership, Message, Thread, ThreadEvent, ToolCall, Workspace
from .selectors import membership_for
from .services.workspaces import (
    PROVIDER_FIELDS,
    membership_remove,
    membership_set,
    thread_delete,
    workspace_add,
    workspace_delete,
    workspace_provider_set,
    workspace_settings_set,
)

# Memberships, roles, a workspace's provider settings and deletes of workspaces and threads
# go through the audited services (chat.services.workspaces): an edit in the admin leaves
# the same audit row, and has the same live effect (a removed member's sockets end), as
# any other door. Messages, tool calls and media are records of what happened: viewable,
# never edited here (a call's server, binding or UI resource is not re-pointed by staff).


class ReadOnlyAdmin(admin.ModelAdmin):
    """Viewable rows, never added, changed or deleted from the admin."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class DeletesItsRecords(admin.ModelAdmin):
    """A thread's (or workspace's) messages, tool calls and media go with it, in its audited
    delete: the read-only admins of those records do not stand in the way."""

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        records = {str(m._meta.verbose_name) for m in (Message, ToolCall, MediaAsset)}
        return deleted, counts, perms_needed - records, protected


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


def save_memberships(request: HttpRequest, formset: BaseInlineFormSet) -> None:
    """A workspace's membership rows from its inline: added, re-roled and removed through
    the audited services (a row moved to another person is that person added and the
    previous one removed). Fills what ``formset.save()`` would, for the admin's history."""
    workspace = formset.instance
    formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []
    for form in formset.deleted_forms:
        if form.instance.pk is not None:
            membership_remove(membership=form.instance, actor=request.user)
            formset.deleted_objects.append(form.instance)
    for form in formset.forms:
        if form in formset.deleted_forms or not form.has_changed():
            continue
        adding = form.instance.pk is None
        if not adding and "user" in form.changed_data:
            stored = Membership.objects.get(pk=form.instance.pk)
            membership_remove(membership=stored, actor=request.user)
        form.instance = membership_set(
            workspace=workspace,
            user=form.cleaned_data["user"],
            role=form.cleaned_data["role"],
            actor=request.user,
        )
        if adding:
            formset.new_objects.append(form.instance)
        else:
            formset.changed_objects.append((form.instance, form.changed_data))


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
class WorkspaceAdmin(DeletesItsRecords):
    form = WorkspaceForm
    list_display = ["name", "slug", "provider", "model", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]

    def save_model(
        self, request: HttpRequest, obj: Workspace, form: forms.ModelForm, change: bool
    ) -> None:
        if not change:
            workspace_add(workspace=obj, actor=request.user)
            return
        # The other fields are saved as they are; the provider's through the service that
        # audits them (the admin's change view runs in one transaction).
        provider = {name: getattr(obj, name) for name in PROVIDER_FIELDS}
        workspace_settings_set(workspace=obj, actor=request.user, fields=form.changed_data)
        workspace_provider_set(workspace=obj, actor=request.user, **provider)

    def save_formset(
        self, request: HttpRequest, form: forms.ModelForm, formset: Any, change: bool
    ) -> None:
        if formset.model is Membership:
            save_memberships(request, formset)
        else:
            super().save_formset(request, form, formset, change)

    def delete_model(self, request: HttpRequest, obj: Workspace) -> None:
        workspace_delete(workspace=obj, actor=request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Workspace]) -> None:
        with transaction.atomic():
            for workspace in queryset:
                workspace_delete(workspace=workspace, actor=request.user)


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "workspace", "role", "created_at"]
    list_filter = ["role", "workspace"]
    list_select_related = ["user", "workspace"]
    autocomplete_fields = ["user", "workspace"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # A membership is one person in one workspace: change its role, or remove it and
        # add another (each audited).
        return ["user", "workspace"] if obj is not None else []

    def save_model(
        self, request: HttpRequest, obj: Membership, form: forms.ModelForm, change: bool
    ) -> None:
        saved = membership_set(
            workspace=obj.workspace, user=obj.user, role=obj.role, actor=request.user
        )
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        membership_remove(membership=obj, actor=request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Membership]) -> None:
        with transaction.atomic():
            for membership in queryset:
                membership_remove(membership=membership, actor=request.user)


@admin.register(Thread)
class ThreadAdmin(DeletesItsRecords):
    list_display = ["title", "workspace", "created_by", "last_seq", "updated_at"]
    list_filter = ["workspace"]
    list_select_related = ["workspace", "created_by"]
    search_fields = ["title"]
    readonly_fields = ["last_seq"]

    def delete_model(self, request: HttpRequest, obj: Thread) -> None:
        thread_delete(thread=obj, actor=request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Thread]) -> None:
        with transaction.atomic():
            for thread in queryset:
                thread_delete(thread=thread, actor=request.user)


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ["id", "thread", "role", "author", "author_label", "status", "created_at"]
    list_filter = ["role", "status"]
    list_select_related = ["thread", "author"]
    search_fields = ["text"]
    raw_id_fields = ["thread", "author", "via_tool_call"]


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdmin):
    list_display = ["id", "thread", "server", "tool_name", "origin", "status", "latency_ms"]
    list_filter = ["status", "origin", "server"]
    list_select_related = ["thread", "server"]
    search_fields = ["tool_name"]
    raw_id_fields = ["thread", "message", "parent_view", "requested_by", "ui_resource", "binding"]


@admin.register(MediaAsset)
class MediaAssetAdmin(ReadOnlyAdmin):
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


# Files members attach: their list per workspace and each workspace's limits (issue 26).
from .media import admin as media_admin  # noqa: E402, F401

# What servers asked people and the workspace's model (issue 25): read only; revoke here.
from .server_requests import admin as server_requests_admin  # noqa: E402, F401
