"""Audit review pages (staff only): the report, and CSV / JSON exports of the same filter.

Access: the person must be signed in (anonymous → the login page), be active staff, and be
allowed to view audit events (``audit.view_auditevent``; superusers are). Anyone else
gets 403 — workspace owners included: the audit log spans every workspace.

Thin: the filter form turns the query string into :class:`audit_review.reports.ReportFilters`;
everything else is :mod:`audit_review.reports`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

from audit.types import Decision
from bindings.models import AppBinding
from bindings.policy import ActionKind
from chat.models import Thread, Workspace
from mcp_bridge.models import McpServer

from . import reports

PAGE_SIZE = 50
MAX_RANGE_DAYS = 3660
AUDIT_PERMISSION = "audit.view_auditevent"

# Actions that services (and the admin) record besides the policy's action kinds.
EXTRA_ACTIONS = ("approval", "tool_result", "admin")


def can_review_audit(user: Any) -> bool:
    return bool(
        user is not None
        and user.is_authenticated
        and user.is_active
        and user.is_staff
        and user.has_perm(AUDIT_PERMISSION)
    )


def staff_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Anonymous → login (with ?next=); signed in without the audit permission → 403."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not can_review_audit(request.user):
            raise PermissionDenied("Audit review is for staff with access to the audit log.")
        return view(request, *args, **kwargs)

    return wrapper


class BindingChoiceField(forms.ModelChoiceField):
    """Bindings labelled with their server, workspace and thread (names looked up by id:
    a binding keeps only the ids of its workspace and thread)."""

    workspace_names: dict[int, str]
    thread_titles: dict[int, str]

    def label_from_instance(self, obj: Any) -> str:
        if obj.thread_id:
            scope = f"thread “{self.thread_titles.get(obj.thread_id, obj.thread_id)}”"
        else:
            scope = "whole workspace"
        state = "" if obj.enabled else " — disabled"
        workspace = self.workspace_names.get(obj.workspace_id, f"workspace #{obj.workspace_id}")
        return f"#{obj.pk} {obj.server.name} → {workspace} ({scope}){state}"


class AuditFilterForm(forms.Form):
    since = forms.DateField(
        required=False, label="From", widget=forms.DateInput(attrs={"type": "date"})
    )
    until = forms.DateField(
        required=False, label="To", widget=forms.DateInput(attrs={"type": "date"})
    )
    workspace = forms.ModelChoiceField(
        queryset=Workspace.objects.order_by("name"), required=False, empty_label="All workspaces"
    )
    server = forms.ModelChoiceField(
        queryset=McpServer.objects.order_by("name"), required=False, empty_label="All servers"
    )
    binding = BindingChoiceField(
        queryset=AppBinding.objects.select_related("server"),
        required=False,
        empty_label="All bindings",
    )
    actor = forms.CharField(
        required=False,
        max_length=150,
        label="Actor (username)",
        widget=forms.TextInput(attrs={"placeholder": "e.g. olivia", "autocomplete": "off"}),
    )
    actor_kind = forms.ChoiceField(required=False, label="Actor kind")
    action = forms.ChoiceField(required=False, label="Action")
    category = forms.ChoiceField(required=False, label="Event category")
    decision = forms.ChoiceField(required=False, label="Decision")
    tool = forms.CharField(required=False, max_length=200, label="Tool name")
    reason = forms.CharField(required=False, max_length=200, label="Reason code")

    ADVANCED = ("actor_kind", "category", "tool", "reason")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        bindings = list(AppBinding.objects.select_related("server").order_by("server__name", "pk"))
        names = reports.names_by_id(Workspace, (b.workspace_id for b in bindings), "name")
        titles = reports.names_by_id(Thread, (b.thread_id for b in bindings), "title")
        bindings.sort(key=lambda b: (names.get(b.workspace_id, ""), b.server.name, b.pk))
        field = self.fields["binding"]
        field.workspace_names, field.thread_titles = names, titles
        field.choices = [("", field.empty_label)] + [
            (b.pk, field.label_from_instance(b)) for b in bindings
        ]
        self.fields["actor_kind"].choices = [("", "Any actor kind")] + [
            (k, k.replace("_", " ")) for k in reports.ACTOR_KINDS
        ]
        known = [str(kind) for kind in ActionKind] + list(EXTRA_ACTIONS)
        self.fields["action"].choices = [("", "All actions")] + [(a, a) for a in known]
        self.fields["category"].choices = [("", "All categories")] + [
            (c, c) for c in reports.CATEGORIES
        ]
        self.fields["decision"].choices = [("", "All decisions")] + Decision.choices()

    def allow_action(self, value: str) -> None:
        """Accept an action value services recorded that the known list lacks (a link from
        elsewhere), without scanning the log for every distinct value."""
        field = self.fields["action"]
        if value and value not in {v for v, _ in field.choices} and len(value) <= 40:
            field.choices = [*field.choices, (value, value)]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        since, until = data.get("since"), data.get("until")
        if since and until and since > until:
            self.add_error("until", "The end date is before the start date.")
        elif since and until and (until - since).days > MAX_RANGE_DAYS:
            self.add_error("since", "Choose a range of at most ten years.")
        return data

    def to_filters(self) -> reports.ReportFilters:
        """The filters of the valid fields (invalid ones are left out, and shown as errors)."""
        data = getattr(self, "cleaned_data", {}) or {}
        today = timezone.localdate()
        until = data.get("until") or today
        since = data.get("since") or min(until, today - timedelta(days=reports.DEFAULT_DAYS - 1))
        if since > until:
            since, until = until, since
        return reports.ReportFilters(
            since=since,
            until=until,
            workspace_id=getattr(data.get("workspace"), "pk", None),
            server_id=getattr(data.get("server"), "pk", None),
            binding_id=getattr(data.get("binding"), "pk", None),
            actor=(data.get("actor") or "").strip(),
            actor_kind=data.get("actor_kind") or "",
            action=data.get("action") or "",
            category=data.get("category") or "",
            decision=data.get("decision") or "",
            tool_name=(data.get("tool") or "").strip(),
            reason=(data.get("reason") or "").strip(),
        )


def _querystring(params: dict[str, Any]) -> str:
    clean = {k: v for k, v in params.items() if v not in (None, "")}
    return "?" + urlencode(clean) if clean else "?"


def _params(request: HttpRequest) -> dict[str, str]:
    return {k: v for k, v in request.GET.items() if k != "page" and v != ""}


def _chips(form: AuditFilterForm, params: dict[str, str]) -> list[dict[str, str]]:
    """One removable chip per active filter (dates excluded: they are always set)."""
    data = getattr(form, "cleaned_data", {}) or {}
    chips = []
    for name in (
        "workspace",
        "server",
        "binding",
        "actor",
        "actor_kind",
        "action",
        "category",
        "decision",
        "tool",
        "reason",
    ):
        value = data.get(name)
        if value in (None, ""):
            continue
        field = form.fields[name]
        if isinstance(field, forms.ModelChoiceField):
            shown = field.label_from_instance(value)
        elif isinstance(field, forms.ChoiceField):
            shown = dict(field.choices).get(value, value)
        else:
            shown = value
        rest = {k: v for k, v in params.items() if k != name}
        chips.append(
            {
                "label": str(field.label or name.title()),
                "value": str(shown),
                "remove": _querystring(rest),
            }
        )
    return chips


def report_context(
    report: reports.Report,
    *,
    link: reports.LinkFn | None,
    event_url: Callable[[int], str],
) -> dict[str, Any]:
    """What both the page and the standalone HTML file show (KPIs and charts)."""
    charts = {
        name: mark_safe(svg) for name, svg in reports.render_charts(report, link=link).items()
    }  # noqa: S308 - built by audit_review.svg, which escapes every string
    latency = report.latency
    kpis = [
        {
            "key": "total",
            "label": "Audited events",
            "value": f"{report.total:,}",
            "note": f"{report.filters.days} day{'s' if report.filters.days != 1 else ''}",
        },
        _kpi(report, Decision.ALLOWED, "Allowed"),
        _kpi(report, Decision.DENIED, "Denied"),
        _kpi(report, Decision.FAILED, "Failed"),
        {
            "key": "approvals",
            "label": "Approval requests",
            "value": f"{report.totals.get('approval_requests', 0):,}",
            "note": f"{sum(latency.approved)} granted · {sum(latency.rejected)} rejected",
        },
        {
            "key": "latency",
            "label": "Median decision time",
            "value": reports.format_duration(latency.median_ms),
            "note": f"p90 {reports.format_duration(latency.p90_ms)}",
        },
    ]
    period = report.per_period
    period_rows = [
        {
            "label": label,
            "counts": [
                period.counts.get(s.key, [0] * len(period.starts))[i]
                for s in reports.DECISION_SERIES
            ],
            "total": total,
        }
        for i, (label, total) in enumerate(zip(period.labels(), period.totals(), strict=True))
        if total
    ]
    latency_rows = [
        {"bucket": b, "approved": a, "rejected": r}
        for b, a, r in zip(latency.buckets, latency.approved, latency.rejected, strict=True)
    ]
    return {
        "report": report,
        "filters": report.filters,
        "charts": charts,
        "kpis": kpis,
        "series": reports.DECISION_SERIES,
        "period_rows": period_rows,
        "latency_rows": latency_rows,
        "latency_text": {
            "median": reports.format_duration(latency.median_ms),
            "p90": reports.format_duration(latency.p90_ms),
            "max": reports.format_duration(latency.max_ms),
            "approved": sum(latency.approved),
            "rejected": sum(latency.rejected),
        },
        "link_hint": link is not None,
        "top_tools": [
            {"stat": t, "breakdown": reports.decision_breakdown(t.counts)} for t in report.top_tools
        ],
        "event_url": event_url,
        "tz_name": timezone.get_current_timezone_name(),
    }


def _kpi(report: reports.Report, decision: Decision, label: str) -> dict[str, Any]:
    share = report.share(decision)
    return {
        "key": str(decision),
        "label": label,
        "value": f"{report.totals.get(decision, 0):,}",
        "note": f"{share:.1%} of events" if share is not None else "no events",
    }


def table_rows(events: Any, event_url: Callable[[int], str]) -> list[dict[str, Any]]:
    events = list(events)
    workspaces = reports.names_by_id(Workspace, (e.workspace_id for e in events), "name")
    servers = reports.names_by_id(McpServer, (e.server_id for e in events), "name")
    rows = []
    for event in events:
        rows.append(
            {
                "event": event,
                "type_label": reports.event_type_label(event.event_type),
                "url": event_url(event.pk),
                "workspace": workspaces.get(event.workspace_id, "") if event.workspace_id else "",
                "server": servers.get(event.server_id, "") if event.server_id else "",
                "actor": (
                    event.actor_user.get_username()
                    if event.actor_user
                    else (event.actor_label or event.actor_kind.replace("_", " "))
                ),
                "actor_kind": event.actor_kind.replace("_", " ") if event.actor_user else "",
                "latency": reports.format_duration(event.latency_ms)
                if event.latency_ms is not None
                else "",
            }
        )
    return rows


def admin_event_url(pk: int) -> str:
    return reverse("admin:audit_auditevent_change", args=[pk])


def _bound_form(request: HttpRequest) -> AuditFilterForm:
    """The filter form, always bound: missing dates get the defaults (the last 30 days up
    to today, or up to the given end), so the page shows the range it reports on."""
    data = request.GET.copy()
    today = timezone.localdate()
    if not data.get("until"):
        data["until"] = today.isoformat()
    if not data.get("since"):
        try:
            end = forms.DateField().clean(data["until"])
        except forms.ValidationError:
            end = today
        data["since"] = (end - timedelta(days=reports.DEFAULT_DAYS - 1)).isoformat()
    form = AuditFilterForm(data)
    form.allow_action(data.get("action", ""))
    form.is_valid()
    return form


@require_GET
@staff_required
def report(request: HttpRequest) -> HttpResponse:
    form = _bound_form(request)
    filters = form.to_filters()
    params = _params(request)
    data = reports.build_report(filters)

    def link(overrides: dict[str, Any]) -> str:
        merged = {**params, **{k: v for k, v in overrides.items()}}
        return _querystring(merged)

    paginator = Paginator(
        reports.filtered_events(filters).select_related("actor_user"),
        PAGE_SIZE,
    )
    page = paginator.get_page(request.GET.get("page"))
    context = report_context(data, link=link, event_url=admin_event_url)
    context.update(
        {
            "form": form,
            "chips": _chips(form, params),
            "advanced_open": any(params.get(name) for name in AuditFilterForm.ADVANCED),
            "page_obj": page,
            "rows": table_rows(page.object_list, admin_event_url),
            "page_query": _querystring(params).lstrip("?"),
            "export_csv": reverse("audit:export-csv") + _querystring(params),
            "export_json": reverse("audit:export-json") + _querystring(params),
            "defaults_applied": not params.get("since"),
        }
    )
    return render(request, "audit_review/report.html", context)


def _export_filters(request: HttpRequest) -> reports.ReportFilters | JsonResponse:
    form = _bound_form(request)
    if form.errors:
        return JsonResponse({"errors": form.errors.get_json_data()}, status=400)
    return form.to_filters()


def _filename(filters: reports.ReportFilters, ext: str) -> str:
    return f"atrium-audit-{filters.since:%Y%m%d}-{filters.until:%Y%m%d}.{ext}"


@require_GET
@staff_required
def export_csv(request: HttpRequest) -> HttpResponse:
    filters = _export_filters(request)
    if isinstance(filters, HttpResponse):
        return filters
    response = StreamingHttpResponse(
        reports.csv_chunks(reports.export_queryset(filters)), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{_filename(filters, "csv")}"'
    response["Cache-Control"] = "no-store"
    return response


@require_GET
@staff_required
def export_json(request: HttpRequest) -> HttpResponse:
    filters = _export_filters(request)
    if isinstance(filters, HttpResponse):
        return filters
    response = StreamingHttpResponse(
        reports.json_chunks(reports.export_queryset(filters), filters),
        content_type="application/json",
    )
    response["Content-Disposition"] = f'attachment; filename="{_filename(filters, "json")}"'
    response["Cache-Control"] = "no-store"
    return response
