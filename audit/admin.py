"""The audit log in the admin: read-only (no add, change, delete or actions)."""

from __future__ import annotations

import json

from django.contrib import admin
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html, format_html_join

from . import reports
from .models import AuditEvent
from .types import AuditEventType, EventCategory


class EventTypeFilter(admin.SimpleListFilter):
    title = "event type"
    parameter_name = "event_type"

    def lookups(self, request, model_admin):
        return [
            (str(member.value), f"{member.label} ({member.value})") for member in AuditEventType
        ]

    def queryset(self, request, queryset):
        value = self.value()
        if value and value.isdigit():
            return queryset.filter(event_type=int(value))
        return queryset


class EventCategoryFilter(admin.SimpleListFilter):
    title = "category"
    parameter_name = "category"

    def lookups(self, request, model_admin):
        return [(str(c), str(c)) for c in EventCategory]

    def queryset(self, request, queryset):
        value = self.value()
        hundreds = [m.value // 100 for m in AuditEventType if str(m.category) == value]
        if not hundreds:
            return queryset
        base = hundreds[0] * 100
        return queryset.filter(event_type__gte=base, event_type__lt=base + 100)


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """Read-only: the audit log cannot be added to, changed or deleted from here."""

    list_display = [
        "created_at",
        "event",
        "decision",
        "actor",
        "workspace",
        "server",
        "tool_name",
        "action",
        "reason",
        "latency_ms",
    ]
    list_filter = [
        "decision",
        "actor_kind",
        EventTypeFilter,
        EventCategoryFilter,
        "action",
        "workspace",
        "server",
    ]
    list_select_related = ["actor_user", "workspace", "server"]
    search_fields = ["tool_name", "reason", "actor_label", "argument_digest", "action"]
    date_hierarchy = "created_at"
    list_per_page = 100
    show_full_result_count = False
    fieldsets = [
        (None, {"fields": ["created_at", "event", "decision", "reason", "action"]}),
        ("Who", {"fields": ["actor_kind", "actor_user", "actor_label"]}),
        ("Where", {"fields": ["workspace", "thread", "binding", "server", "tool_name"]}),
        ("Details", {"fields": ["argument_digest", "latency_ms", "extra_pretty"]}),
    ]

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields] + ["event", "extra_pretty"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def get_actions(self, request):
        return {}

    def changelist_view(self, request, extra_context=None):
        try:
            report_url = reverse("audit:report")
        except NoReverseMatch:
            report_url = ""
        return super().changelist_view(
            request, {**(extra_context or {}), "audit_report_url": report_url}
        )

    @admin.display(description="event", ordering="event_type")
    def event(self, obj: AuditEvent) -> str:
        return f"{reports.event_type_label(obj.event_type)} ({obj.event_type})"

    @admin.display(description="actor", ordering="actor_kind")
    def actor(self, obj: AuditEvent) -> str:
        kind = obj.actor_kind.replace("_", " ")
        if obj.actor_user_id:
            name = obj.actor_user.get_username() if obj.actor_user else f"user #{obj.actor_user_id}"
            return f"{name} ({kind})"
        return obj.actor_label or kind

    @admin.display(description="extra")
    def extra_pretty(self, obj: AuditEvent) -> str:
        if not obj.extra:
            return "–"
        rows = sorted(obj.extra.items())
        return format_html(
            "<dl class='audit-extra'>{}</dl>",
            format_html_join(
                "",
                "<dt>{}</dt><dd><code>{}</code></dd>",
                ((key, json.dumps(value, ensure_ascii=False, default=str)) for key, value in rows),
            ),
        )
