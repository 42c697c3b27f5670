"""Audit review reports: filter the append-only audit log, aggregate it, export it.

Read-only by construction: this module only queries ``AuditEvent`` (and the names of the
rows it names by id: workspaces and servers). It is shared by the staff report pages
(``audit_review.views``), the ``audit_report`` management command, and their tests.

- :class:`ReportFilters` — what to look at (an inclusive date range in the current time
  zone, plus optional workspace, server, binding, actor, action, category, decision, tool
  and reason);
- :func:`filtered_events` — the matching events, newest first;
- :func:`build_report` — the numbers behind the page: totals per decision, events per
  day (week or month on long ranges) stacked by decision, top tools by call decisions,
  denials by reason, and the distribution of approval latencies;
- :func:`render_charts` — the SVG charts of a report (:mod:`audit_review.svg`);
- :func:`export_rows`, :func:`csv_chunks`, :func:`json_chunks` — streaming exports.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.db.models import Count, DateField, Model, Q, QuerySet
from django.db.models.functions import Trunc
from django.utils import timezone

from audit.models import AuditEvent
from audit.types import AuditEventType, Decision, EventCategory
from chat.models import Workspace
from mcp_bridge.models import McpServer

from . import svg

__all__ = [
    "DECISION_SERIES",
    "EXPORT_COLUMNS",
    "LATENCY_BUCKETS",
    "Report",
    "ReportFilters",
    "build_report",
    "csv_chunks",
    "event_type_label",
    "export_rows",
    "filtered_events",
    "json_chunks",
    "names_by_id",
    "render_charts",
]

DEFAULT_DAYS = 30
TOP_N = 10
TOOL_CALL_TYPES = (
    AuditEventType.TOOL_CALL_MODEL,
    AuditEventType.TOOL_CALL_USER,
    AuditEventType.TOOL_CALL_APP,
)
APPROVAL_DECISION_TYPES = (AuditEventType.APPROVAL_APPROVED, AuditEventType.APPROVAL_REJECTED)

# Stacking order (bottom to top) and colours of the decisions, the same on every chart.
DECISION_COLORS: dict[str, str] = {
    Decision.ALLOWED: "#0f8a6c",
    Decision.APPROVED: "#2f7fd1",
    Decision.PENDING: "#b7791f",
    Decision.FAILED: "#7c7f88",
    Decision.REJECTED: "#b0579a",
    Decision.DENIED: "#e0533d",
}
DECISION_SERIES: tuple[svg.Series, ...] = tuple(
    svg.Series(key=str(d), label=Decision(d).label, color=c) for d, c in DECISION_COLORS.items()
)
ACTOR_KINDS = ("user", "model", "app_view", "system")

# Approval latency buckets: (upper bound in ms, label). The last one is open-ended.
LATENCY_BUCKETS: tuple[tuple[float, str], ...] = (
    (10_000, "< 10 s"),
    (30_000, "10–30 s"),
    (60_000, "30 s–1 min"),
    (300_000, "1–5 min"),
    (900_000, "5–15 min"),
    (3_600_000, "15–60 min"),
    (14_400_000, "1–4 h"),
    (math.inf, "> 4 h"),
)


def event_type_label(value: int | None) -> str:
    """``501`` → ``"Approval granted"``; unknown numbers are shown as such."""
    try:
        return AuditEventType(value).label
    except ValueError:
        return f"Unknown event type {value}"


def names_by_id(model: type[Model], ids: Iterable[int | None], field: str) -> dict[int, str]:
    """``{id: field}`` of the rows of ``model`` with these ids, in one query. The audit log
    names rows by id and outlives them: an id whose row is gone is simply absent."""
    wanted = {pk for pk in ids if pk is not None}
    if not wanted:
        return {}
    return dict(model._default_manager.filter(pk__in=wanted).values_list("pk", field))


def event_category(value: int | None) -> str:
    try:
        return str(AuditEventType(value).category)
    except ValueError:
        return ""


# --------------------------------------------------------------------------- filters


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportFilters:
    """What a report covers. Dates are inclusive days in the current time zone."""

    since: date
    until: date
    workspace_id: int | None = None
    server_id: int | None = None
    binding_id: int | None = None
    actor: str = ""  # a username (case-insensitive)
    actor_kind: str = ""
    action: str = ""
    category: str = ""
    decision: str = ""
    tool_name: str = ""
    reason: str = ""

    @classmethod
    def last_days(cls, days: int = DEFAULT_DAYS, **kwargs: Any) -> ReportFilters:
        today = timezone.localdate()
        return cls(since=today - timedelta(days=days - 1), until=today, **kwargs)

    @property
    def start(self) -> datetime:
        return timezone.make_aware(datetime.combine(self.since, time.min))

    @property
    def end(self) -> datetime:
        """Exclusive: midnight after ``until``."""
        return timezone.make_aware(datetime.combine(self.until + timedelta(days=1), time.min))

    @property
    def days(self) -> int:
        return (self.until - self.since).days + 1

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, date):
                out[f.name] = value.isoformat()
            elif value not in (None, ""):
                out[f.name] = value
        return out

    def with_(self, **changes: Any) -> ReportFilters:
        return replace(self, **changes)


def filtered_events(filters: ReportFilters) -> QuerySet[AuditEvent]:
    """Events matching ``filters``, newest first (rows the table and exports need joined)."""
    qs = AuditEvent.objects.filter(created_at__gte=filters.start, created_at__lt=filters.end)
    if filters.workspace_id is not None:
        qs = qs.filter(workspace_id=filters.workspace_id)
    if filters.server_id is not None:
        qs = qs.filter(server_id=filters.server_id)
    if filters.binding_id is not None:
        qs = qs.filter(binding_id=filters.binding_id)
    if filters.actor:
        qs = qs.filter(actor_user__username__iexact=filters.actor)
    if filters.actor_kind:
        qs = qs.filter(actor_kind=filters.actor_kind)
    if filters.action:
        qs = qs.filter(action=filters.action)
    if filters.category:
        hundreds = [k for k, v in _CATEGORY_HUNDREDS.items() if v == filters.category]
        if hundreds:
            base = hundreds[0] * 100
            qs = qs.filter(event_type__gte=base, event_type__lt=base + 100)
        else:
            qs = qs.none()
    if filters.decision:
        qs = qs.filter(decision=filters.decision)
    if filters.tool_name:
        qs = qs.filter(tool_name=filters.tool_name)
    if filters.reason:
        qs = qs.filter(reason=filters.reason)
    return qs.order_by("-created_at", "-id")


_CATEGORY_HUNDREDS: dict[int, str] = {
    member.value // 100: str(member.category) for member in AuditEventType
}
CATEGORIES: tuple[str, ...] = tuple(str(c) for c in EventCategory)


# --------------------------------------------------------------------------- report


@dataclass(slots=True)
class PeriodSeries:
    granularity: str  # day | week | month
    starts: list[date]
    counts: dict[str, list[int]]

    def labels(self) -> list[str]:
        if self.granularity == "month":
            return [d.strftime("%b %Y") for d in self.starts]
        return [d.strftime("%b %d").replace(" 0", " ") for d in self.starts]

    def ranges(self) -> list[tuple[date, date]]:
        """Each bucket's inclusive (first, last) day."""
        out = []
        for i, start in enumerate(self.starts):
            end = self.starts[i + 1] - timedelta(days=1) if i + 1 < len(self.starts) else None
            out.append((start, end or _bucket_end(start, self.granularity)))
        return out

    def totals(self) -> list[int]:
        return [sum(values[i] for values in self.counts.values()) for i in range(len(self.starts))]


@dataclass(slots=True)
class ToolStat:
    server_id: int | None
    server_name: str
    tool_name: str
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def label(self) -> str:
        return f"{self.server_name} · {self.tool_name}"


@dataclass(slots=True)
class LatencyStats:
    buckets: list[str]
    approved: list[int]
    rejected: list[int]
    count: int = 0
    median_ms: float | None = None
    p90_ms: float | None = None
    max_ms: float | None = None


@dataclass(slots=True)
class Report:
    filters: ReportFilters
    totals: dict[str, int]
    per_period: PeriodSeries
    top_tools: list[ToolStat]
    denials: list[tuple[str, int]]
    latency: LatencyStats
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.totals.get("total", 0)

    def share(self, decision: str) -> float | None:
        return (self.totals.get(decision, 0) / self.total) if self.total else None


def _granularity(days: int) -> str:
    if days <= 92:
        return "day"
    if days <= 731:
        return "week"
    return "month"


def _bucket_start(day: date, granularity: str) -> date:
    if granularity == "week":
        return day - timedelta(days=day.weekday())
    if granularity == "month":
        return day.replace(day=1)
    return day


def _bucket_end(start: date, granularity: str) -> date:
    if granularity == "week":
        return start + timedelta(days=6)
    if granularity == "month":
        nxt = (start.replace(day=28) + timedelta(days=4)).replace(day=1)
        return nxt - timedelta(days=1)
    return start


def _next_bucket(start: date, granularity: str) -> date:
    return _bucket_end(start, granularity) + timedelta(days=1)


def _per_period(qs: QuerySet[AuditEvent], filters: ReportFilters) -> PeriodSeries:
    granularity = _granularity(filters.days)
    starts: list[date] = []
    cursor = _bucket_start(filters.since, granularity)
    while cursor <= filters.until:
        starts.append(cursor)
        cursor = _next_bucket(cursor, granularity)
    index = {d: i for i, d in enumerate(starts)}
    counts = {s.key: [0] * len(starts) for s in DECISION_SERIES}
    rows = (
        qs.order_by()
        .annotate(
            bucket=Trunc(
                "created_at",
                granularity,
                output_field=DateField(),
                tzinfo=timezone.get_current_timezone(),
            )
        )
        .values("bucket", "decision")
        .annotate(n=Count("id"))
    )
    for row in rows:
        bucket = row["bucket"]
        if isinstance(bucket, datetime):
            bucket = bucket.date()
        i = index.get(bucket)
        if i is None:
            continue
        counts.setdefault(row["decision"], [0] * len(starts))[i] += row["n"]
    return PeriodSeries(granularity=granularity, starts=starts, counts=counts)


def _top_tools(qs: QuerySet[AuditEvent], limit: int) -> list[ToolStat]:
    rows = list(
        qs.order_by()
        .filter(event_type__in=[int(t) for t in TOOL_CALL_TYPES])
        .exclude(tool_name="")
        .values("server_id", "tool_name", "decision")
        .annotate(n=Count("id"))
    )
    server_names = names_by_id(McpServer, (row["server_id"] for row in rows), "name")
    stats: dict[tuple[int | None, str], ToolStat] = {}
    for row in rows:
        server_id = row["server_id"]
        key = (server_id, row["tool_name"])
        stat = stats.get(key)
        if stat is None:
            if server_id is None:
                name = "no server"
            else:
                name = server_names.get(server_id) or f"server #{server_id}"
            stat = stats[key] = ToolStat(server_id, name, row["tool_name"], {})
        stat.counts[row["decision"]] = stat.counts.get(row["decision"], 0) + row["n"]
    ranked = sorted(stats.values(), key=lambda s: (-s.total, s.server_name, s.tool_name))
    return ranked[:limit]


def _denials(qs: QuerySet[AuditEvent], limit: int) -> list[tuple[str, int]]:
    rows = (
        qs.order_by()
        .filter(decision=Decision.DENIED)
        .values("reason")
        .annotate(n=Count("id"))
        .order_by("-n", "reason")
    )
    return [(row["reason"] or "(no reason)", row["n"]) for row in rows[:limit]]


def _percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[rank - 1]


def _latency(qs: QuerySet[AuditEvent]) -> LatencyStats:
    labels = [label for _, label in LATENCY_BUCKETS]
    approved = [0] * len(labels)
    rejected = [0] * len(labels)
    values: list[float] = []
    rows = (
        qs.order_by()
        .filter(event_type__in=[int(t) for t in APPROVAL_DECISION_TYPES], latency_ms__isnull=False)
        .values_list("latency_ms", "decision")
    )
    for latency, decision in rows:
        values.append(latency)
        i = next(i for i, (upper, _) in enumerate(LATENCY_BUCKETS) if latency < upper)
        (approved if decision == Decision.APPROVED else rejected)[i] += 1
    values.sort()
    return LatencyStats(
        buckets=labels,
        approved=approved,
        rejected=rejected,
        count=len(values),
        median_ms=_percentile(values, 0.5),
        p90_ms=_percentile(values, 0.9),
        max_ms=values[-1] if values else None,
    )


def _totals(qs: QuerySet[AuditEvent]) -> dict[str, int]:
    """Events per decision, the total, and how many approval requests were made."""
    aggregates = {"total": Count("id")}
    for decision in Decision:
        aggregates[str(decision)] = Count("id", filter=Q(decision=decision))
    aggregates["approval_requests"] = Count(
        "id", filter=Q(event_type=int(AuditEventType.APPROVAL_REQUESTED))
    )
    return {k: v or 0 for k, v in qs.order_by().aggregate(**aggregates).items()}


def build_report(filters: ReportFilters, *, top_n: int = TOP_N) -> Report:
    """Every number of the report (five aggregate queries)."""
    qs = filtered_events(filters)
    return Report(
        filters=filters,
        totals=_totals(qs),
        per_period=_per_period(qs, filters),
        top_tools=_top_tools(qs, top_n),
        denials=_denials(qs, top_n),
        latency=_latency(qs),
    )


def format_duration(ms: float | None) -> str:
    """``83_000`` → ``"1 min 23 s"``."""
    if ms is None:
        return "–"
    seconds = ms / 1000
    if seconds < 1:
        return f"{ms:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    minutes, sec = divmod(round(seconds), 60)
    if minutes < 10:
        return f"{minutes} min {sec} s" if sec else f"{minutes} min"
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


# --------------------------------------------------------------------------- charts

LinkFn = Callable[[dict[str, Any]], str]


def render_charts(report: Report, *, link: LinkFn | None = None) -> dict[str, str]:
    """The report's SVG charts, by name. ``link(overrides)`` makes bars drill-down links."""
    filters = report.filters
    period = report.per_period
    labels = period.labels()
    ranges = period.ranges()
    unit = {"day": "Day", "week": "Week starting", "month": "Month"}[period.granularity]
    tooltips = [
        a.isoformat() if a == b else f"{a.isoformat()} to {b.isoformat()}" for a, b in ranges
    ]
    present = [s for s in DECISION_SERIES if any(period.counts.get(s.key, []))]
    charts: dict[str, str] = {}
    charts["per_period"] = svg.stacked_columns(
        chart_id="chart-per-period",
        title=f"Audited actions per {period.granularity}, by decision",
        description=(
            f"{report.total} events from {filters.since.isoformat()} to "
            f"{filters.until.isoformat()}, stacked by decision: "
            + ", ".join(f"{s.label} {sum(period.counts.get(s.key, []))}" for s in DECISION_SERIES)
            + "."
        ),
        categories=labels,
        series=present or list(DECISION_SERIES[:1]),
        values=period.counts,
        y_label="Events",
        x_label=unit,
        width=1200,
        height=320,
        tooltips=tooltips,
        hrefs=(
            [link({"since": a.isoformat(), "until": b.isoformat()}) for a, b in ranges]
            if link
            else None
        ),
        empty_message="No audit events for these filters.",
    )

    tool_series = [s for s in DECISION_SERIES if any(t.counts.get(s.key) for t in report.top_tools)]
    charts["top_tools"] = svg.horizontal_bars(
        chart_id="chart-top-tools",
        title=f"Top {len(report.top_tools)} tools by call decisions",
        description="; ".join(
            f"{t.label}: {t.total}"
            + " ("
            + ", ".join(f"{k} {v}" for k, v in sorted(t.counts.items()))
            + ")"
            for t in report.top_tools
        )
        or "No tool calls.",
        rows=[
            svg.Row(
                label=t.label,
                values=t.counts,
                href=link({"server": t.server_id, "tool": t.tool_name}) if link else None,
            )
            for t in report.top_tools
        ],
        series=tool_series or list(DECISION_SERIES[:1]),
        x_label="Call decisions",
        width=580,
        empty_message="No tool calls for these filters.",
    )

    denied = svg.Series(key="denied", label="Denied", color=DECISION_COLORS[Decision.DENIED])
    charts["denials"] = svg.horizontal_bars(
        chart_id="chart-denials",
        title="Denials by reason",
        description="; ".join(f"{reason}: {n}" for reason, n in report.denials) or "No denials.",
        rows=[
            svg.Row(
                label=reason,
                values={"denied": n},
                href=link({"decision": "denied", "reason": reason}) if link else None,
            )
            for reason, n in report.denials
        ],
        series=[denied],
        x_label="Denied actions",
        width=580,
        empty_message="No denials for these filters.",
    )

    lat = report.latency
    charts["latency"] = svg.stacked_columns(
        chart_id="chart-latency",
        title="Approval latency: time from request to decision",
        description=(
            f"{lat.count} decided approvals; median {format_duration(lat.median_ms)}, "
            f"90th percentile {format_duration(lat.p90_ms)}. "
            + "; ".join(
                f"{b}: {a} granted, {r} rejected"
                for b, a, r in zip(lat.buckets, lat.approved, lat.rejected, strict=True)
            )
        ),
        categories=lat.buckets,
        series=[
            svg.Series("approved", "Granted", DECISION_COLORS[Decision.APPROVED]),
            svg.Series("rejected", "Rejected", DECISION_COLORS[Decision.REJECTED]),
        ],
        values={"approved": lat.approved, "rejected": lat.rejected},
        y_label="Approvals",
        x_label="Time to decide",
        width=820,
        height=280,
        empty_message="No decided approvals for these filters.",
    )
    return charts


# --------------------------------------------------------------------------- exports

EXPORT_COLUMNS: tuple[str, ...] = (
    "id",
    "created_at",
    "event_type",
    "event_type_label",
    "category",
    "decision",
    "actor_kind",
    "actor_user_id",
    "actor_username",
    "actor_label",
    "workspace_id",
    "workspace_slug",
    "thread_id",
    "binding_id",
    "server_id",
    "server_slug",
    "tool_name",
    "action",
    "reason",
    "argument_digest",
    "latency_ms",
    "extra",
)


def export_queryset(filters: ReportFilters) -> QuerySet[AuditEvent]:
    return filtered_events(filters).select_related("actor_user")


def _batches(events: Iterable[AuditEvent], size: int) -> Iterator[Sequence[AuditEvent]]:
    batch: list[AuditEvent] = []
    for event in events:
        batch.append(event)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def export_rows(qs: Iterable[AuditEvent], *, batch_size: int = 2000) -> Iterator[dict[str, Any]]:
    """One plain dict per event (``EXPORT_COLUMNS``), JSON-ready. The slugs of the
    workspaces and servers are looked up once per batch of events."""
    for batch in _batches(qs, batch_size):
        workspaces = names_by_id(Workspace, (e.workspace_id for e in batch), "slug")
        servers = names_by_id(McpServer, (e.server_id for e in batch), "slug")
        yield from (_export_row(event, workspaces, servers) for event in batch)


def _export_row(
    event: AuditEvent, workspaces: dict[int, str], servers: dict[int, str]
) -> dict[str, Any]:
    return {
        "id": event.pk,
        "created_at": event.created_at.astimezone(UTC).isoformat(),
        "event_type": event.event_type,
        "event_type_label": event_type_label(event.event_type),
        "category": event_category(event.event_type),
        "decision": event.decision,
        "actor_kind": event.actor_kind,
        "actor_user_id": event.actor_user_id,
        "actor_username": event.actor_user.get_username() if event.actor_user else None,
        "actor_label": event.actor_label,
        "workspace_id": event.workspace_id,
        "workspace_slug": workspaces.get(event.workspace_id) if event.workspace_id else None,
        "thread_id": event.thread_id,
        "binding_id": event.binding_id,
        "server_id": event.server_id,
        "server_slug": servers.get(event.server_id) if event.server_id else None,
        "tool_name": event.tool_name,
        "action": event.action,
        "reason": event.reason,
        "argument_digest": event.argument_digest,
        "latency_ms": event.latency_ms,
        "extra": event.extra,
    }


_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value: Any) -> Any:
    """Spreadsheet-safe: text that a spreadsheet would run as a formula gets a leading '."""
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    if isinstance(value, str) and value.startswith(_FORMULA_PREFIXES):
        return "'" + value
    return value


def csv_chunks(qs: QuerySet[AuditEvent], *, chunk_size: int = 500) -> Iterator[str]:
    """CSV text in chunks: a header row, then one row per event (``EXPORT_COLUMNS``).

    Text cells that start with ``= + - @`` (or a tab / carriage return) are prefixed with
    ``'`` so that a spreadsheet never evaluates a hostile tool name as a formula.
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(EXPORT_COLUMNS)
    for rows, row in enumerate(export_rows(qs.iterator(chunk_size=2000)), start=1):
        writer.writerow([_csv_cell(row[c]) for c in EXPORT_COLUMNS])
        if rows % chunk_size == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def json_chunks(
    qs: QuerySet[AuditEvent], filters: ReportFilters, *, chunk_size: int = 200
) -> Iterator[str]:
    """A JSON document in chunks: ``{generated_at, filters, columns, events: [...], count}``."""
    head = {
        "generated_at": timezone.now().astimezone(UTC).isoformat(),
        "filters": filters.as_dict(),
        "columns": list(EXPORT_COLUMNS),
    }
    yield json.dumps(head, ensure_ascii=False)[:-1] + ', "events": ['
    count = 0
    pending: list[str] = []
    for row in export_rows(qs.iterator(chunk_size=2000)):
        pending.append(("," if count else "") + json.dumps(row, ensure_ascii=False, default=str))
        count += 1
        if len(pending) >= chunk_size:
            yield "".join(pending)
            pending.clear()
    yield "".join(pending) + f'], "count": {count}}}'


def grouped_counts(report: Report) -> list[tuple[str, str, int, float | None]]:
    """``(decision, label, count, share)`` for the KPI tiles, in stacking order."""
    out = []
    for series in DECISION_SERIES:
        count = report.totals.get(series.key, 0)
        out.append((series.key, series.label, count, report.share(series.key)))
    return out


def decision_breakdown(counts: dict[str, int]) -> list[tuple[str, int]]:
    """A tool's per-decision counts in the chart's stacking order."""
    order = {s.key: i for i, s in enumerate(DECISION_SERIES)}
    return sorted(counts.items(), key=lambda kv: order.get(kv[0], 99))


def bucket_of(latency_ms: float) -> str:
    for upper, label in LATENCY_BUCKETS:
        if latency_ms < upper:
            return label
    return LATENCY_BUCKETS[-1][1]
