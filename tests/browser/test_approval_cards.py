"""One card per question, in real Chromium (issue 23, F5; docs/consent.md "Approval cards").

The published ``@modelcontextprotocol/server-system-monitor`` polls ``poll-system-stats``
every two seconds from its view. The tool declares nothing, so its calls ask (no standing
policy here). While nobody answers, the thread shows ONE card for the question, counting
how many times it was asked, and labelled for what it is: not declared safe, treated as
destructive (not "destructive": a poll that only reads simply carries no annotations).
"""

# ruff: noqa: F811 — the fixtures imported from test_consent are used by name

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.test_consent import (  # noqa: F401 — fixtures used by name
    WAIT,
    consent_world,
    open_as,
    pending_cards,
)
from tests.browser.test_views import app_frame, audit, call_tool, goto_thread, view_row, wait_ready

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TOOL = "poll-system-stats"


def _start_polling(app: Any) -> Any:
    expect(app.locator("#info-hostname")).not_to_have_text("--", timeout=WAIT)
    toggle = app.locator("#poll-toggle-btn")
    if "start" in toggle.inner_text().lower():
        toggle.click()
    return toggle


def _shots(page: Any, target: Any, directory: Any, name: str) -> None:
    for theme in ("light", "dark"):
        page.locator("html").evaluate("(el, t) => el.setAttribute('data-theme', t)", theme)
        target.screenshot(path=str(directory / f"approval-cards-{name}-{theme}.png"))
    page.locator("html").evaluate("el => el.setAttribute('data-theme', 'light')")


def test_a_polling_view_shows_one_card_that_counts_its_asks(open_as, consent_world, screenshots):
    page = open_as("olivia")
    goto_thread(page, consent_world, "sysmon")
    call_tool(page, "sysmon.get-system-info")
    row = view_row(page, "get-system-info")
    wait_ready(page, row, timeout=60_000)  # a busy machine: a cold node server
    toggle = _start_polling(app_frame(row))

    card = pending_cards(page)
    expect(card).to_have_count(1, timeout=WAIT)
    # Polls keep coming every two seconds: they join the card instead of adding cards.
    expect(card.locator(".approval-meta")).to_contain_text("asked 3 times", timeout=WAIT)
    expect(pending_cards(page)).to_have_count(1)
    badge = card.locator(".risk-badge")
    expect(badge).to_have_text("Not declared safe — treated as destructive")
    expect(badge).to_have_class("risk-badge risk-destructive risk-undeclared")
    card.scroll_into_view_if_needed()
    _shots(page, card, screenshots, "asked")
    toggle.click()  # stop polling

    # Behind the one card: one request, asked again; every poll audited.
    asked = audit(consent_world, tool_name=TOOL, event_type=500)
    again = audit(consent_world, tool_name=TOOL, event_type=505)
    assert len(asked) == 1, asked
    assert len(again) >= 2, again

    # One Approve once answers it (and every poll that waited on it).
    card.locator("[data-action=approve]").click()
    expect(pending_cards(page)).to_have_count(0, timeout=WAIT)


FLIP_TO_MEMBER_SIGN_IN = """
from mcp_bridge.models import McpServer
McpServer.objects.filter(slug="basic").update(auth_mode="oauth_member")
print("ok")
"""


def test_only_the_owner_of_a_personal_sign_in_is_offered_approve(
    open_as, consent_world, screenshots
):
    olivia = open_as("olivia")
    goto_thread(olivia, consent_world, "basic")
    marco = open_as("marco")
    goto_thread(marco, consent_world, "basic")
    call_tool(olivia, "basic.get-time")  # her own call: it runs
    row = view_row(olivia, "get-time")
    wait_ready(olivia, row, timeout=60_000)
    # From here the server signs each member in with their own account (as an admin's
    # switch to "OAuth, each member their own" would): the view's call would spend
    # Olivia's own sign-in. (The decision reads the server afresh; the call never runs.)
    assert consent_world.server.shell(FLIP_TO_MEMBER_SIGN_IN).strip().endswith("ok")
    olivia.bring_to_front()
    app_frame(row).locator("#get-time-btn").click()

    card = pending_cards(marco)
    expect(card).to_have_count(1, timeout=WAIT)
    expect(card.locator(".approval-owner-only")).to_have_text(
        "Only Olivia Park can approve this: it uses their own sign-in to Basic."
    )
    expect(card.locator("[data-action=approve]")).to_have_count(0)
    expect(card.locator("[data-action=allow_thread]")).to_have_count(0)
    expect(card.locator("[data-action=reject]")).to_be_visible()
    # Olivia, whose sign-in it is, is offered the approval.
    expect(pending_cards(olivia).locator("[data-action=approve]")).to_be_visible()
    card.scroll_into_view_if_needed()
    _shots(marco, card, screenshots, "owner-only")

    card.locator("[data-action=reject]").click()
    expect(pending_cards(marco)).to_have_count(0, timeout=WAIT)
    expect(pending_cards(olivia)).to_have_count(0, timeout=WAIT)
