"""What real apps need from the host, in real Chromium (issue 27, Deliver 4).

The server is tests/fixtures/mcp_servers/real_apps.py ("Real apps"): a 7 MB single-file
app, a 17 MB one (over the limit), and a widget that drives six app-only plumbing tools
as soon as it has its input (write tools: each view call asks), with buttons for a burst
of 15 calls and for a form's "7" in an integer field.

- The 7 MB app mounts; serving its document grows the web process by little (RSS high
  water mark, measured while Chromium fetches it three more times).
- The 17 MB app's row says why there is no view.
- The widget needs exactly one consent card ("Allow Real apps in this thread"); its
  15-call burst shows as one "N calls by Real apps" line under the view, which keeps its
  place; its "7" runs (the server coerces it).
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.helpers_ui import CSP_WATCH_JS, login
from tests.browser.test_views import HostPageWatch, app_frame, call_tool, view_row, wait_ready
from tests.live import ROOT, LiveAtrium, RssGrowth

pytestmark = [pytest.mark.browser, pytest.mark.slow]

THREADS = ["big", "huge", "widget", "question"]
MB = 1024 * 1024

SEED = """
import json, sys
from django.contrib.auth import get_user_model
from chat import services
from bindings.services.bindings import binding_create
from mcp_bridge.services.servers import server_add

U = get_user_model()
owner = U.objects.create_user("olivia", password={password!r}, first_name="Olivia", last_name="Park")
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
threads = {{
    name: services.thread_create(workspace=workspace, title="Real " + name, actor=owner).pk
    for name in {threads!r}
}}
server = server_add(
    name="Real apps", slug="real", transport="stdio", command=sys.executable, args=[{server_py!r}],
)
binding_create(server=server, workspace=workspace)
print(json.dumps({{"threads": threads}}))
"""


@dataclass
class World:
    server: LiveAtrium
    password: str
    threads: dict[str, int]

    def thread_url(self, name: str) -> str:
        return f"{self.server.app_origin}/w/acme/t/{self.threads[name]}/"

    def approvals(self) -> list[str]:
        def query(alias: str) -> list[str]:
            from bindings.models import ApprovalRequest

            rows = ApprovalRequest.objects.using(alias).filter(thread_id=self.threads["widget"])
            return list(rows.order_by("pk").values_list("tool_name", flat=True))

        return self.server.read(query)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("real-apps")
    server = LiveAtrium(var_dir=base / "var").setup()
    password = "pw-" + secrets.token_urlsafe(10)
    seeded = json.loads(
        server.shell(
            SEED.format(
                password=password,
                threads=THREADS,
                server_py=str(ROOT / "tests" / "fixtures" / "mcp_servers" / "real_apps.py"),
            )
        )
        .strip()
        .splitlines()[-1]
    )
    server.start()
    try:
        yield World(server, password, seeded["threads"])
    finally:
        server.stop()


@pytest.fixture
def open_page(browser: Any, world: World) -> Iterator[Any]:
    contexts: list[Any] = []
    watches: list[HostPageWatch] = []

    def open_(thread: str) -> Any:
        context = browser.new_context(
            viewport={"width": 1180, "height": 860}, color_scheme="light", device_scale_factor=1
        )
        context.add_init_script(CSP_WATCH_JS)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(30_000)
        watches.append(HostPageWatch(page, world.server.app_origin))
        login(page, world.server.app_origin, "olivia", world.password)
        page.goto(world.thread_url(thread))
        page.wait_for_selector("#conn-indicator[data-state=live]")
        return page

    yield open_
    problems = [p for watch in watches for p in watch.problems()]
    for context in contexts:
        context.close()
    assert not problems, "CSP violations or script errors on the host page:\n" + "\n".join(problems)


def shots(page: Any, directory: Path, name: str, target: Any) -> None:
    target.scroll_into_view_if_needed()
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.wait_for_selector(f"html[data-theme={scheme}]")
        target.screenshot(path=str(directory / f"real-apps-{name}-{scheme}.png"))
    page.emulate_media(color_scheme="light")


# ---- UI documents up to 16 MiB ------------------------------------------------------------


def test_a_7_mb_single_file_app_mounts_and_is_streamed(open_page, world, screenshots):
    page = open_page("big")
    documents: list[str] = []
    page.on("request", lambda r: documents.append(r.url) if "/views/doc/" in r.url else None)
    call_tool(page, "real.big_page")
    row = view_row(page, "big_page")
    wait_ready(page, row, timeout=60_000)
    expect(app_frame(row).locator("#big-ok")).to_have_text("The big app is mounted")
    shots(page, screenshots, "big", row)

    # Serving the document again: the web process's high water mark barely moves.
    assert documents
    with RssGrowth([world.server.processes[0].pid]) as growth:
        for _ in range(3):
            response = page.request.get(documents[-1])
            assert response.status == 200
            assert 7 * MB <= len(response.body()) < 8 * MB
    assert growth.most_mib() < 8, (
        f"serving a 7 MB page grew the web process {growth.most_mib()} MiB"
    )


def test_a_page_over_16_mib_is_refused_in_the_views_row(open_page, screenshots):
    page = open_page("huge")
    call_tool(page, "real.huge_page")
    row = view_row(page, "huge_page")
    fallback = row.locator(".view-fallback")
    expect(fallback).to_be_visible(timeout=60_000)
    expect(fallback.locator(".view-fallback-reason")).to_have_text(
        "This app's page is larger than Atrium accepts (17.0 MB > 16 MB)."
    )
    expect(fallback.locator(".view-retry")).to_have_count(0)  # trying again changes nothing
    shots(page, screenshots, "huge", row)


# ---- consent that fits how apps are built ---------------------------------------------------


def test_a_widget_needs_one_consent_card_and_its_calls_group_under_it(
    open_page, world, screenshots
):
    page = open_page("widget")
    call_tool(page, "real.widget")
    row = view_row(page, "widget")
    wait_ready(page, row, timeout=60_000)
    app = app_frame(row)

    # Its bootstrap asks; the card offers to allow the app in this thread.
    card = row.locator(".view-calls-attention .approval")
    expect(card).to_have_count(1)
    allow = card.locator("button[data-action=allow_app]")
    expect(allow).to_have_text("Allow Real apps in this thread")
    shots(page, screenshots, "consent", row)
    allow.click()

    # The other five plumbing tools ran without another card.
    expect(app.locator("#out-plumbing")).to_have_attribute("data-state", "ok", timeout=60_000)
    expect(app.locator("#out-plumbing")).to_have_text("6/6 ok")
    assert world.approvals() == ["w_bootstrap"]
    expect(page.locator(".approval")).to_have_count(1)  # the one answered card

    # One colour change = 15 calls: one line under the view, not 15 cards.
    frame = row.locator(":scope > .view-body iframe.view-frame")
    top_before = frame.bounding_box()["y"]
    app.locator("#burst").click()
    expect(app.locator("#out-burst")).to_have_text("15 ok", timeout=60_000)
    group = row.locator(".view-call-group")
    expect(group).to_have_attribute("data-count", "21")
    expect(group.locator(".view-call-group-count")).to_have_text("21 calls by Real apps")
    expect(group).to_have_attribute("data-latest-status", "success")
    expect(group.locator(".view-call-group-body .toolcall").first).to_be_hidden()
    assert group.bounding_box()["height"] < 40
    assert abs(frame.bounding_box()["y"] - top_before) < 2  # the view kept its place

    # A form's "7" for an integer field runs (covered by the allowance: no card).
    app.locator("#seven").click()
    expect(app.locator("#out-seven")).to_have_text(re.compile(r"count=7 \(int\)"))
    expect(group.locator(".view-call-group-count")).to_have_text("22 calls by Real apps")
    assert world.approvals() == ["w_bootstrap"]
    shots(page, screenshots, "grouped", row)
    group.locator(":scope > summary").click()
    expect(group.locator(".view-call-group-body .toolcall").first).to_be_visible()
    shots(page, screenshots, "grouped-open", row)


def test_a_question_from_a_views_own_call_shows_beside_the_view(open_page, world):
    """A view's call that asks the person something (elicitation): its card is not folded
    away in the view's group of calls but shown beside the view until it is answered."""
    page = open_page("question")  # a thread of its own: its bootstrap asks consent once
    call_tool(page, "real.widget")
    row = view_row(page, "widget")
    wait_ready(page, row, timeout=60_000)
    app = app_frame(row)
    consent = row.locator(".view-calls-attention .approval button[data-action=allow_app]")
    expect(consent).to_be_visible(timeout=60_000)
    consent.click()
    expect(app.locator("#out-plumbing")).to_have_attribute("data-state", "ok", timeout=60_000)

    app.locator("#ask").click()
    card = row.locator(
        ".view-calls-attention .srq[data-kind=elicitation_form][data-status=pending]"
    )
    expect(card).to_be_visible(timeout=60_000)
    card.locator("input[name=name]").fill("Ana")
    card.get_by_role("button", name="Accept").click()
    expect(app.locator("#out-ask")).to_have_text("Hello Ana", timeout=60_000)
    # Answered: it folds into the group with its call.
    expect(row.locator(".view-calls-attention .srq")).to_have_count(0)
    expect(row.locator(".view-call-group-body .srq[data-status=accepted]")).to_have_count(1)
