"""manage.py audit_report: csv, json and standalone html, to stdout or a file."""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET

import pytest
from django.core.management import CommandError, call_command

from tests.audit_review.test_reports import (
    DAY1,
    DAY3,
    FORMULA_TOOL,
    HOSTILE_REASON,
    HOSTILE_TOOL,
    at,
    seed_known_events,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def fixture_events(personas):
    """The known fixture of tests/audit_review/test_reports.py (16 events, 3 days)."""
    return seed_known_events(personas)


SINCE, UNTIL = DAY1.isoformat(), DAY3.isoformat()


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command("audit_report", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_csv_to_stdout_matches_the_filters(fixture_events):
    rows = list(csv.DictReader(io.StringIO(_run("--since", SINCE, "--until", UNTIL))))
    assert len(rows) == 16
    denied = list(
        csv.DictReader(
            io.StringIO(_run("--since", SINCE, "--until", UNTIL, "--decision", "denied"))
        )
    )
    assert len(denied) == 4 and {r["decision"] for r in denied} == {"denied"}
    acme = list(
        csv.DictReader(io.StringIO(_run("--since", SINCE, "--until", UNTIL, "--workspace", "acme")))
    )
    assert len(acme) == 13 and {r["workspace_slug"] for r in acme} == {"acme"}


def test_json_to_a_file(fixture_events, tmp_path):
    target = tmp_path / "audit.json"
    _run(
        "--since",
        SINCE,
        "--until",
        UNTIL,
        "--format",
        "json",
        "--server",
        "vault",
        "--output",
        str(target),
    )
    data = json.loads(target.read_text())
    assert data["count"] == 3
    assert {e["server_slug"] for e in data["events"]} == {"vault"}
    assert data["filters"]["server_id"] == fixture_events["vault"].pk


def test_csv_to_a_file_has_clean_line_endings(fixture_events, tmp_path):
    target = tmp_path / "audit.csv"
    _run("--since", SINCE, "--until", UNTIL, "--output", str(target))
    raw = target.read_bytes()
    assert b"\r\r\n" not in raw
    assert len(list(csv.DictReader(io.StringIO(raw.decode(), newline="")))) == 16


def test_html_is_a_standalone_report(fixture_events, tmp_path, personas):
    from audit.types import AuditEventType, Decision
    from audit.writer import record

    with at(DAY1, 16):
        record(
            event_type=AuditEventType.TOOL_CALL_APP,
            decision=Decision.DENIED,
            actor_kind="app_view",
            workspace_id=personas.workspace.pk,
            tool_name=HOSTILE_TOOL,
            action="app_tool_call",
            reason=HOSTILE_REASON,
        )
    target = tmp_path / "audit.html"
    _run("--since", SINCE, "--until", UNTIL, "--format", "html", "--output", str(target))
    html = target.read_text()
    assert html.startswith("<!doctype html>")
    # Inlined stylesheet, no external references needed.
    assert "<style>" in html and ".kpi-value" in html
    assert 'rel="stylesheet"' not in html and "<script" not in html
    assert html.count('class="chart-svg"') == 4
    assert "Audited events" in html and ">17<" in html
    # Absolute links to the admin of the configured app origin.
    from django.conf import settings

    assert f"{settings.ATRIUM_APP_ORIGIN}/admin/audit/auditevent/" in html
    # Hostile values are escaped (text and SVG).
    assert "<img src=x" not in html and "&lt;script&gt;" in html
    charts = re.findall(
        r'<svg xmlns="http://www.w3.org/2000/svg" class="chart-svg".*?</svg>', html, re.S
    )
    assert len(charts) == 4
    for chart in charts:
        ET.fromstring(chart)


def test_html_for_an_empty_range(db, tmp_path):
    target = tmp_path / "empty.html"
    _run("--since", "2001-01-01", "--until", "2001-01-31", "--format", "html", "-o", str(target))
    html = target.read_text()
    assert "No audit events for these filters." in html
    assert "No audit events match these filters." in html


def test_formula_cells_are_defused_in_csv(fixture_events, personas):
    from audit.types import AuditEventType, Decision
    from audit.writer import record

    with at(DAY1, 17):
        record(
            event_type=AuditEventType.TOOL_CALL_USER,
            decision=Decision.ALLOWED,
            actor_kind="user",
            workspace_id=personas.workspace.pk,
            tool_name=FORMULA_TOOL,
        )
    rows = list(csv.DictReader(io.StringIO(_run("--since", SINCE, "--until", UNTIL))))
    assert "'" + FORMULA_TOOL in {r["tool_name"] for r in rows}


@pytest.mark.parametrize(
    "args, message",
    [
        (["--since", "yesterday"], "not a date"),
        (["--since", "2025-03-12", "--until", "2025-03-10"], "after --until"),
        (["--since", "2025-03-10", "--workspace", "nope"], "No workspace with slug 'nope'"),
        (["--since", "2025-03-10", "--server", "nope"], "No server with slug 'nope'"),
    ],
)
def test_bad_arguments_fail_clearly(db, args, message):
    with pytest.raises(CommandError, match=message):
        _run(*args)


def test_unknown_format_and_decision_are_refused(db):
    with pytest.raises(CommandError):
        _run("--since", SINCE, "--format", "xml")
    with pytest.raises(CommandError):
        _run("--since", SINCE, "--decision", "maybe")
