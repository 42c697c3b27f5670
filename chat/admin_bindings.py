"""The admin of bindings' rows: app bindings (with their tool policies) and allowances.

It lives in chat, not in bindings, because it shows and picks workspaces and threads by
name, and those are chat's models (layers import downwards only). The models stay
bindings': the admin's app label, URLs (``/admin/bindings/…``) and templates are
bindings'. ``chat/admin.py`` imports this module, so registering it needs nothing else.

Rules this module enforces:

- **Every change of a binding or a tool policy is audited**, with the admin user as actor,
  in the admin's own transaction, by the service that makes it (``bindings.services``:
  ``binding_create`` / ``binding_update`` / ``binding_set_enabled`` / ``binding_remove``,
  ``tool_policy_set`` / ``tool_policy_remove``).
- **A visibility override can only narrow** what the tool declares: the checkboxes offer
  ``model`` and ``app``, and ticking one the tool does not declare is refused.
- **Approvals are decided in chat's admin** (``chat/admin.py``): deciding one runs its
  call, which only chat may do (``chat.calls.approvals.approval_decide``).
- **Allowances are listed, never edited**: the only change is *Revoke* (staff may revoke
  any allowance, since revoking only narrows; audited with the admin user as actor).
- Bindings' rows keep workspaces and threads as plain ids (no foreign key): their names
  come from chat's tables here (one subquery per list).
"""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from bindings import policy
from bindings.models import Allowance, AppBinding, CspDomainMode, ToolPolicy
from bindings.services.allowances import allowance_revoke
from bindings.services.bindings import (
    binding_create,
    binding_remove,
    binding_set_enabled,
    binding_settings,
    binding_update,
)
from bindings.services.errors import BindingError
from bindings.services.policies import tool_policy_remove, tool_policy_set
from mcp_bridge.csp import CSP_CATEGORIES, PERMISSION_NAMES, validate_domain
from mcp_bridge.models import Tool, UiResource

from .app_view_bridge import effective_csp
from .models import Thread, Workspace

VISIBILITY_CHOICES = [("model", "model (offered to the model, /call)"), ("app", "app (its views)")]
_SCHEME_RE = re.compile(r"^[a-z][a-z0-9+.\-]*$")


def _actor_id(request: HttpRequest) -> int | None:
    return getattr(request.user, "pk", None)


def with_scope_names(queryset: QuerySet, workspace_id: str, thread_id: str) -> QuerySet:
    """Annotate ``_workspace_name`` and ``_thread_title`` (lists, search, ordering)."""
    workspaces = Workspace.objects.filter(pk=OuterRef(workspace_id))
    threads = Thread.objects.filter(pk=OuterRef(thread_id))
    return queryset.annotate(
        _workspace_name=Subquery(workspaces.values("name")[:1]),
        _thread_title=Subquery(threads.values("title")[:1]),
    )


class WorkspaceFilter(admin.SimpleListFilter):
    title = "workspace"
    parameter_name = "workspace"
    field = "workspace_id"

    def lookups(self, request, model_admin):
        rows = Workspace.objects.order_by("name").values_list("pk", "name")
        return [(str(pk), name) for pk, name in rows]

    def queryset(self, request, queryset):
        value = self.value()
        return queryset.filter(**{self.field: value}) if value and value.isdigit() else queryset


class ApprovalWorkspaceFilter(WorkspaceFilter):
    # An approval's workspace is its binding's (the binding applied to its thread).
    field = "binding__workspace_id"


# ----------------------------------------------------------------------------- bindings


def _schemes(raw: str) -> list[str]:
    return [
        s.strip().lower().removesuffix("://").removesuffix(":")
        for s in re.split(r"[,\s]+", raw)
        if s.strip()
    ]


class AppBindingForm(forms.ModelForm):
    workspace = forms.ModelChoiceField(queryset=None)
    thread = forms.ModelChoiceField(
        queryset=None,
        required=False,
        widget=forms.NumberInput,
        help_text="Leave empty to bind to the whole workspace; a thread binding beats the "
        "workspace's binding of the same server in that thread.",
    )
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
        "frameDomains, baseUriDomains). A list narrows what the server declares. Empty: "
        "what the CSP domains setting above says (every declared public domain, or none).",
    )

    class Meta:
        model = AppBinding
        fields = [
            "server",
            "enabled",
            "enabled_tools",
            "granted_permissions",
            "allowed_link_schemes",
            "deep_link_protocol",
            "ui_message_rate_limit",
            "csp_domain_mode",
            "allowed_domains",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "csp_domain_mode" in self.fields:
            # Optional in a post: left out keeps the stored mode (a new binding: declared).
            self.fields["csp_domain_mode"].required = False
        if "workspace" in self.fields:
            self.fields["workspace"].queryset = Workspace.objects.order_by("name")
        if "thread" in self.fields:
            self.fields["thread"].queryset = Thread.objects.all()
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

    def clean_csp_domain_mode(self) -> str:
        return (
            self.cleaned_data.get("csp_domain_mode")
            or self.instance.csp_domain_mode
            or CspDomainMode.DECLARED
        )

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
        if "workspace" in self.fields:
            workspace = data.get("workspace")
            thread = data.get("thread")
            workspace_id = getattr(workspace, "pk", None)
            thread_id = getattr(thread, "pk", None)
        else:
            workspace_id, thread_id = self.instance.workspace_id, self.instance.thread_id
        if server is None or workspace_id is None:
            return data
        if "thread" in self.fields and thread is not None and thread.workspace_id != workspace_id:
            self.add_error("thread", "That thread belongs to another workspace.")
        duplicate = AppBinding.objects.filter(
            server=server, workspace_id=workspace_id, thread_id=thread_id
        ).exclude(pk=self.instance.pk)
        if duplicate.exists():
            raise forms.ValidationError(
                "This server is already bound to that scope; edit that binding instead."
            )
        tools = data.get("enabled_tools") or []
        if tools:
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
        if "workspace" in self.fields and self.cleaned_data.get("workspace") is not None:
            self.instance.workspace_id = self.cleaned_data["workspace"].pk
            thread = self.cleaned_data.get("thread")
            self.instance.thread_id = thread.pk if thread is not None else None
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
            return queryset.filter(thread_id__isnull=True)
        if self.value() == "thread":
            return queryset.filter(thread_id__isnull=False)
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
    list_filter = ["enabled", ScopeFilter, "server", WorkspaceFilter]
    list_select_related = ["server"]
    search_fields = ["server__name", "server__slug", "_workspace_name", "_thread_title"]
    inlines = [ToolPolicyInline]
    actions = ["enable_bindings", "disable_bindings"]
    readonly_fields = ["declared_domains", "created_by", "created_at", "updated_at"]
    radio_fields = {"csp_domain_mode": admin.VERTICAL}

    def get_queryset(self, request: HttpRequest) -> QuerySet[AppBinding]:
        queryset = super().get_queryset(request).annotate(_policies=Count("policies"))
        return with_scope_names(queryset, "workspace_id", "thread_id")

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
                        "csp_domain_mode",
                        "allowed_domains",
                        "declared_domains",
                    ]
                },
            ),
            ("History", {"fields": ["created_by", "created_at", "updated_at"]}),
        ]

    @admin.display(description="declared by the server")
    def declared_domains(self, obj: AppBinding | None) -> SafeString | str:
        """What the server's UI resources declare (``_meta.ui.csp``), read-only, and
        whether this binding, as saved, lets its views reach each domain."""
        if obj is None or obj.pk is None:
            return "Shown once the binding is saved."
        rows = declared_domain_rows(obj)
        if not rows:
            return "The server's views declare no external domains."
        return format_html(
            '<table class="declared-domains"><thead><tr><th>View</th><th>Category</th>'
            "<th>Domain</th><th>Reachable</th></tr></thead><tbody>{}</tbody></table>",
            format_html_join(
                "",
                "<tr><td><code>{}</code></td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
                rows,
            ),
        )

    @admin.display(description="workspace", ordering="_workspace_name")
    def workspace(self, obj: AppBinding) -> str:
        return getattr(obj, "_workspace_name", None) or f"#{obj.workspace_id}"

    @admin.display(description="thread")
    def thread(self, obj: AppBinding) -> str:
        if not obj.thread_id:
            return "–"
        return getattr(obj, "_thread_title", None) or f"#{obj.thread_id}"

    @admin.display(description="scope")
    def scope_display(self, obj: AppBinding) -> str:
        return f"thread: {self.thread(obj)}" if obj.thread_id else "workspace"

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
        wanted = binding_settings(obj)
        if change:
            stored = binding_update(
                binding_id=obj.pk, changes=wanted, actor=request.user, actor_label="admin"
            )
            obj.updated_at = stored.updated_at
            return
        created = binding_create(
            server=obj.server,
            workspace=form.cleaned_data["workspace"],
            thread=form.cleaned_data.get("thread"),
            actor=request.user,
            enabled_tools=obj.enabled_tools or None,
            allowed_domains=obj.allowed_domains,
            granted_permissions=list(obj.granted_permissions or []),
            allowed_link_schemes=list(obj.allowed_link_schemes or []),
            deep_link_protocol=obj.deep_link_protocol,
            ui_message_rate_limit=obj.ui_message_rate_limit,
            enabled=obj.enabled,
        )
        # What binding_create cannot express (a disabled binding, no link schemes at all).
        adjust = {k: v for k, v in wanted.items() if binding_settings(created)[k] != v}
        if adjust:
            created = binding_update(
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
        binding_remove(binding_id=obj.pk, actor=request.user, actor_label="admin")

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[AppBinding]) -> None:
        with transaction.atomic():
            for pk in list(queryset.values_list("pk", flat=True)):
                binding_remove(binding_id=pk, actor=request.user, actor_label="admin")

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
            tool_policy_remove(
                binding=binding, tool_name=stored.tool_name, actor=request.user, actor_label="admin"
            )
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
                tool_policy_remove(
                    binding=binding,
                    tool_name=previous_name,
                    actor=request.user,
                    actor_label="admin",
                )
            row = tool_policy_set(
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

    def _set_enabled(self, request: HttpRequest, queryset: QuerySet[AppBinding], on: bool) -> int:
        return binding_set_enabled(
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
            return queryset.filter(thread_id__isnull=self.value() == "workspace")
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
    list_filter = [AllowanceStateFilter, AllowanceScopeFilter, "binding__server", WorkspaceFilter]
    list_select_related = [
        "binding__server",
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

    def get_queryset(self, request: HttpRequest) -> QuerySet[Allowance]:
        return with_scope_names(super().get_queryset(request), "workspace_id", "thread_id")

    @admin.display(description="workspace", ordering="_workspace_name")
    def workspace(self, obj: Allowance) -> str:
        return getattr(obj, "_workspace_name", None) or f"#{obj.workspace_id}"

    @admin.display(description="thread", ordering="_thread_title")
    def thread(self, obj: Allowance) -> str:
        if not obj.thread_id:
            return "–"
        return getattr(obj, "_thread_title", None) or f"#{obj.thread_id}"

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
                allowance_revoke(
                    allowance_id=allowance.pk, actor=request.user, role=None, actor_label="admin"
                )
            except BindingError as exc:
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


MAX_DECLARED_VIEWS = 20


def declared_domain_rows(binding: AppBinding) -> list[tuple[str, str, str, str]]:
    """(view URI, category, declared domain, whether the binding's views reach it — or why
    not) for the newest version of each of the server's UI resources."""
    newest: dict[str, UiResource] = {}
    for resource in UiResource.objects.filter(server_id=binding.server_id).order_by(
        "uri", "-fetched_at"
    ):
        newest.setdefault(resource.uri, resource)
        if len(newest) > MAX_DECLARED_VIEWS:
            break
    rows: list[tuple[str, str, str, str]] = []
    for uri, resource in list(newest.items())[:MAX_DECLARED_VIEWS]:
        declared = (resource.meta or {}).get("csp")
        if not isinstance(declared, dict):
            continue
        csp = effective_csp(resource, binding)
        for category in CSP_CATEGORIES:
            values = declared.get(category)
            if not isinstance(values, list):
                continue
            kept = set(csp.effective.get(category, []))
            reasons = {d["value"]: d["reason"] for d in csp.dropped if d["category"] == category}
            for value in values:
                shown = str(value)[:200]
                normalized, invalid = validate_domain(value)
                if normalized is None:
                    verdict = f"no — invalid: {invalid}"
                elif normalized in kept:
                    verdict = "yes"
                else:
                    verdict = "no — " + reasons.get(shown, "not allowed by the app binding")
                rows.append((uri, category, shown, verdict))
    return rows
