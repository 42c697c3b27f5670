"""MCP servers, their catalogue and UI resources in the admin.

- env and header *values* are write-only: the form shows which keys are stored, never their
  values (they may be secrets).
- Server changes are audited (SERVER_ADDED / SERVER_CHANGED / SERVER_REMOVED) with key names
  only, never values.
- "Refresh catalogue" asks the server for ``tools/list`` now (through a blocking bridge, as
  sync code does) and reports success or the server's error.
- OAuth grants: who connected which server, when, until when; never a token. *Disconnect*
  deletes a grant (audited); a shared grant is connected from the server's page.
- The catalogue (tools, UI resources) is what the servers said: read-only here. Narrowing a
  tool's visibility, its risk or its approval is a tool policy on an app binding.
"""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from . import gateway
from .errors import BridgeError
from .models import LOG_LEVELS, AuthMode, McpServer, OAuthGrant, ServerLogEntry, Tool, UiResource
from .services.catalogue import catalogue_apply
from .services.oauth_grants import grant_disconnect
from .services.server_log import server_log_level_set
from .services.servers import (
    env_reference_problem,
    server_change_refused,
    server_record_health,
    server_remove,
    server_save,
    spec_for,
)


class McpServerForm(forms.ModelForm):
    env = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "autocomplete": "off"}),
        help_text="KEY=VALUE per line (values are hidden once saved; leave empty to keep; "
        "write ${ATRIUM_MCP_NAME} to read that variable from the environment; only names "
        "starting with ATRIUM_MCP_ are allowed).",
    )
    headers = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "autocomplete": "off"}),
        help_text="Header: value per line (hidden once saved; leave empty to keep).",
    )
    # A client registered with the server's authorization server ahead of time (sealed,
    # never shown back; docs/mcp-client.md "Signing in"). Empty: keep what is stored.
    oauth_client_id = forms.CharField(
        label="OAuth client id",
        required=False,
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
        help_text="A pre-registered client (OAuth modes) or the machine's client "
        "(client credentials). Hidden once saved; leave empty to keep.",
    )
    oauth_client_secret = forms.CharField(
        label="OAuth client secret",
        required=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}, render_value=False),
        help_text="Hidden once saved; leave empty to keep.",
    )
    oauth_private_key = forms.CharField(
        label="OAuth private key (PEM)",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "autocomplete": "off"}),
        help_text="Client credentials with a private-key JWT instead of a secret. Hidden "
        "once saved; leave empty to keep.",
    )
    oauth_signing_algorithm = forms.ChoiceField(
        label="JWT signing algorithm",
        required=False,
        choices=[("", "RS256 (default)")]
        + [(a, a) for a in ("RS256", "RS384", "RS512", "ES256", "ES384", "PS256")],
    )
    oauth_client_forget = forms.BooleanField(
        label="Forget the stored OAuth client",
        required=False,
        help_text="Back to client ID metadata documents or dynamic registration.",
    )

    class Meta:
        model = McpServer
        fields = [
            "name",
            "slug",
            "transport",
            "command",
            "args",
            "env",
            "cwd",
            "url",
            "headers",
            "auth_mode",
            "oauth_client_id",
            "oauth_client_secret",
            "oauth_private_key",
            "oauth_signing_algorithm",
            "oauth_client_forget",
            "oauth_token_auth",
            "oauth_scope",
            "oauth_issuer",
            "enabled",
            "call_timeout",
            "connect_timeout",
            "sandbox_subdomain",
        ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["auth_mode"].required = False
        # Show which keys exist, never their values.
        for name in ("env", "headers"):
            stored = getattr(self.instance, name, None) or {}
            self.initial[name] = ""
            if stored:
                self.fields[name].help_text += f" Stored: {', '.join(sorted(stored))}."
        client = getattr(self.instance, "oauth_client", None) or {}
        for part, field in OAUTH_CLIENT_PARTS.items():
            if client.get(part) and field in self.fields:
                self.fields[field].help_text += " (One is stored.)"

    @staticmethod
    def _parse(raw: str, sep: str) -> dict[str, str]:
        result: dict[str, str] = {}
        for line in raw.splitlines():
            if not line.strip():
                continue
            if sep not in line:
                raise forms.ValidationError(f"Expected KEY{sep}VALUE, got {line[:40]!r}.")
            key, value = line.split(sep, 1)
            problem = env_reference_problem(value.strip())
            if problem:
                raise forms.ValidationError(problem)
            result[key.strip()] = value.strip()
        return result

    def clean_env(self) -> dict[str, str]:
        raw = self.cleaned_data.get("env") or ""
        return self._parse(raw, "=") if raw.strip() else (self.instance.env or {})

    def clean_headers(self) -> dict[str, str]:
        raw = self.cleaned_data.get("headers") or ""
        return self._parse(raw, ":") if raw.strip() else (self.instance.headers or {})

    def clean_auth_mode(self) -> str:
        # Optional in a post: left out keeps the stored mode (or none, for a new server).
        return self.cleaned_data.get("auth_mode") or self.instance.auth_mode or AuthMode.NONE

    def clean(self) -> dict:
        cleaned = super().clean()
        mode = cleaned.get("auth_mode")
        oauth = mode in (AuthMode.OAUTH_SHARED, AuthMode.OAUTH_MEMBER, AuthMode.OAUTH_MACHINE)
        if oauth and cleaned.get("transport") == "stdio":
            self.add_error("auth_mode", "OAuth sign-in needs an HTTP server (a URL), not stdio.")
        if "oauth_client_id" not in self.fields:
            return cleaned  # not a superuser: the client is neither shown nor changed
        client = (
            {} if cleaned.get("oauth_client_forget") else dict(self.instance.oauth_client or {})
        )
        for part, field in OAUTH_CLIENT_PARTS.items():
            value = str(cleaned.get(field) or "").strip()
            if value:
                client[part] = value
        if client and not client.get("client_id"):
            self.add_error("oauth_client_id", "A client secret or key needs its client id.")
        if mode == AuthMode.OAUTH_MACHINE and not (
            client.get("client_id") and (client.get("client_secret") or client.get("private_key"))
        ):
            self.add_error(
                "oauth_client_id",
                "Client credentials need a client id and a client secret or a private key.",
            )
        self.instance.oauth_client = client
        return cleaned

    @property
    def oauth_client_changed(self) -> bool:
        return any(
            f in self.changed_data for f in (*OAUTH_CLIENT_PARTS.values(), "oauth_client_forget")
        )


# The stored parts of a pre-registered OAuth client and the form fields that set them.
OAUTH_CLIENT_PARTS = {
    "client_id": "oauth_client_id",
    "client_secret": "oauth_client_secret",
    "private_key": "oauth_private_key",
    "signing_algorithm": "oauth_signing_algorithm",
}


# What a server executes or where it connects (and with which secrets): superusers only
# (DESIGN §8.11). Other staff with the change permission may enable/disable a server and
# tune its timeouts; the connection fields are not even shown to them (they hold secrets).
CONNECTION_FIELDS = (
    "transport",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "oauth_token_auth",
    "oauth_scope",
    "oauth_issuer",
    "oauth_client_id",
    "oauth_client_secret",
    "oauth_private_key",
    "oauth_signing_algorithm",
    "oauth_client_forget",
)


def _is_superuser(request: HttpRequest) -> bool:
    return bool(getattr(request.user, "is_superuser", False))


class ToolInline(admin.TabularInline):
    model = Tool
    extra = 0
    fields = ["name", "title", "visibility", "resource_uri", "annotations", "present"]
    readonly_fields = fields
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None) -> bool:
        return False


class HealthFilter(admin.SimpleListFilter):
    title = "health"
    parameter_name = "health"

    def lookups(self, request, model_admin):
        return [("ok", "answering"), ("error", "last attempt failed"), ("never", "never seen")]

    def queryset(self, request, queryset):
        if self.value() == "ok":
            return queryset.filter(last_seen__isnull=False, last_error="")
        if self.value() == "error":
            return queryset.exclude(last_error="")
        if self.value() == "never":
            return queryset.filter(last_seen__isnull=True, last_error="")
        return queryset


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin):
    form = McpServerForm
    list_display = [
        "name",
        "slug",
        "transport",
        "enabled",
        "healthy",
        "last_seen",
        "short_error",
        "tool_count",
        "binding_count",
    ]
    list_filter = ["transport", "enabled", HealthFilter]
    search_fields = ["name", "slug"]
    readonly_fields = ["last_error", "last_seen", "catalogue_refreshed_at", "sign_in"]
    inlines = [ToolInline]
    actions = ["refresh_catalogue"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A new server is a new command or URL.
        return _is_superuser(request) and super().has_add_permission(request)

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context=None):
        if not _is_superuser(request) and request.user.is_staff:
            # Outside the admin's transaction: the refusal's audit row commits.
            server_change_refused(
                actor=request.user, attempt="add server", method=request.method, actor_label="admin"
            )
            raise PermissionDenied("Only superusers add MCP servers.")
        return super().add_view(request, form_url, extra_context)

    def get_fields(self, request: HttpRequest, obj=None):
        fields = list(super().get_fields(request, obj))
        if _is_superuser(request):
            return fields
        return [f for f in fields if f not in CONNECTION_FIELDS] + ["connection"]

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        if _is_superuser(request):
            return fields
        return [*fields, "name", "slug", "sandbox_subdomain", "connection"]

    def get_form(self, request: HttpRequest, obj=None, change: bool = False, **kwargs):
        if not _is_superuser(request):
            kwargs["fields"] = [
                f
                for f in McpServerForm.Meta.fields
                if f not in CONNECTION_FIELDS and f not in ("name", "slug", "sandbox_subdomain")
            ]
        return super().get_form(request, obj, change, **kwargs)

    @admin.display(description="connection")
    def connection(self, obj: McpServer) -> str:
        """What non-superusers see of the connection: its kind, never a command or URL."""
        if obj.transport == "stdio":
            return "stdio (a local command; only superusers see or change it)"
        return f"{obj.transport} (a URL; only superusers see or change it)"

    def get_queryset(self, request: HttpRequest) -> QuerySet[McpServer]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                _tools=Count("tools", filter=Q(tools__present=True), distinct=True),
                _bindings=Count("bindings", distinct=True),
            )
        )

    @admin.display(description="sign-in")
    def sign_in(self, obj: McpServer) -> str:
        """Who is connected, and (shared mode) the button that connects for everyone.
        The button posts the change form's CSRF token to the connect view (formaction)."""
        if obj.pk is not None and obj.auth_mode == AuthMode.OAUTH_MACHINE:
            return "Client credentials: Atrium signs in with the server's own client."
        if obj.pk is None or obj.auth_mode not in (AuthMode.OAUTH_SHARED, AuthMode.OAUTH_MEMBER):
            return "No OAuth sign-in (set the auth mode to an OAuth mode and save)."
        grants = obj.oauth_grants.count()
        listing = reverse("admin:mcp_bridge_oauthgrant_changelist") + f"?server__id__exact={obj.pk}"
        if obj.auth_mode == AuthMode.OAUTH_MEMBER:
            summary, label = f"{grants} member(s) connected.", "Connect my account"
        else:
            summary = "Connected for everyone." if grants else "Not connected."
            label = "Connect again" if grants else "Connect for everyone"
        return format_html(
            '{} <button type="submit" class="button" formaction="{}" formmethod="post" '
            'formtarget="_blank">{}</button> <a href="{}">Show grants</a>',
            summary,
            reverse("oauth-connect", args=[obj.slug]),
            label,
            listing,
        )

    @admin.display(description="healthy", boolean=True)
    def healthy(self, obj: McpServer) -> bool | None:
        if obj.last_error:
            return False
        return True if obj.last_seen else None

    @admin.display(description="last error")
    def short_error(self, obj: McpServer) -> str:
        return (obj.last_error or "")[:80]

    @admin.display(description="tools", ordering="_tools")
    def tool_count(self, obj: McpServer) -> int:
        return getattr(obj, "_tools", 0)

    @admin.display(description="bindings", ordering="_bindings")
    def binding_count(self, obj: McpServer) -> int:
        return getattr(obj, "_bindings", 0)

    @admin.action(description="Refresh catalogue (ask the servers for their tools now)")
    def refresh_catalogue(self, request: HttpRequest, queryset: QuerySet[McpServer]) -> None:
        servers = list(queryset)
        with gateway.blocking_bridge() as bridge:
            for server in servers:
                if not server.enabled:
                    self.message_user(
                        request, f"{server.name}: disabled, not refreshed.", messages.WARNING
                    )
                    continue
                try:
                    tools = bridge.list_tools(spec_for(server))
                except BridgeError as exc:
                    server_record_health(server_id=server.pk, error=exc.user_message)
                    self.message_user(request, f"{server.name}: {exc.user_message}", messages.ERROR)
                    continue
                except Exception as exc:  # a broken config must not crash the admin
                    server_record_health(server_id=server.pk, error=str(exc)[:500])
                    self.message_user(request, f"{server.name}: {exc}", messages.ERROR)
                    continue
                change = catalogue_apply(server=server, tools=tools)
                summary = (
                    ", ".join(
                        f"{len(names)} {label}"
                        for names, label in (
                            (change.added, "added"),
                            (change.updated, "updated"),
                            (change.removed, "removed"),
                        )
                        if names
                    )
                    or "no change"
                )
                problems = f"; {len(change.problems)} with problems" if change.problems else ""
                self.message_user(
                    request,
                    f"{server.name}: {len(tools)} tools ({summary}{problems}).",
                    messages.WARNING if change.problems else messages.SUCCESS,
                )

    # -- audited writes (key names only: values may be secrets) -----------------------

    def save_model(self, request: HttpRequest, obj: McpServer, form, change: bool) -> None:
        if not _is_superuser(request) and not change:
            raise PermissionDenied("Only superusers add servers.")  # add_view audits it
        secrets = [name for name in ("env", "headers") if name in form.changed_data]
        secrets += [
            n for n in ("oauth_token_auth", "oauth_scope", "oauth_issuer") if n in form.changed_data
        ]
        if getattr(form, "oauth_client_changed", False):
            secrets.append("oauth_client")  # its name only, never a value
        server_save(server=obj, actor=request.user, actor_label="admin", secrets_changed=secrets)

    def delete_model(self, request: HttpRequest, obj: McpServer) -> None:
        server_remove(server=obj, actor=request.user, actor_label="admin")

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[McpServer]) -> None:
        with transaction.atomic():
            for server in queryset:
                self.delete_model(request, server)


class ReadOnlyCatalogueAdmin(admin.ModelAdmin):
    """Catalogue rows mirror what a server says; a refresh would overwrite any edit."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


class CallableFilter(admin.SimpleListFilter):
    title = "callable"
    parameter_name = "callable"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("yes", "Yes"), ("no", "No (input schema refused)")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Tool]) -> QuerySet[Tool]:
        if self.value() == "yes":
            return queryset.filter(schema_refusal="")
        if self.value() == "no":
            return queryset.exclude(schema_refusal="")
        return queryset


@admin.register(Tool)
class ToolAdmin(ReadOnlyCatalogueAdmin):
    """A tool whose input schema was refused when the catalogue was read (too complex to
    check: ``mcp_bridge.schema.measure_input_schema``) is listed but cannot be called;
    the list and the tool's page say why."""

    list_display = [
        "name",
        "server",
        "title",
        "visibility",
        "resource_uri",
        "present",
        "is_callable",
    ]
    list_filter = ["server", "present", CallableFilter, "is_app_sdk"]
    list_select_related = ["server"]
    search_fields = ["name", "title", "description"]
    fields = [
        "server",
        "name",
        "title",
        "callable_status",
        "description",
        "input_schema",
        "inline_check_values",
        "output_schema",
        "annotations",
        "visibility",
        "resource_uri",
        "is_app_sdk",
        "meta",
        "problems",
        "present",
    ]
    readonly_fields = ["callable_status"]

    @admin.display(description="callable", boolean=True, ordering="schema_refusal")
    def is_callable(self, obj: Tool) -> bool:
        return not obj.schema_refusal

    @admin.display(description="callable")
    def callable_status(self, obj: Tool) -> str:
        if obj.schema_refusal:
            return f"No — {obj.schema_refusal}."
        return "Yes"


@admin.register(UiResource)
class UiResourceAdmin(ReadOnlyCatalogueAdmin):
    list_display = ["uri", "server", "flavor", "mime_type", "size", "fetched_at"]
    list_filter = ["server", "flavor"]
    list_select_related = ["server"]
    exclude = ["text"]
    readonly_fields = ["server", "uri", "mime_type", "flavor", "content_hash", "meta", "size"]


@admin.register(OAuthGrant)
class OAuthGrantAdmin(admin.ModelAdmin):
    """Who connected which server (no secrets: the sealed columns are never shown)."""

    list_display = ["server", "owner", "connected_by", "connected_at", "expires_at", "refreshed_at"]
    list_filter = ["server"]
    list_select_related = ["server", "user", "connected_by"]
    search_fields = ["server__name", "user__username"]
    fields = [
        "server",
        "owner",
        "connected_by",
        "scope",
        "connected_at",
        "expires_at",
        "refreshed_at",
    ]
    readonly_fields = fields
    actions = ["disconnect"]

    @admin.display(description="account of")
    def owner(self, obj: OAuthGrant) -> str:
        return obj.user.get_username() if obj.user else "everyone (shared)"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def get_actions(self, request: HttpRequest):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # Disconnect says what it does
        return actions

    def delete_model(self, request: HttpRequest, obj: OAuthGrant) -> None:
        # Deleting a grant (its page, or a server's removal) is a disconnect: audited.
        grant_disconnect(grant=obj, actor=request.user, reason="admin")

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[OAuthGrant]) -> None:
        for grant in queryset:
            self.delete_model(request, grant)

    @admin.action(description="Disconnect (delete the grant and its tokens)")
    def disconnect(self, request: HttpRequest, queryset: QuerySet[OAuthGrant]) -> None:
        grants = list(queryset)
        for grant in grants:
            grant_disconnect(grant=grant, actor=request.user, reason="admin")
        self.message_user(request, f"Disconnected {len(grants)} grant(s).", messages.SUCCESS)


# ---- the per-server log (issue 25: MCP logging; docs/mcp-client.md) ----------------------


class ServerLogLevelForm(forms.Form):
    server = forms.ModelChoiceField(queryset=McpServer.objects.order_by("name"))
    level = forms.ChoiceField(
        choices=[("", "the server's default")] + [(v, v) for v in LOG_LEVELS],
        required=False,
        help_text="The lowest level the server is asked to send. It applies from the "
        "server's next request (a new connection asks for it).",
    )


@admin.register(ServerLogEntry)
class ServerLogEntryAdmin(admin.ModelAdmin):
    """What servers logged (`notifications/message`): read-only, newest first, bounded per
    server. *Set log level* changes what a server is asked to send (audited)."""

    list_display = ["received_at", "server", "level", "logger", "short_data"]
    list_filter = ["server", "level"]
    list_select_related = ["server"]
    search_fields = ["logger", "data"]
    ordering = ["-id"]
    fields = ["server", "level", "logger", "data", "received_at"]
    readonly_fields = fields
    change_list_template = "admin/mcp_bridge/serverlogentry/change_list.html"

    @admin.display(description="data")
    def short_data(self, obj: ServerLogEntry) -> str:
        text = obj.data if isinstance(obj.data, str) else json.dumps(obj.data, default=str)
        return text if len(text) <= 160 else text[:159] + "…"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def get_urls(self):
        urls = super().get_urls()
        own = [
            path(
                "level/",
                self.admin_site.admin_view(self.set_level_view),
                name="mcp_bridge_serverlogentry_level",
            )
        ]
        return own + urls

    def set_level_view(self, request: HttpRequest) -> HttpResponse:
        # What a server is asked to send is its configuration: superusers only (§8.11).
        if not _is_superuser(request):
            raise PermissionDenied
        form = ServerLogLevelForm(request.POST or None, initial=request.GET or None)
        if request.method == "POST" and form.is_valid():
            server = form.cleaned_data["server"]
            level = form.cleaned_data["level"] or ""
            changed = server_log_level_set(server=server, level=level, actor=request.user)
            shown = level or "the server's default"
            self.message_user(
                request,
                f"{server.name}: log level set to {shown}."
                if changed
                else f"{server.name}: log level was already {shown}.",
                messages.SUCCESS,
            )
            return redirect("admin:mcp_bridge_serverlogentry_changelist")
        levels = McpServer.objects.order_by("name").values_list("name", "log_level")
        context = {
            **self.admin_site.each_context(request),
            "title": "Set a server's log level",
            "form": form,
            "levels": [(name, level or "default") for name, level in levels],
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/mcp_bridge/serverlogentry/set_level.html", context)
