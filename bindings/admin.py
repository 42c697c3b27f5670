"""The admin as an operations console for authority: bindings, policies, approvals, audit.

Rules this module enforces:

- **Every change of a binding or a tool policy is audited**, with the admin user as actor,
  in the admin's own transaction: a new binding goes through
  ``bindings.services.create_binding`` (``BINDING_CREATED``); a policy row through
  ``bindings.services.set_tool_policy`` (``POLICY_CHANGED``); editing, enabling/disabling
  and deleting a binding, and deleting a policy row, write ``BINDING_CHANGED`` /
  ``BINDING_REMOVED`` / ``POLICY_CHANGED`` through ``bindings.audit.record`` (the services
  module has no update/remove functions yet).
- **A visibility override can only narrow** what the tool declares: the checkboxes offer
  ``model`` and ``app``, and ticking one the tool does not declare is refused.
- **Approvals are decided on the chat's own path** (``chat.toolcalls.decide_approval``):
  the same re-decision of the frozen call, the same audit events, and the call runs when
  approved. *Staff status is not a vote:* the admin user must be an owner or a member of
  the approval's workspace, exactly like in the chat; otherwise the admin shows an error
  and nothing changes. Approving can also remember consent (an allowance in the thread, or
  — owners — in the workspace), with the chat's rules (``policy.grantable_scopes``).
- **Allowances are listed, never edited**: the only change is *Revoke* (staff may revoke
  any allowance, since revoking only narrows; audited with the admin user as actor).
- **The audit log is read-only** here: no add, no change, no delete, no bulk actions.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import re
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync
from django import forms
from django.apps import apps
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from mcp_bridge.csp import CSP_CATEGORIES, PERMISSION_NAMES, validate_domain

from . import policy, reports, services
from .audit import record
from .events import AuditEventType, Decision, EventCategory
from .models import (
    Allowance,
    AppBinding,
    ApprovalRequest,
    ApprovalStatus,
    AuditEvent,
    ToolPolicy,
)

VISIBILITY_CHOICES = [("model", "model (offered to the model, /call)"), ("app", "app (its views)")]
_SCHEME_RE = re.compile(r"^[a-z][a-z0-9+.\-]*$")
# How long the admin waits for an approved call to finish when it runs outside a server
# event loop (tests, a WSGI deployment): the loop ends with the request.
APPROVAL_RUN_TIMEOUT = 120.0


def _actor_id(request: HttpRequest) -> int | None:
    return getattr(request.user, "pk", None)


# ----------------------------------------------------------------------------- bindings


def _schemes(raw: str) -> list[str]:
    return [
        s.strip().lower().removesuffix("://").removesuffix(":")
        for s in re.split(r"[,\s]+", raw)
        if s.strip()
    ]


class AppBindingForm(forms.ModelForm):
    enabled_tools = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Tick the tools this binding enables. Leave all unticked to enable every "
        "tool of the server, including tools it adds later.",
    )
    granted_permissions = forms.MultipleChoiceField(
        required=False,
        choices=[(name, name) for name in PERMISSION_NAMES],
        widget=forms.CheckboxSelectMultiple,
        help_text="Powerful browser features granted to the views (only if they declare them).",
    )
    allowed_link_schemes = forms.CharField(
        required=False,
        help_text="Schemes ui/open-link may open, comma-separated (default: https, mailto). "
        "javascript:, data:, file: and browser internals are always refused.",
    )
    allowed_domains = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="CSP sources the admin allows, one scheme://host[:port] per line (for every "
        "category), or a JSON object per category (connectDomains, resourceDomains, "
        "frameDomains, baseUriDomains). Empty: allow what the server declares; [] allows none.",
    )

    class Meta:
        model = AppBinding
        fields = [
            "server",
            "workspace",
            "thread",
            "enabled",
            "enabled_tools",
            "granted_permissions",
            "allowed_link_schemes",
            "deep_link_protocol",
            "ui_message_rate_limit",
            "allowed_domains",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from mcp_bridge.models import Tool

        instance = self.instance
        current = list(instance.enabled_tools or []) if instance.pk else []
        if instance.pk:
            names = list(
                Tool.objects.filter(server_id=instance.server_id, present=True)
                .order_by("name")
                .values_list("name", flat=True)
            )
            choices: list[Any] = [(n, n) for n in names]
            choices += [
                (n, f"{n} (no longer listed by the server)") for n in current if n not in names
            ]
        else:
            grouped: dict[str, list[tuple[str, str]]] = {}
            for name, server_name in (
                Tool.objects.filter(present=True)
                .order_by("server__name", "name")
                .values_list("name", "server__name")
            ):
                grouped.setdefault(server_name, []).append((name, name))
            choices = list(grouped.items())
        self.fields["enabled_tools"].choices = choices
        self.initial["enabled_tools"] = current
        self.initial["granted_permissions"] = list(instance.granted_permissions or [])
        schemes = instance.allowed_link_schemes if instance.pk else ["https", "mailto"]
        self.initial["allowed_link_schemes"] = ", ".join(schemes or [])
        domains = instance.allowed_domains
        if isinstance(domains, list) and domains:
            self.initial["allowed_domains"] = "\n".join(str(d) for d in domains)
        elif domains is not None and domains != []:
            self.initial["allowed_domains"] = json.dumps(domains, indent=2)
        elif domains == []:
            self.initial["allowed_domains"] = "[]"
        else:
            self.initial["allowed_domains"] = ""
        if "ui_message_rate_limit" in self.fields:
            self.fields["ui_message_rate_limit"].label = "ui/message rate limit"
        if "thread" in self.fields:
            self.fields["thread"].help_text = (
                "Leave empty to bind to the whole workspace; a thread binding beats the "
                "workspace's binding of the same server in that thread."
            )

    def clean_allowed_link_schemes(self) -> list[str]:
        schemes = _schemes(self.cleaned_data.get("allowed_link_schemes") or "")
        bad = [s for s in schemes if not _SCHEME_RE.match(s) or s in policy.ALWAYS_BLOCKED_SCHEMES]
        if bad:
            raise forms.ValidationError(f"These schemes are never allowed: {', '.join(bad)}.")
        return list(dict.fromkeys(schemes))

    def clean_deep_link_protocol(self) -> str:
        value = (self.cleaned_data.get("deep_link_protocol") or "").strip().lower()
        value = value.removesuffix("://").removesuffix(":")
        if not value:
            return ""
        if not _SCHEME_RE.match(value) or value in policy.ALWAYS_BLOCKED_SCHEMES:
            raise forms.ValidationError("Not a usable protocol name (e.g. figma, vscode).")
        if value in ("http", "https", "mailto"):
            raise forms.ValidationError("Use the link schemes for http, https and mailto.")
        return value

    def clean_allowed_domains(self) -> Any:
        raw = (self.cleaned_data.get("allowed_domains") or "").strip()
        if not raw:
            return None
        if raw[0] in "[{":
            try:
                value = json.loads(raw)
            except ValueError as exc:
                raise forms.ValidationError(f"Invalid JSON: {exc}.") from None
        else:
            value = [line.strip() for line in raw.splitlines() if line.strip()]
        if isinstance(value, dict):
            unknown = sorted(set(value) - set(CSP_CATEGORIES))
            if unknown:
                raise forms.ValidationError(f"Unknown CSP categories: {', '.join(unknown)}.")
            return {key: self._domains(items) for key, items in value.items()}
        if isinstance(value, list):
            return self._domains(value)
        raise forms.ValidationError("Expected a list of sources or an object per category.")

    @staticmethod
    def _domains(items: Any) -> list[str]:
        if not isinstance(items, list):
            raise forms.ValidationError("Each category needs a list of sources.")
        out, errors = [], []
        for item in items:
            normalized, reason = validate_domain(item)
            if normalized is None:
                errors.append(f"{str(item)[:80]!r}: {reason}")
            else:
                out.append(normalized)
        if errors:
            raise forms.ValidationError("Invalid sources — " + "; ".join(errors))
        return list(dict.fromkeys(out))

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        server = data.get("server") if "server" in self.fields else self.instance.server
        workspace = data.get("workspace") if "workspace" in self.fields else self.instance.workspace
        thread = data.get("thread") if "thread" in self.fields else self.instance.thread
        if server is None or workspace is None:
            return data
        if thread is not None and thread.workspace_id != workspace.pk:
            self.add_error("thread", "That thread belongs to another workspace.")
        duplicate = AppBinding.objects.filter(
            server=server, workspace=workspace, thread=thread
        ).exclude(pk=self.instance.pk)
        if duplicate.exists():
            raise forms.ValidationError(
                "This server is already bound to that scope; edit that binding instead."
            )
        tools = data.get("enabled_tools") or []
        if tools:
            from mcp_bridge.models import Tool

            known = set(
                Tool.objects.filter(server=server, name__in=tools).values_list("name", flat=True)
            )
            known |= set(self.instance.enabled_tools or []) if self.instance.pk else set()
            foreign = [t for t in tools if t not in known]
            if foreign:
                self.add_error(
                    "enabled_tools", f"Not tools of {server.name}: {', '.join(foreign)}."
                )
        return data

    def _post_clean(self) -> None:
        # Empty selection means "every tool" (stored as null, as the model documents).
        super()._post_clean()
        if not self.cleaned_data.get("enabled_tools"):
            self.instance.enabled_tools = None


class ToolPolicyForm(forms.ModelForm):
    visibility_override = forms.MultipleChoiceField(
        required=False,
        choices=VISIBILITY_CHOICES,
        widget=forms.CheckboxSelectMultiple,
        label="Visible to (override)",
        help_text="Only narrows what the tool declares. Leave unticked for no override.",
    )

    class Meta:
        model = ToolPolicy
        fields = ["tool_name", "risk", "approval", "visibility_override"]

    # Set by ToolPolicyInline.get_formset: the catalogue of the binding's server.
    catalogue: dict[str, Any] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial["visibility_override"] = list(self.instance.visibility_override or [])
        if self.catalogue:
            names = sorted(self.catalogue)
            current = self.instance.tool_name if self.instance.pk else ""
            choices = [("", "———")] + [(n, n) for n in names]
            if current and current not in self.catalogue:
                choices.append((current, f"{current} (no longer listed)"))
            self.fields["tool_name"] = forms.ChoiceField(choices=choices, label="Tool")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        chosen = data.get("visibility_override") or []
        name = data.get("tool_name")
        tool = self.catalogue.get(name) if name else None
        if chosen and tool is not None:
            declared = set(tool.visibility or [])
            widening = [v for v in chosen if v not in declared]
            if widening:
                self.add_error(
                    "visibility_override",
                    f"An override can only narrow: {name} does not declare "
                    f"{', '.join(widening)} (it declares {', '.join(sorted(declared)) or 'nothing'}).",
                )
        return data

    def visibility_value(self) -> list[str] | None:
        chosen = self.cleaned_data.get("visibility_override") or []
        return sorted(chosen) if chosen else None


class ToolPolicyInline(admin.TabularInline):
    model = ToolPolicy
    form = ToolPolicyForm
    extra = 0
    fields = ["tool_name", "declared", "risk", "approval", "visibility_override"]
    readonly_fields = ["declared"]

    def get_formset(self, request: HttpRequest, obj: AppBinding | None = None, **kwargs: Any):
        from mcp_bridge.models import Tool

        server_id: Any = obj.server_id if obj is not None else None
        if server_id is None and request.method == "POST":
            # Adding a binding: validate the new policies against the chosen server.
            posted = request.POST.get("server", "")
            server_id = int(posted) if posted.isdigit() else None
        catalogue = (
            {t.name: t for t in Tool.objects.filter(server_id=server_id, present=True)}
            if server_id is not None
            else {}
        )
        self._catalogue = catalogue
        kwargs["form"] = type("BoundToolPolicyForm", (ToolPolicyForm,), {"catalogue": catalogue})
        return super().get_formset(request, obj, **kwargs)

    @admin.display(description="declared by the server")
    def declared(self, obj: ToolPolicy) -> str:
        tool = getattr(self, "_catalogue", {}).get(getattr(obj, "tool_name", ""))
        if tool is None:
            return "–"
        risk = policy.derive_risk(tool.annotations or {})
        visibility = ", ".join(tool.visibility or []) or "none"
        return f"risk {risk} · visible to {visibility}"


class ScopeFilter(admin.SimpleListFilter):
    title = "scope"
    parameter_name = "scope"

    def lookups(self, request, model_admin):
        return [("workspace", "whole workspace"), ("thread", "one thread")]

    def queryset(self, request, queryset):
        if self.value() == "workspace":
            return queryset.filter(thread__isnull=True)
        if self.value() == "thread":
            return queryset.filter(thread__isnull=False)
        return queryset


@admin.register(AppBinding)
class AppBindingAdmin(admin.ModelAdmin):
    form = AppBindingForm
    list_display = [
        "__str__",
        "server",
        "workspace",
        "scope_display",
        "enabled",
        "tools_display",
        "policy_count",
        "updated_at",
    ]
    list_display_links = ["__str__"]
    list_filter = ["enabled", ScopeFilter, "server", "workspace"]
    list_select_related = ["server", "workspace", "thread"]
    search_fields = ["server__name", "server__slug", "workspace__name", "thread__title"]
    raw_id_fields = ["thread"]
    inlines = [ToolPolicyInline]
    actions = ["enable_bindings", "disable_bindings"]
    readonly_fields = ["created_by", "created_at", "updated_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[AppBinding]:
        return super().get_queryset(request).annotate(_policies=Count("policies"))

    def get_readonly_fields(self, request: HttpRequest, obj: AppBinding | None = None):
        fixed = ["server", "workspace", "thread"] if obj is not None else []
        return fixed + list(self.readonly_fields)

    def get_fieldsets(self, request: HttpRequest, obj: AppBinding | None = None):
        return [
            (None, {"fields": ["server", "workspace", "thread", "enabled"]}),
            ("Tools", {"fields": ["enabled_tools"]}),
            (
                "What its views may do",
                {
                    "fields": [
                        "granted_permissions",
                        "allowed_link_schemes",
                        "deep_link_protocol",
                        "ui_message_rate_limit",
                        "allowed_domains",
                    ]
                },
            ),
            ("History", {"fields": ["created_by", "created_at", "updated_at"]}),
        ]

    @admin.display(description="scope")
    def scope_display(self, obj: AppBinding) -> str:
        return f"thread: {obj.thread.title}" if obj.thread_id else "workspace"

    @admin.display(description="enabled tools")
    def tools_display(self, obj: AppBinding) -> str:
        tools = obj.enabled_tools or []
        if not tools:
            return "all"
        shown = ", ".join(tools[:4])
        return shown + (f" +{len(tools) - 4}" if len(tools) > 4 else "")

    @admin.display(description="policies", ordering="_policies")
    def policy_count(self, obj: AppBinding) -> int:
        return getattr(obj, "_policies", 0)

    # -- audited writes ---------------------------------------------------------------

    def save_model(self, request: HttpRequest, obj: AppBinding, form, change: bool) -> None:
        wanted = services.binding_settings(obj)
        if change:
            stored = services.update_binding(
                binding_id=obj.pk, changes=wanted, actor=request.user, actor_label="admin"
            )
            obj.updated_at = stored.updated_at
            return
        created = services.create_binding(
            server=obj.server,
            workspace=obj.workspace,
            thread=obj.thread,
            actor=request.user,
            enabled_tools=obj.enabled_tools or None,
            allowed_domains=obj.allowed_domains,
            granted_permissions=list(obj.granted_permissions or []),
            allowed_link_schemes=list(obj.allowed_link_schemes or []),
            deep_link_protocol=obj.deep_link_protocol,
            ui_message_rate_limit=obj.ui_message_rate_limit,
            enabled=obj.enabled,
        )
        # What create_binding cannot express (a disabled binding, no link schemes at all).
        adjust = {k: v for k, v in wanted.items() if services.binding_settings(created)[k] != v}
        if adjust:
            created = services.update_binding(
                binding_id=created.pk,
                changes=adjust,
                actor=request.user,
                actor_label="admin",
                via="created_with_settings",
            )
        # The admin's formsets hold `obj`: it becomes the created row.
        obj.pk = created.pk
        obj.created_by = created.created_by
        obj.created_at = created.created_at
        obj.updated_at = created.updated_at
        obj._state.adding = False
        obj._state.db = created._state.db

    def delete_model(self, request: HttpRequest, obj: AppBinding) -> None:
        services.remove_binding(binding_id=obj.pk, actor=request.user, actor_label="admin")

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[AppBinding]) -> None:
        with transaction.atomic():
            for pk in list(queryset.values_list("pk", flat=True)):
                services.remove_binding(binding_id=pk, actor=request.user, actor_label="admin")

    def save_formset(self, request: HttpRequest, form, formset, change: bool) -> None:
        if formset.model is not ToolPolicy:
            return super().save_formset(request, form, formset, change)
        binding = form.instance
        formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []
        for subform in formset.deleted_forms:
            row = subform.instance
            stored = ToolPolicy.objects.filter(pk=row.pk, binding=binding).first()
            if stored is None:
                continue
            self._policy_removed(request, binding, stored.tool_name)
            stored.delete()
            formset.deleted_objects.append(stored)
        for subform in formset.forms:
            if subform in formset.deleted_forms or not subform.has_changed():
                continue
            if not getattr(subform, "cleaned_data", None):
                continue
            data = subform.cleaned_data
            old = subform.instance if subform.instance.pk else None
            # The instance already carries the new values: the stored name is in the DB.
            previous_name = (
                ToolPolicy.objects.filter(pk=old.pk).values_list("tool_name", flat=True).first()
                if old is not None
                else None
            )
            if previous_name and previous_name != data["tool_name"]:
                self._policy_removed(request, binding, previous_name)
                ToolPolicy.objects.filter(pk=old.pk).delete()
            row = services.set_tool_policy(
                binding=binding,
                tool_name=data["tool_name"],
                risk=data.get("risk") or "",
                approval=data.get("approval") or "",
                visibility_override=subform.visibility_value(),
                actor=request.user,
            )
            subform.instance = row
            if old is None or (previous_name and previous_name != data["tool_name"]):
                formset.new_objects.append(row)
            else:
                formset.changed_objects.append((row, subform.changed_data))

    @staticmethod
    def _policy_removed(request: HttpRequest, binding: AppBinding, tool_name: str) -> None:
        record(
            event_type=AuditEventType.POLICY_CHANGED,
            decision=Decision.ALLOWED,
            actor_kind="user",
            actor_user_id=_actor_id(request),
            actor_label="admin",
            workspace_id=binding.workspace_id,
            binding_id=binding.pk,
            server_id=binding.server_id,
            tool_name=tool_name,
            action="admin",
            reason="policy_removed",
            extra={"removed": True, "via": "admin"},
        )

    def _set_enabled(self, request: HttpRequest, queryset: QuerySet[AppBinding], on: bool) -> int:
        return services.set_bindings_enabled(
            binding_ids=list(queryset.values_list("pk", flat=True)),
            enabled=on,
            actor=request.user,
            actor_label="admin",
        )

    @admin.action(description="Enable selected bindings", permissions=["change"])
    def enable_bindings(self, request: HttpRequest, queryset: QuerySet[AppBinding]) -> None:
        n = self._set_enabled(request, queryset, True)
        self.message_user(request, f"Enabled {n} binding{'s' if n != 1 else ''}.")

    @admin.action(description="Disable selected bindings", permissions=["change"])
    def disable_bindings(self, request: HttpRequest, queryset: QuerySet[AppBinding]) -> None:
        n = self._set_enabled(request, queryset, False)
        self.message_user(
            request,
            f"Disabled {n} binding{'s' if n != 1 else ''}. Their views and pending approvals "
            "are refused from now on.",
        )


# ---------------------------------------------------------------------------- approvals


def _role_in(user: Any, workspace_id: int) -> str | None:
    membership = apps.get_model("chat", "Membership")
    row = membership.objects.filter(user=user, workspace_id=workspace_id).first()
    return row.role if row else None


def _under_server_loop() -> bool:
    """True when this sync code runs inside an ASGI server's event loop (daphne)."""
    loop = getattr(SyncToAsync.threadlocal, "main_event_loop", None)
    return loop is not None and loop.is_running()


async def _decide_via_chat(
    *, approval_id: int, decider: Any, role: str, approve: bool, settle: bool, remember: str = ""
) -> Any:
    """``chat.toolcalls.decide_approval`` from the admin's sync code.

    - Under a server loop (``settle=False``), the approved call outlives this request: it
      starts in a fresh context, because a task inherits the context it is created in, and
      this request's context names its thread-sensitive executor, which ends with the
      request (the call's later database steps would then fail).
    - Outside one (tests, a WSGI deployment, ``settle=True``), the loop is private and ends
      with this request: wait for the call to finish (it would be cancelled otherwise) and
      close this loop's MCP connections.
    """
    from channels.db import database_sync_to_async

    from chat import toolcalls
    from mcp_bridge import gateway

    decide = toolcalls.decide_approval(
        approval_id=approval_id,
        decider=decider,
        role=role,
        approve=approve,
        remember=remember,
        actor_label="admin",
    )
    if not settle:
        loop = asyncio.get_running_loop()
        return await loop.create_task(decide, context=contextvars.Context())
    call = await decide
    try:
        key = toolcalls.task_key(call.pk)
        pending = [t for t in asyncio.all_tasks() if t.get_name() == key and not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=APPROVAL_RUN_TIMEOUT)
    finally:
        await gateway.close_all()
    return await database_sync_to_async(type(call).objects.get)(pk=call.pk)


def decide_from_admin(
    *, request: HttpRequest, approval: ApprovalRequest, approve: bool, remember: str = ""
) -> str:
    """Decide one approval as the admin user (``remember``: also allow the tool at that
    scope). Returns a message; raises ``PermissionError`` (not an owner/member) or
    ``services.BindingError`` (already decided, expired, may not allow…)."""
    workspace_id = approval.thread.workspace_id
    role = _role_in(request.user, workspace_id)
    if role not in ("owner", "member"):
        raise PermissionError(
            f"You are not an owner or member of “{approval.thread.workspace}”: only they can "
            "decide its approvals (staff status is not enough)."
        )
    if approval.tool_call_id is None:
        services.decide_approval(
            approval_id=approval.pk,
            decider=request.user,
            role=role,
            approve=approve,
            remember=remember,
            actor_label="admin",
        )
        return f"{'Approved' if approve else 'Rejected'} {approval.tool_name} (no call to run)."
    settle = not _under_server_loop()
    call = async_to_sync(_decide_via_chat)(
        approval_id=approval.pk,
        decider=request.user,
        role=role,
        approve=approve,
        settle=settle,
        remember=remember,
    )
    verb = "Approved" if approve else "Rejected"
    where = {
        "thread": " and allowed it in its thread",
        "workspace": " and allowed it in the workspace",
    }
    return (
        f"{verb} {approval.tool_name} (#{approval.pk}){where.get(remember, '')}; "
        f"the call is {call.get_status_display()}."
    )


class WorkspaceFilter(admin.SimpleListFilter):
    title = "workspace"
    parameter_name = "workspace"

    def lookups(self, request, model_admin):
        model = AppBinding._meta.get_field("workspace").related_model
        return [
            (str(pk), name) for pk, name in model.objects.order_by("name").values_list("pk", "name")
        ]

    def queryset(self, request, queryset):
        return queryset.filter(thread__workspace_id=self.value()) if self.value() else queryset


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
    list_filter = ["status", "server", WorkspaceFilter, "thread", "risk", "requested_by_kind"]
    list_select_related = ["server", "thread__workspace", "requested_by", "decided_by"]
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

    @admin.display(description="workspace", ordering="thread__workspace__name")
    def workspace(self, obj: ApprovalRequest) -> str:
        return obj.thread.workspace.name

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
        for approval in queryset.select_related("thread__workspace"):
            try:
                text = decide_from_admin(
                    request=request, approval=approval, approve=approve, remember=remember
                )
            except PermissionError as exc:
                self.message_user(request, str(exc), messages.ERROR)
            except services.BindingError as exc:
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
        expired = services.expire_due_approvals()
        self.message_user(
            request,
            f"Expired {len(expired)} overdue request{'s' if len(expired) != 1 else ''}."
            if expired
            else "No pending request is overdue.",
        )


# ---------------------------------------------------------------------------- allowances


class AllowanceStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("active", "active"), ("revoked", "revoked")]

    def queryset(self, request, queryset):
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


class AllowanceScopeFilter(admin.SimpleListFilter):
    title = "scope"
    parameter_name = "scope"

    def lookups(self, request, model_admin):
        return [("thread", "thread"), ("workspace", "workspace")]

    def queryset(self, request, queryset):
        if self.value() in ("thread", "workspace"):
            return queryset.filter(thread__isnull=self.value() == "workspace")
        return queryset


@admin.register(Allowance)
class AllowanceAdmin(admin.ModelAdmin):
    """Every allowance ever granted: who, when, where, on which approval; revoke here."""

    list_display = [
        "tool_name",
        "app",
        "scope_label",
        "workspace",
        "thread",
        "granted_by",
        "created_at",
        "state",
        "approval",
    ]
    list_filter = [AllowanceStateFilter, AllowanceScopeFilter, "binding__server", "workspace"]
    list_select_related = [
        "binding__server",
        "workspace",
        "thread",
        "granted_by",
        "revoked_by",
        "approval",
    ]
    search_fields = ["tool_name"]
    date_hierarchy = "created_at"
    actions = ["revoke_selected"]
    readonly_fields = [f.name for f in Allowance._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.display(description="app", ordering="binding__server__name")
    def app(self, obj: Allowance) -> str:
        return obj.binding.server.name

    @admin.display(description="scope")
    def scope_label(self, obj: Allowance) -> str:
        return "this thread" if obj.thread_id else "whole workspace"

    @admin.display(description="state", ordering="revoked_at")
    def state(self, obj: Allowance) -> str:
        if obj.revoked_at is None:
            return "active"
        who = obj.revoked_by.get_username() if obj.revoked_by else "?"
        when = timezone.localtime(obj.revoked_at).strftime("%Y-%m-%d %H:%M")
        return f"revoked by {who}, {when}"

    @admin.action(description="Revoke selected allowances", permissions=["change"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[Allowance]) -> None:
        revoked = 0
        for allowance in queryset.filter(revoked_at__isnull=True).order_by("pk"):
            try:
                services.revoke_allowance(
                    allowance_id=allowance.pk, actor=request.user, role=None, actor_label="admin"
                )
            except services.BindingError as exc:
                self.message_user(request, f"#{allowance.pk}: {exc.message}", messages.ERROR)
            else:
                revoked += 1
        self.message_user(
            request,
            f"Revoked {revoked} allowance{'s' if revoked != 1 else ''}; the next calls they "
            "covered ask again."
            if revoked
            else "Nothing to revoke: the selected allowances were already revoked.",
        )


# ----------------------------------------------------------------------------- audit log


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
