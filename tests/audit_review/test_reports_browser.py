"""The audit review page in real Chromium, against a real uvicorn-served Atrium.

Seeds a month of realistic audit rows, opens /audit/ as staff, checks that the page works
under the strict CSP (no violations), that the charts are drawn and readable in light and
dark themes, that a chart bar drills down, and saves screenshots to
test-artifacts/screenshots/audit-report*.png.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live import LiveAtrium

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"

# Runs inside the live server's environment (manage.py shell -c): a deterministic month.
SEED = r"""
import random
from datetime import datetime, timedelta, timezone as tz
from unittest import mock
from django.contrib.auth import get_user_model
from django.utils import timezone
from audit.writer import record
from audit.types import AuditEventType as T, Decision as D
from bindings.models import AppBinding
from chat import services as chat
from mcp_bridge.models import McpServer

U = get_user_model()
rng = random.Random(7)
people = {n: U.objects.get_or_create(username=n)[0] for n in ("olivia", "marco", "vera", "priya")}
acme = chat.workspace_create(name="Acme", owner=people["olivia"])
ops = chat.workspace_create(name="Ops", owner=people["priya"])
for name, role in (("marco", "member"), ("vera", "viewer")):
    chat.membership_set(workspace=acme, user=people[name], role=role)
launch = chat.thread_create(workspace=acme, title="Launch plan", actor=people["olivia"])
incident = chat.thread_create(workspace=ops, title="Incident 42", actor=people["priya"])
servers = {}
for name in ("Board", "Docs", "Deploy"):
    servers[name] = McpServer.objects.create(name=name, slug=name.lower(), transport="stdio", command="x")
bindings = {
    "Board": AppBinding.objects.create(server=servers["Board"], workspace_id=acme.pk),
    "Docs": AppBinding.objects.create(server=servers["Docs"], workspace_id=acme.pk),
    "Deploy": AppBinding.objects.create(server=servers["Deploy"], workspace_id=ops.pk),
}
TOOLS = [
    ("Board", "list_items", "read", 9), ("Board", "add_item", "write", 4),
    ("Board", "move_item", "write", 5), ("Board", "delete_item", "destructive", 1),
    ("Docs", "search_docs", "read", 6), ("Docs", "open_doc", "read", 3),
    ("Deploy", "deploy_service", "destructive", 2), ("Deploy", "rollback", "destructive", 1),
]
DENY = ["tool_not_visible_to_app", "scheme_not_allowed", "viewer_cannot_act",
        "rate_limited", "policy_denies", "not_a_member", "tool_not_enabled"]
DENY_W = [5, 4, 3, 3, 2, 1, 1]
today = timezone.localdate()
for back in range(29, -1, -1):
    day = today - timedelta(days=back)
    weekend = day.weekday() >= 5
    for _ in range(rng.randint(3, 8) if weekend else rng.randint(14, 34)):
        server, tool, risk, _w = rng.choices(TOOLS, weights=[t[3] for t in TOOLS])[0]
        b = bindings[server]
        ws = acme if b.workspace_id == acme.pk else ops
        th = launch if ws == acme else incident
        who = rng.choice(["olivia", "marco"] if ws == acme else ["priya"])
        at = datetime(day.year, day.month, day.day, rng.randint(8, 18), rng.randint(0, 59), tzinfo=tz.utc)
        origin = rng.choices(["user", "model", "app_view"], weights=[3, 4, 3])[0]
        etype = {"user": T.TOOL_CALL_USER, "model": T.TOOL_CALL_MODEL, "app_view": T.TOOL_CALL_APP}[origin]
        action = {"user": "user_tool_call", "model": "model_tool_call", "app_view": "app_tool_call"}[origin]
        base = dict(workspace_id=ws.pk, thread_id=th.pk, binding_id=b.pk, server_id=b.server_id,
                    tool_name=tool, actor_kind=origin, actor_user_id=people[who].pk)
        with mock.patch("django.utils.timezone.now", return_value=at):
            roll = rng.random()
            if roll < 0.12:
                record(event_type=etype, decision=D.DENIED, action=action,
                       reason=rng.choices(DENY, weights=DENY_W)[0], **base)
            elif risk == "read" or (risk == "write" and origin == "user"):
                record(event_type=etype, decision=D.ALLOWED, action=action, reason="ok", **base)
                if roll > 0.97:
                    record(event_type=T.TOOL_CALL_FAILED, decision=D.FAILED, action="tool_result",
                           reason="server_unavailable", latency_ms=rng.uniform(50, 900), **base)
            else:
                record(event_type=etype, decision=D.PENDING, action=action,
                       reason="approval_required", **base)
                record(event_type=T.APPROVAL_REQUESTED, decision=D.PENDING, action="approval",
                       reason="approval_required", **base)
                latency = rng.lognormvariate(10.6, 1.3)
                approve = rng.random() < 0.8
                decider = people["marco" if who == "olivia" else "olivia"] if ws == acme else people["priya"]
                with mock.patch("django.utils.timezone.now", return_value=at + timedelta(milliseconds=latency)):
                    record(event_type=T.APPROVAL_APPROVED if approve else T.APPROVAL_REJECTED,
                           decision=D.APPROVED if approve else D.REJECTED, action="approval",
                           reason="approved" if approve else "rejected", latency_ms=latency,
                           **{**base, "actor_kind": "user", "actor_user_id": decider.pk})
                    if approve:
                        record(event_type=etype, decision=D.APPROVED, action=action,
                               reason="approved", **base)
        if rng.random() < 0.25:
            with mock.patch("django.utils.timezone.now", return_value=at + timedelta(minutes=3)):
                denied = rng.random() < 0.3
                record(event_type=T.UI_OPEN_LINK, decision=D.DENIED if denied else D.ALLOWED,
                       action="ui_open_link", reason="scheme_not_allowed" if denied else "ok",
                       actor_kind="app_view",
                       actor_user_id=people["vera"].pk, workspace_id=acme.pk, thread_id=launch.pk,
                       binding_id=bindings["Board"].pk, server_id=servers["Board"].pk)
print("seeded")
"""


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveAtrium]:
    server = LiveAtrium(var_dir=tmp_path / "var").setup()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def capture_report(live: LiveAtrium, browser, out_dir: Path) -> dict:
    """Seed, sign in as staff, open the report; returns what the checks need."""
    out_dir.mkdir(parents=True, exist_ok=True)
    password = live.create_user("auditor", staff=True)
    assert "seeded" in live.shell(SEED)

    context = browser.new_context(viewport={"width": 1440, "height": 1000}, color_scheme="light")
    page = context.new_page()
    violations: list[str] = []
    page.on(
        "console",
        lambda msg: (
            violations.append(msg.text)
            if "Content Security Policy" in msg.text or "Refused to" in msg.text
            else None
        ),
    )
    page.goto(f"{live.app_origin}/login/?next=/audit/")
    page.fill("input[name=username]", "auditor")
    page.fill("input[name=password]", password)
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url("**/audit/**")
    page.wait_for_load_state("networkidle")
    result: dict = {"violations": violations}
    result["charts"] = page.locator("svg.chart-svg").count()
    result["bars"] = page.locator("svg.chart-svg rect[data-series]").count()
    result["total"] = page.locator(".kpi-total .kpi-value").inner_text()
    result["rows"] = page.locator("table.events tbody tr").count()
    # Text in the charts follows the page's text colour (currentColor).
    result["light_text"] = page.evaluate(
        "getComputedStyle(document.querySelector('#chart-per-period text')).fill"
    )
    result["css_loaded"] = page.evaluate("getComputedStyle(document.body).backgroundColor")
    page.screenshot(path=str(out_dir / "audit-report.png"), full_page=True)

    page.click("[data-theme-set=dark]")
    page.wait_for_function("document.documentElement.dataset.theme === 'dark'")
    result["dark_text"] = page.evaluate(
        "getComputedStyle(document.querySelector('#chart-per-period text')).fill"
    )
    page.screenshot(path=str(out_dir / "audit-report-dark.png"), full_page=False)
    page.click("[data-theme-set=light]")

    # Drill down: a denial reason bar filters the page to that reason.
    page.locator("#chart-denials a.bar-link").first.click()
    page.wait_for_load_state("networkidle")
    result["drill_url"] = page.url
    result["drill_chip"] = page.locator(".chip").all_inner_texts()
    context.close()
    return result


def test_audit_report_in_chromium(live, browser):
    result = capture_report(live, browser, ARTIFACTS)
    assert result["violations"] == []
    assert result["charts"] == 4
    assert result["bars"] > 40
    assert int(result["total"].replace(",", "")) > 300
    assert result["rows"] == 50
    assert result["css_loaded"] not in ("rgba(0, 0, 0, 0)", "")
    assert result["light_text"] != result["dark_text"]  # readable in both themes
    assert "decision=denied" in result["drill_url"] and "reason=" in result["drill_url"]
    assert any("Reason code" in chip for chip in result["drill_chip"])
    assert (ARTIFACTS / "audit-report.png").stat().st_size > 50_000
