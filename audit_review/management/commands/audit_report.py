"""Export the audit log: ``manage.py audit_report --since 2026-11-01 --format csv``.

Formats: ``csv`` and ``json`` (every matching event, streamed; the same columns as the
``/audit/export.*`` pages) and ``html`` (the report page as one standalone file: charts, the
summary and the newest events, with the stylesheet inlined).
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.staticfiles import finders
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.template.loader import render_to_string
from django.utils import timezone

from audit.types import Decision
from audit_review import reports
from audit_review.views import admin_event_url, report_context, table_rows
from chat.models import Workspace
from mcp_bridge.models import McpServer

HTML_EVENT_LIMIT = 500
# The rows an option names by slug (the audit log keeps their ids).
BY_SLUG: dict[str, type[Workspace] | type[McpServer]] = {
    "workspace": Workspace,
    "server": McpServer,
}


def _date(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise CommandError(f"'{value}' is not a date (expected YYYY-MM-DD).") from None


class Command(BaseCommand):
    help = "Write the audit events of a date range as CSV, JSON or a standalone HTML report."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--since", required=True, help="First day (YYYY-MM-DD), inclusive.")
        parser.add_argument("--until", help="Last day (YYYY-MM-DD), inclusive. Default: today.")
        parser.add_argument("--format", choices=["csv", "json", "html"], default="csv")
        parser.add_argument("--workspace", metavar="SLUG", help="Only this workspace.")
        parser.add_argument("--server", metavar="SLUG", help="Only this MCP server.")
        parser.add_argument(
            "--decision", choices=[str(d) for d in Decision], help="Only this decision."
        )
        parser.add_argument("--action", help="Only this action kind (e.g. app_tool_call).")
        parser.add_argument("--output", "-o", metavar="FILE", help="Write here (default: stdout).")

    def handle(self, *args: Any, **options: Any) -> None:
        since = _date(options["since"])
        until = _date(options["until"]) if options.get("until") else timezone.localdate()
        if since > until:
            raise CommandError("--since is after --until.")
        filters = reports.ReportFilters(
            since=since,
            until=until,
            workspace_id=self._lookup("workspace", options.get("workspace")),
            server_id=self._lookup("server", options.get("server")),
            decision=options.get("decision") or "",
            action=options.get("action") or "",
        )
        fmt = options["format"]
        if fmt == "csv":
            chunks = reports.csv_chunks(reports.export_queryset(filters))
        elif fmt == "json":
            chunks = reports.json_chunks(reports.export_queryset(filters), filters)
        else:
            chunks = iter([self._html(filters, options)])

        output = options.get("output")
        if output:
            path = Path(output)
            newline = "" if fmt == "csv" else None
            with path.open("w", encoding="utf-8", newline=newline) as handle:
                count = self._write(handle, chunks)
            self.stderr.write(f"Wrote {path} ({count} bytes).")
        else:
            for chunk in chunks:
                self.stdout.write(chunk, ending="")
            self.stdout.flush()

    @staticmethod
    def _write(handle: Any, chunks: Any) -> int:
        written = 0
        for chunk in chunks:
            handle.write(chunk)
            written += len(chunk.encode("utf-8"))
        return written

    @staticmethod
    def _lookup(name: str, slug: str | None) -> int | None:
        if not slug:
            return None
        row = BY_SLUG[name].objects.filter(slug=slug).values_list("pk", flat=True).first()
        if row is None:
            raise CommandError(f"No {name} with slug '{slug}'.")
        return row

    def _html(self, filters: reports.ReportFilters, options: dict[str, Any]) -> str:
        origin = getattr(settings, "ATRIUM_APP_ORIGIN", "").rstrip("/")

        def event_url(pk: int) -> str:
            return origin + admin_event_url(pk)

        report = reports.build_report(filters)
        context = report_context(report, link=None, event_url=event_url)
        events = list(
            reports.filtered_events(filters).select_related("actor_user")[:HTML_EVENT_LIMIT]
        )
        css_path = finders.find("audit_review/reports.css")
        css = Path(css_path).read_text(encoding="utf-8") if css_path else ""
        filter_items = [
            (label, options[key])
            for key, label in (
                ("workspace", "Workspace"),
                ("server", "Server"),
                ("decision", "Decision"),
                ("action", "Action"),
            )
            if options.get(key)
        ]
        context.update(
            {
                "css": css.replace("</style", "<\\/style"),
                "rows": table_rows(events, event_url),
                "truncated": report.total > len(events),
                "generated_at": timezone.localtime(),
                "origin": origin,
                "filter_items": filter_items,
            }
        )
        return render_to_string("audit_review/report_standalone.html", context)
