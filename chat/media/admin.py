"""The admin of files members attach: every file per workspace (uploader, size, type, where
it is used), deleted only through the audited service; and each workspace's limits and
retention (saved through ``file_settings_set``, audited). chat/admin.py imports this."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from mcp_bridge.normalize.limits import human_size

from .attachments import attachment_delete, default_limits, file_settings_set
from .models import AttachedFile, MediaOrigin, WorkspaceFileSettings


@admin.register(AttachedFile)
class AttachedFileAdmin(admin.ModelAdmin):
    list_display = [
        "filename",
        "workspace",
        "uploader",
        "human_size",
        "mime_type",
        "status",
        "where_used",
        "created_at",
    ]
    list_filter = ["thread__workspace", "kind", "status"]
    search_fields = ["filename", "uploaded_by__username", "sha256"]
    list_select_related = ["thread__workspace", "uploaded_by", "message"]
    ordering = ["-id"]
    readonly_fields = [
        "filename",
        "kind",
        "mime_type",
        "size",
        "sha256",
        "status",
        "reason",
        "thread",
        "message",
        "uploaded_by",
        "pages",
        "created_at",
        "ready_at",
    ]
    fields = readonly_fields
    actions = ["delete_files"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[AttachedFile]:
        return super().get_queryset(request).filter(origin=MediaOrigin.ATTACHMENT)

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # deletes only through the audited service
        return actions

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="workspace", ordering="thread__workspace__name")
    def workspace(self, obj: AttachedFile) -> str:
        return obj.thread.workspace.name

    @admin.display(description="uploaded by", ordering="uploaded_by__username")
    def uploader(self, obj: AttachedFile) -> str:
        return obj.uploaded_by.get_username() if obj.uploaded_by else "—"

    @admin.display(description="size", ordering="size")
    def human_size(self, obj: AttachedFile) -> str:
        return human_size(obj.size)

    @admin.display(description="where used")
    def where_used(self, obj: AttachedFile) -> Any:
        url = reverse(
            "thread", kwargs={"slug": obj.thread.workspace.slug, "thread_id": obj.thread_id}
        )
        if obj.message_id is None:
            return format_html('<a href="{}">{}</a> (not sent)', url, obj.thread.title)
        return format_html(
            '<a href="{}#message-{}">{}</a>, message {}',
            url,
            obj.message_id,
            obj.thread.title,
            obj.message_id,
        )

    def delete_model(self, request: HttpRequest, obj: AttachedFile) -> None:
        attachment_delete(asset=obj, actor=request.user, reason="deleted by an admin")

    @admin.action(description="Delete the selected files (audited)", permissions=["delete"])
    def delete_files(self, request: HttpRequest, queryset: QuerySet[AttachedFile]) -> None:
        with transaction.atomic():
            for asset in queryset.select_related("thread"):
                attachment_delete(asset=asset, actor=request.user, reason="deleted by an admin")
        self.message_user(request, "The files were deleted.")


class FileSettingsForm(forms.ModelForm):
    class Meta:
        model = WorkspaceFileSettings
        fields = ["workspace", "max_file_bytes", "max_total_bytes", "retention_days"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.instance.pk:
            defaults = default_limits()
            self.fields["max_file_bytes"].initial = defaults.max_file_bytes
            self.fields["max_total_bytes"].initial = defaults.max_total_bytes
            self.fields["retention_days"].initial = defaults.retention_days


@admin.register(WorkspaceFileSettings)
class WorkspaceFileSettingsAdmin(admin.ModelAdmin):
    form = FileSettingsForm
    list_display = ["workspace", "file_limit", "total_limit", "retention_days", "updated_at"]

    @admin.display(description="per file")
    def file_limit(self, obj: WorkspaceFileSettings) -> str:
        return human_size(obj.max_file_bytes)

    @admin.display(description="per workspace")
    def total_limit(self, obj: WorkspaceFileSettings) -> str:
        return human_size(obj.max_total_bytes)

    def save_model(
        self, request: HttpRequest, obj: WorkspaceFileSettings, form: Any, change: bool
    ) -> None:
        saved = file_settings_set(
            workspace=obj.workspace,
            actor=request.user,
            max_file_bytes=obj.max_file_bytes,
            max_total_bytes=obj.max_total_bytes,
            retention_days=obj.retention_days,
        )
        obj.pk = saved.pk

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # set the defaults' values instead (the change is audited)
