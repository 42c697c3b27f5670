"""The audit log in the admin: read-only (no add, change, delete or actions).

The log names workspaces, threads, bindings and servers by id (it outlives them); this
admin looks their names up: one subquery per column on the list, one query per row named
on an event's page.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.db.models import Model, OuterRef, Subquery
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html, format_html_join

from audit.models import AuditEvent
from audit.types import AuditEventType, EventCategory
from bindings.models import AppBinding
from chat.models import Thread, Workspace
from mcp_bridge.models import McpServer

from . import reports


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


class _NamedRowFilter(admin.SimpleListFilter):
    """Events that name one row of ``model`` (by id), chosen by its name."""

    model: type[Workspace] | type[McpServer]

    def lookups(self, request, model_admin):
        return [(str(pk), name) for pk, name in self.model.objects.values_list("pk", "name")]

    def queryset(self, request, queryset):
        value = self.value()
        if value and value.isdigit():
            return queryset.filter(**{self.parameter_name: int(value)})
        return queryset


class WorkspaceFilter(_NamedRowFilter):
    title = "workspace"
    parameter_name = "workspace_id"
    model = Workspace


class ServerFilter(_NamedRowFilter):
    title = "server"
    parameter_name = "server_id"
    model = McpServer


def _name_of(model: type[Workspace] | type[McpServer], column: str) -> Subquery:
    return Subquery(model.objects.filter(pk=OuterRef(column)).values("name")[:1])


def _row_link(model: type[Model], pk: int | None, queryset: Any = None) -> str | None:
    """The row an event names, linked to its admin page (None: the admin shows its empty
    value); its id if the row is gone (the log outlives it)."""
    if pk is None:
        return None
    row = (queryset if queryset is not None else model._default_manager).filter(pk=pk).first()
    if row is None:
        return f"#{pk} (deleted)"
    meta = model._meta
    try:
        url = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[pk])
    except NoReverseMatch:
        return str(row)
    return format_html('<a href="{}">{}</a>', url, row)


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
        WorkspaceFilter,
        ServerFilter,
    ]
    list_select_related = ["actor_user"]
    search_fields = ["tool_name", "reason", "actor_label", "argument_digest", "action"]
    date_hierarchy = "created_at"
    list_per_page = 100
    show_full_result_count = False
    fieldsets = [
        (None, {"fields": ["created_at", "event", "decision", "reason", "action"]}),
        ("Who", {"fields": ["actor_kind", "actor_user", "actor_label"]}),
        (
            "Where",
            {
                "fields": [
                    "workspace_link",
                    "thread_link",
                    "binding_link",
                    "server_link",
                    "tool_name",
                ]
            },
        ),
        ("Details", {"fields": ["argument_digest", "latency_ms", "extra_pretty"]}),
    ]

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields] + [
            "event",
            "extra_pretty",
            "workspace_link",
            "thread_link",
            "binding_link",
            "server_link",
        ]

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                workspace_name=_name_of(Workspace, "workspace_id"),
                server_name=_name_of(McpServer, "server_id"),
            )
        )

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

    @admin.display(description="workspace", ordering="workspace_name")
    def workspace(self, obj: Any) -> str | None:
        return _listed_name(obj.workspace_id, obj.workspace_name)

    @admin.display(description="server", ordering="server_name")
    def server(self, obj: Any) -> str | None:
        return _listed_name(obj.server_id, obj.server_name)

    @admin.display(description="workspace")
    def workspace_link(self, obj: AuditEvent) -> str | None:
        return _row_link(Workspace, obj.workspace_id)

    @admin.display(description="thread")
    def thread_link(self, obj: AuditEvent) -> str | None:
        return _row_link(Thread, obj.thread_id)

    @admin.display(description="binding")
    def binding_link(self, obj: AuditEvent) -> str | None:
        return _row_link(AppBinding, obj.binding_id, AppBinding.objects.select_related("server"))

    @admin.display(description="server")
    def server_link(self, obj: AuditEvent) -> str | None:
        return _row_link(McpServer, obj.server_id)

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


def _listed_name(pk: int | None, name: str | None) -> str | None:
    if pk is None:
        return None
    return name if name is not None else f"#{pk} (deleted)"
