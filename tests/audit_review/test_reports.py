"""Audit review: filters, aggregation against a known fixture, exports, access, escaping.

The report pages are mounted under /audit/ by config/urls.py; these tests use this module
as their URLconf (the same include) so that they do not depend on the project's mount.
"""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from unittest import mock

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import include, path

from tests.conftest import make_user

urlpatterns = [
    path("admin/", admin.site.urls),
    path("audit/", include("audit_review.urls")),
    path("", include("chat.urls")),
]

pytestmark = [pytest.mark.django_db, pytest.mark.urls(__name__)]

DAY1, DAY2, DAY3 = date(2025, 3, 10), date(2025, 3, 11), date(2025, 3, 12)
HOSTILE_TOOL = '<script>alert("t")</script>&\'"'
HOSTILE_REASON = '"><img src=x onerror=alert(1)>'
FORMULA_TOOL = '=HYPERLINK("http://evil.example","x")'
RANGE = {"since": DAY1.isoformat(), "until": DAY3.isoformat()}


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    """Persona passwords are hashed with the production hasher otherwise (seconds each)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@contextmanager
def at(day: date, hour: int = 10, minute: int = 0):
    """Audit rows get created_at from timezone.now(): pin it."""
    moment = datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC)
    with mock.patch("django.utils.timezone.now", return_value=moment):
        yield


def _servers():
    from mcp_bridge.models import McpServer

    board = McpServer.objects.create(name="Board", slug="board", transport="stdio", command="x")
    vault = McpServer.objects.create(name="Vault", slug="vault", transport="stdio", command="x")
    return board, vault


@pytest.fixture
def fixture_events(personas):
    return seed_known_events(personas)


def seed_known_events(personas):
    """A known set of audit rows on three days (see the expected numbers in the tests).

    Acme (personas.workspace): 13 events; Globex (other_workspace): 3 events.
    """
    from audit.types import AuditEventType as T
    from audit.types import Decision as D
    from audit.writer import record
    from bindings.models import AppBinding

    board, vault = _servers()
    binding = AppBinding.objects.create(server=board, workspace_id=personas.workspace.pk)
    other = AppBinding.objects.create(server=vault, workspace_id=personas.other_workspace.pk)
    ws, th = personas.workspace.pk, personas.thread.pk

    def acme(**kw):
        base = {
            "workspace_id": ws,
            "thread_id": th,
            "binding_id": binding.pk,
            "server_id": board.pk,
        }
        return record(**{**base, **kw})

    with at(DAY1, 9):
        for _ in range(3):
            acme(
                event_type=T.TOOL_CALL_USER,
                decision=D.ALLOWED,
                actor_kind="user",
                actor_user_id=personas.owner.pk,
                tool_name="list_items",
                action="user_tool_call",
                reason="ok",
                arguments={"q": 1},
            )
    with at(DAY1, 11):
        for _ in range(2):
            acme(
                event_type=T.TOOL_CALL_APP,
                decision=D.DENIED,
                actor_kind="app_view",
                actor_user_id=personas.member.pk,
                tool_name="delete_item",
                action="app_tool_call",
                reason="tool_not_visible_to_app",
            )
        acme(
            event_type=T.UI_OPEN_LINK,
            decision=D.DENIED,
            actor_kind="app_view",
            actor_user_id=personas.viewer.pk,
            action="ui_open_link",
            reason="scheme_not_allowed",
            extra={"url": "javascript:alert(1)"},
        )
    with at(DAY2, 8):
        acme(
            event_type=T.TOOL_CALL_MODEL,
            decision=D.PENDING,
            actor_kind="model",
            actor_user_id=personas.owner.pk,
            tool_name="delete_item",
            action="model_tool_call",
            reason="approval_required",
        )
        acme(
            event_type=T.APPROVAL_REQUESTED,
            decision=D.PENDING,
            actor_kind="model",
            actor_user_id=personas.owner.pk,
            tool_name="delete_item",
            action="approval",
            reason="approval_required",
        )
    with at(DAY2, 12):
        acme(
            event_type=T.APPROVAL_APPROVED,
            decision=D.APPROVED,
            actor_kind="user",
            actor_user_id=personas.member.pk,
            tool_name="delete_item",
            action="approval",
            reason="approved",
            latency_ms=5_000,
        )
        acme(
            event_type=T.APPROVAL_REJECTED,
            decision=D.REJECTED,
            actor_kind="user",
            actor_user_id=personas.owner.pk,
            tool_name="delete_item",
            action="approval",
            reason="rejected",
            latency_ms=120_000,
        )
        acme(
            event_type=T.APPROVAL_APPROVED,
            decision=D.APPROVED,
            actor_kind="user",
            actor_user_id=personas.owner.pk,
            tool_name="delete_item",
            action="approval",
            reason="approved",
            latency_ms=45_000,
        )
        acme(
            event_type=T.TOOL_CALL_FAILED,
            decision=D.FAILED,
            actor_kind="user",
            actor_user_id=personas.owner.pk,
            tool_name="list_items",
            action="tool_result",
            reason="server_unavailable",
            latency_ms=30.5,
        )
    with at(DAY3, 15):
        for _ in range(2):
            record(
                event_type=T.TOOL_CALL_USER,
                decision=D.ALLOWED,
                actor_kind="user",
                actor_user_id=personas.outsider.pk,
                workspace_id=personas.other_workspace.pk,
                thread_id=personas.other_thread.pk,
                binding_id=other.pk,
                server_id=vault.pk,
                tool_name="secret_tool",
                action="user_tool_call",
                reason="ok",
            )
        record(
            event_type=T.TOOL_CALL_APP,
            decision=D.DENIED,
            actor_kind="app_view",
            actor_user_id=personas.owner.pk,
            workspace_id=personas.other_workspace.pk,
            thread_id=personas.other_thread.pk,
            server_id=vault.pk,
            tool_name="secret_tool",
            action="app_tool_call",
            reason="not_a_member",
        )
        acme(
            event_type=T.TOOL_CALL_APP,
            decision=D.APPROVED,
            actor_kind="app_view",
            actor_user_id=personas.member.pk,
            tool_name="delete_item",
            action="app_tool_call",
            reason="approved",
        )
    return {"board": board, "vault": vault, "binding": binding, "other_binding": other}


def _filters(**kw):
    from audit_review.reports import ReportFilters

    return ReportFilters(since=DAY1, until=DAY3, **kw)


def _staff():
    return make_user("sam-staff", staff=True)


# ------------------------------------------------------------------------ aggregation


def test_totals_per_day_tools_denials_and_latency_match_the_fixture(fixture_events):
    from audit_review.reports import build_report

    report = build_report(_filters())
    assert report.totals == {
        "total": 16,
        "allowed": 5,
        "denied": 4,
        "pending": 2,
        "approved": 3,
        "rejected": 1,
        "failed": 1,
        "approval_requests": 1,
    }
    period = report.per_period
    assert period.granularity == "day"
    assert period.starts == [DAY1, DAY2, DAY3]
    assert period.totals() == [6, 6, 4]
    assert period.counts["allowed"] == [3, 0, 2]
    assert period.counts["denied"] == [3, 0, 1]
    assert period.counts["approved"] == [0, 2, 1]
    assert period.counts["pending"] == [0, 2, 0]

    tools = [(t.server_name, t.tool_name, t.total, t.counts) for t in report.top_tools]
    assert tools == [
        ("Board", "delete_item", 4, {"denied": 2, "pending": 1, "approved": 1}),
        ("Board", "list_items", 3, {"allowed": 3}),
        ("Vault", "secret_tool", 3, {"allowed": 2, "denied": 1}),
    ]
    assert report.denials == [
        ("tool_not_visible_to_app", 2),
        ("not_a_member", 1),
        ("scheme_not_allowed", 1),
    ]
    lat = report.latency
    assert lat.count == 3
    assert (lat.median_ms, lat.p90_ms, lat.max_ms) == (45_000, 120_000, 120_000)
    assert lat.buckets[0] == "< 10 s"
    assert lat.approved == [1, 0, 1, 0, 0, 0, 0, 0]
    assert lat.rejected == [0, 0, 0, 1, 0, 0, 0, 0]


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({}, 16),
        ({"decision": "denied"}, 4),
        ({"actor": "MARCO"}, 4),  # case-insensitive username: 2 denials, 1 approval, 1 app call
        ({"actor_kind": "model"}, 2),
        ({"action": "ui_open_link"}, 1),
        ({"category": "approval"}, 4),
        ({"category": "tool"}, 11),
        ({"category": "nonsense"}, 0),
        ({"tool_name": "list_items"}, 4),
        ({"reason": "not_a_member"}, 1),
        ({"decision": "approved", "action": "approval"}, 2),
    ],
)
def test_each_filter_really_filters(fixture_events, kwargs, expected):
    from audit_review.reports import build_report, filtered_events

    assert filtered_events(_filters(**kwargs)).count() == expected
    assert build_report(_filters(**kwargs)).total == expected


def test_scope_filters_workspace_server_binding_and_dates(fixture_events, personas):
    from audit_review.reports import ReportFilters, filtered_events

    assert filtered_events(_filters(workspace_id=personas.workspace.pk)).count() == 13
    assert filtered_events(_filters(workspace_id=personas.other_workspace.pk)).count() == 3
    assert filtered_events(_filters(server_id=fixture_events["vault"].pk)).count() == 3
    assert filtered_events(_filters(binding_id=fixture_events["binding"].pk)).count() == 13
    assert filtered_events(ReportFilters(since=DAY2, until=DAY2)).count() == 6
    assert filtered_events(ReportFilters(since=DAY3, until=DAY3 + timedelta(days=3))).count() == 4
    # Newest first.
    events = list(filtered_events(_filters()))
    assert [e.created_at for e in events] == sorted((e.created_at for e in events), reverse=True)


def test_long_ranges_are_bucketed_by_week_then_month(fixture_events):
    from audit_review.reports import ReportFilters, build_report

    weekly = build_report(ReportFilters(since=date(2025, 1, 1), until=date(2025, 6, 30)))
    assert weekly.per_period.granularity == "week"
    assert sum(weekly.per_period.totals()) == 16
    assert date(2025, 3, 10) in weekly.per_period.starts  # a Monday
    monthly = build_report(ReportFilters(since=date(2023, 1, 1), until=date(2025, 12, 31)))
    assert monthly.per_period.granularity == "month"
    march = monthly.per_period.starts.index(date(2025, 3, 1))
    assert monthly.per_period.totals()[march] == 16


# ----------------------------------------------------------------------------- charts


def _svg_root(markup: str) -> ET.Element:
    return ET.fromstring(markup)


def _texts(root: ET.Element) -> list[str]:
    return [el.text or "" for el in root.iter() if el.tag.endswith("}text")]


def test_charts_are_well_formed_svg_with_the_expected_bars(fixture_events):
    from audit_review.reports import build_report, render_charts

    charts = render_charts(build_report(_filters()), link=lambda o: "?x=1")
    ns = "{http://www.w3.org/2000/svg}"
    per_day = _svg_root(charts["per_period"])
    assert per_day.get("role") == "img"
    assert per_day.find(f"{ns}title").text.startswith("Audited actions per day")
    bars = [r for r in per_day.iter(f"{ns}rect") if r.get("data-series")]
    # Day 1: allowed + denied; day 2: pending, approved, rejected, failed; day 3: three.
    assert len(bars) == 2 + 4 + 3
    assert {"Mar 10", "Mar 11", "Mar 12"} <= set(_texts(per_day))
    assert "Denied" in _texts(per_day) and "Allowed" in _texts(per_day)  # legend

    tools = _svg_root(charts["top_tools"])
    labels = _texts(tools)
    assert "Board · delete_item" in labels and "Vault · secret_tool" in labels
    denials = _svg_root(charts["denials"])
    assert "tool_not_visible_to_app" in _texts(denials)
    titles = [t.text for t in denials.iter(f"{ns}title")]
    assert any("tool_not_visible_to_app · Denied: 2" in (t or "") for t in titles)
    latency = _svg_root(charts["latency"])
    assert len([r for r in latency.iter(f"{ns}rect") if r.get("data-series")]) == 3
    # Drill-down links on bars.
    assert per_day.find(f"{ns}g/{ns}a") is not None or "<a href=" in charts["per_period"]


def test_empty_report_renders_empty_state_charts(db):
    from audit_review.reports import build_report, render_charts

    charts = render_charts(build_report(_filters()))
    for markup in charts.values():
        root = _svg_root(markup)
        assert any("No " in t for t in _texts(root))


def test_hostile_tool_names_and_reasons_are_escaped_in_svg_and_html(fixture_events, personas):
    from audit.types import AuditEventType, Decision
    from audit.writer import record
    from audit_review.reports import build_report, render_charts

    with at(DAY2, 13):
        record(
            event_type=AuditEventType.TOOL_CALL_APP,
            decision=Decision.DENIED,
            actor_kind="app_view",
            workspace_id=personas.workspace.pk,
            server_id=fixture_events["board"].pk,
            tool_name=HOSTILE_TOOL,
            action="app_tool_call",
            reason=HOSTILE_REASON,
        )
    charts = render_charts(build_report(_filters()), link=lambda o: "?tool=" + str(o))
    for markup in charts.values():
        _svg_root(markup)  # still well-formed XML
        assert "<script>" not in markup and "<img" not in markup
    assert HOSTILE_TOOL in _texts(_svg_root(charts["top_tools"])) or any(
        "script" in t for t in _texts(_svg_root(charts["top_tools"]))
    )
    assert HOSTILE_REASON[:20] in "".join(_texts(_svg_root(charts["denials"])))

    client = Client()
    client.force_login(_staff())
    html = client.get("/audit/", RANGE).content.decode()
    assert "<script>alert" not in html
    assert "<img src=x" not in html
    assert "&lt;script&gt;alert" in html


# ------------------------------------------------------------------------------ pages


def test_staff_sees_the_report_with_numbers_charts_and_table(fixture_events):
    client = Client()
    client.force_login(_staff())
    response = client.get("/audit/", RANGE)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="chart-svg"') == 4
    assert "Audited events" in html and ">16<" in html
    assert "/admin/audit/auditevent/" in html  # drill-down to the admin
    assert "export.csv?since=2025-03-10" in html
    assert response.context["page_obj"].paginator.count == 16
    # No inline style or script: the page works under the strict CSP.
    assert "style=" not in html and "<style" not in html
    assert "<script>" not in html and "<script src" in html


def test_report_page_filters_and_paginates(fixture_events, personas):
    client = Client()
    client.force_login(_staff())
    response = client.get("/audit/", {**RANGE, "workspace": personas.other_workspace.pk})
    assert response.context["report"].total == 3
    assert [c["label"] for c in response.context["chips"]] == ["Workspace"]
    assert client.get("/audit/", {**RANGE, "action": "ui_open_link"}).context["report"].total == 1
    unknown = client.get("/audit/", {**RANGE, "action": "made_up_action"})
    assert unknown.context["report"].total == 0 and not unknown.context["form"].errors
    response = client.get("/audit/", {**RANGE, "decision": "denied", "tool": "delete_item"})
    assert response.context["report"].total == 2
    rows = response.context["rows"]
    assert {r["event"].reason for r in rows} == {"tool_not_visible_to_app"}

    from audit.types import AuditEventType, Decision
    from audit.writer import record

    with at(DAY1, 20):
        for _ in range(60):
            record(
                event_type=AuditEventType.MESSAGE_POSTED,
                decision=Decision.ALLOWED,
                actor_kind="user",
                workspace_id=personas.workspace.pk,
            )
    first = client.get("/audit/", RANGE)
    assert first.context["page_obj"].paginator.num_pages == 2
    assert len(first.context["rows"]) == 50
    second = client.get("/audit/", {**RANGE, "page": 2})
    assert len(second.context["rows"]) == 26
    assert "page=1" in second.content.decode()


def test_invalid_filters_are_reported_not_ignored_silently(fixture_events):
    client = Client()
    client.force_login(_staff())
    response = client.get("/audit/", {"since": "2025-03-12", "until": "2025-03-10"})
    assert response.status_code == 200
    assert "The end date is before the start date." in response.content.decode()
    bad = client.get("/audit/export.csv", {"since": "yesterday"})
    assert bad.status_code == 400


def test_report_page_query_count_is_bounded(fixture_events, django_assert_max_num_queries):
    client = Client()
    client.force_login(_staff())
    client.get("/audit/", RANGE)  # warm caches (content types, permissions)
    with django_assert_max_num_queries(16):
        assert client.get("/audit/", RANGE).status_code == 200


@pytest.mark.parametrize("who", ["owner", "member", "viewer", "outsider"])
@pytest.mark.parametrize("url", ["/audit/", "/audit/export.csv", "/audit/export.json"])
def test_non_staff_personas_are_refused(personas, who, url):
    client = Client()
    client.force_login(getattr(personas, who))
    assert client.get(url).status_code == 403


@pytest.mark.parametrize("url", ["/audit/", "/audit/export.csv", "/audit/export.json"])
def test_anonymous_is_sent_to_login(db, url):
    response = Client().get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")


def test_staff_without_the_audit_permission_is_refused(db):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user("helpdesk", password="pw-" + "x" * 12)
    user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    assert client.get("/audit/").status_code == 403
    user.user_permissions.add(Permission.objects.get(codename="view_auditevent"))
    client.force_login(get_user_model().objects.get(pk=user.pk))
    assert client.get("/audit/").status_code == 200


def test_the_report_names_rows_by_id_and_keeps_the_ids_of_deleted_ones(personas):
    """The log names workspaces and servers by id; the report looks their names and slugs up
    (the table, top tools, exports) and shows the id once the row is gone."""
    from audit.types import AuditEventType, Decision
    from audit.writer import record
    from audit_review.reports import build_report
    from mcp_bridge.models import McpServer

    board, vault = _servers()
    with at(DAY2, 9):
        for server in (board, vault):
            record(
                event_type=AuditEventType.TOOL_CALL_USER,
                decision=Decision.ALLOWED,
                workspace_id=personas.workspace.pk,
                server_id=server.pk,
                tool_name="list_items",
            )
    vault_id = vault.pk
    McpServer.objects.filter(pk=vault_id).delete()

    labels = {t.label for t in build_report(_filters()).top_tools}
    assert labels == {"Board · list_items", f"server #{vault_id} · list_items"}
    client = Client()
    client.force_login(_staff())
    rows = client.get("/audit/", RANGE).context["rows"]
    assert {(r["workspace"], r["server"]) for r in rows} == {
        (personas.workspace.name, "Board"),
        (personas.workspace.name, ""),
    }
    html = client.get("/audit/", RANGE).content.decode()
    assert f'<span class="muted">server #{vault_id}</span>' in html
    exported = list(csv.DictReader(io.StringIO(_stream(client.get("/audit/export.csv", RANGE)))))
    assert {(r["workspace_slug"], r["server_slug"]) for r in exported} == {
        (personas.workspace.slug, "board"),
        (personas.workspace.slug, ""),
    }


# ---------------------------------------------------------------------------- exports


def _stream(response) -> str:
    return b"".join(response.streaming_content).decode()


def test_csv_export_parses_and_matches_the_filter(fixture_events, personas):
    from audit_review.reports import EXPORT_COLUMNS

    client = Client()
    client.force_login(_staff())
    response = client.get("/audit/export.csv", {**RANGE, "workspace": personas.workspace.pk})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="atrium-audit-20250310-20250312.csv"' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(_stream(response))))
    assert len(rows) == 13
    assert list(rows[0].keys()) == list(EXPORT_COLUMNS)
    assert {r["workspace_slug"] for r in rows} == {"acme"}
    assert rows[0]["created_at"] >= rows[-1]["created_at"]  # newest first
    approved = [r for r in rows if r["event_type"] == "501"]
    assert {r["event_type_label"] for r in approved} == {"Approval granted"}
    assert sorted(float(r["latency_ms"]) for r in approved) == [5000.0, 45000.0]
    link = next(r for r in rows if r["action"] == "ui_open_link")
    assert json.loads(link["extra"]) == {"url": "javascript:alert(1)"}
    assert link["actor_username"] == "vera" and link["category"] == "view"


def test_json_export_parses_and_matches_the_csv(fixture_events):
    client = Client()
    client.force_login(_staff())
    data = json.loads(_stream(client.get("/audit/export.json", {**RANGE, "decision": "denied"})))
    assert data["count"] == 4 == len(data["events"])
    assert data["filters"] == {"since": "2025-03-10", "until": "2025-03-12", "decision": "denied"}
    assert {e["decision"] for e in data["events"]} == {"denied"}
    csv_rows = list(
        csv.DictReader(
            io.StringIO(_stream(client.get("/audit/export.csv", {**RANGE, "decision": "denied"})))
        )
    )
    assert [int(r["id"]) for r in csv_rows] == [e["id"] for e in data["events"]]
    assert [r["reason"] for r in csv_rows] == [e["reason"] for e in data["events"]]


def test_exports_defuse_spreadsheet_formulas_but_json_keeps_exact_values(fixture_events, personas):
    from audit.types import AuditEventType, Decision
    from audit.writer import record

    with at(DAY2, 14):
        record(
            event_type=AuditEventType.TOOL_CALL_USER,
            decision=Decision.ALLOWED,
            actor_kind="user",
            workspace_id=personas.workspace.pk,
            tool_name=FORMULA_TOOL,
            reason=HOSTILE_REASON,
        )
    client = Client()
    client.force_login(_staff())
    params = {**RANGE, "tool": FORMULA_TOOL}
    rows = list(csv.DictReader(io.StringIO(_stream(client.get("/audit/export.csv", params)))))
    assert [r["tool_name"] for r in rows] == ["'" + FORMULA_TOOL]
    assert rows[0]["reason"] == HOSTILE_REASON
    data = json.loads(_stream(client.get("/audit/export.json", params)))
    assert [e["tool_name"] for e in data["events"]] == [FORMULA_TOOL]


def test_empty_exports_are_still_valid(db):
    client = Client()
    client.force_login(_staff())
    rows = list(csv.reader(io.StringIO(_stream(client.get("/audit/export.csv", RANGE)))))
    assert len(rows) == 1 and rows[0][0] == "id"
    data = json.loads(_stream(client.get("/audit/export.json", RANGE)))
    assert data["events"] == [] and data["count"] == 0
