"""The admin's view of server requests: every question and sampling request a server asked
(read only: they are decided on their cards), and the *Allow in this thread* sampling
allowances, whose only change is *Revoke* (audited)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from .models import SamplingAllowance, ServerRequest
from .services import sampling_allowance_revoke


@admin.register(ServerRequest)
class ServerRequestAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "server", "thread", "for_user", "status", "created_at"]
    list_filter = ["kind", "status", "server"]
    list_select_related = ["server", "thread", "for_user"]
    date_hierarchy = "created_at"
    # Params are shown (sanitised at intake); answers never held secret values (fields only).
    readonly_fields = [f.name for f in ServerRequest._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(SamplingAllowance)
class SamplingAllowanceAdmin(admin.ModelAdmin):
    list_display = ["server", "requester", "thread", "granted_by", "created_at", "state"]
    list_filter = ["server", "requester"]
    list_select_related = ["server", "thread", "granted_by"]
    readonly_fields = [f.name for f in SamplingAllowance._meta.fields]
    actions = ["revoke_selected"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.display(description="state", ordering="revoked_at")
    def state(self, obj: SamplingAllowance) -> str:
        return "active" if obj.revoked_at is None else "revoked"

    @admin.action(description="Revoke selected allowances", permissions=["change"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[SamplingAllowance]) -> None:
        revoked = sum(
            sampling_allowance_revoke(allowance_id=pk, actor=request.user, actor_label="admin")
            for pk in queryset.filter(revoked_at__isnull=True).values_list("pk", flat=True)
        )
        self.message_user(
            request,
            f"Revoked {revoked} sampling allowance{'s' if revoked != 1 else ''}; the next "
            "requests they covered ask again.",
            messages.SUCCESS if revoked else messages.INFO,
        )
