from django import forms
from django.contrib import admin

from .models import MediaAsset, Membership, Message, Thread, ThreadEvent, ToolCall, Workspace


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
