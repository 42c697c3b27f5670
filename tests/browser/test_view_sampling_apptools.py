"""The draft spec's host features in real Chromium (issue 27, docs/view-bridge.md
"Draft-spec features"), through the real path: the fixture view
(tests/fixtures/mcp_servers/view_features.py, written the way an ext-apps ``App`` is used),
a live Atrium and the fake OpenAI-compatible server (tests/chat/fake_llm.py) as the
workspace's model.

- The view's ``sampling/createMessage`` shows the consent card naming the app, the messages
  and the token cap; *Allow in this thread* runs it on the model and the answer reaches the
  view; the next request runs without a card; the view's ``_meta`` never reaches the model.
- The view provides a tool (app capability ``tools``): the model is offered
  ``view__feat__board_count`` described as coming from the view, calls it, the view answers
  and the model gets the view's result.
- A tool not declared safe asks the person first (*Approve once*); ``list_changed`` makes the
  host list the view's tools again; a view that goes mid-call fails the call clearly.
- ``ui/log`` (the draft's name of ``notifications/message``) is accepted and audited.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from playwright.sync_api import expect

from audit.models import AuditEvent
from audit.types import AuditEventType
from tests.browser.helpers_ui import CSP_WATCH_JS, login
from tests.browser.test_views import HostPageWatch, app_frame, call_tool, view_row, wait_ready
from tests.chat.fake_llm import FakeLLM, openai_text, openai_tool_calls
from tests.live import ROOT, LiveAtrium
from tests.waiting import poll

pytestmark = [pytest.mark.browser, pytest.mark.slow]

THREADS = ["sampling", "tools", "log", "ask", "closing"]
WIRE_NAME = "view__feat__board_count"
SAMPLING_META_SENTINEL = "SENTINEL-VIEW-SAMPLING-META-5a1c"  # the fixture view's _meta

SEED = """
import json, sys
from django.contrib.auth import get_user_model
from chat import services
from bindings.services.bindings import binding_create
from mcp_bridge.services.servers import server_add

U = get_user_model()
owner = U.objects.create_user("olivia", password={password!r}, first_name="Olivia", last_name="Park")
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
workspace.provider = "openai"
workspace.model = "fake-model"
workspace.provider_base_url = {llm_url!r}
workspace.provider_api_key = "sk-test-features"
workspace.save()
threads = {{
    name: services.thread_create(workspace=workspace, title="Features " + name, actor=owner).pk
    for name in {threads!r}
}}
server = server_add(
    name="Features", slug="feat", transport="stdio", command=sys.executable, args=[{server_py!r}],
)
binding_create(server=server, workspace=workspace)
print(json.dumps({{"threads": threads}}))
"""


@dataclass
class World:
    server: LiveAtrium
    llm: FakeLLM
    password: str
    threads: dict[str, int]

    def thread_url(self, name: str) -> str:
        return f"{self.server.app_origin}/w/acme/t/{self.threads[name]}/"

    def audit(self, event_type: int, thread: str) -> list[dict[str, Any]]:
        def query(alias: str) -> list[dict[str, Any]]:
            rows = AuditEvent.objects.using(alias).filter(
                event_type=event_type, thread_id=self.threads[thread]
            )
            return [
                {"decision": r.decision, "reason": r.reason, "extra": r.extra}
                for r in rows.order_by("id")
            ]

        return self.server.read(query)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("features")
    llm = FakeLLM("openai").start()
    server = LiveAtrium(var_dir=base / "var").setup()
    password = "pw-" + secrets.token_urlsafe(10)
    seeded = json.loads(
        server.shell(
            SEED.format(
                password=password,
                llm_url=llm.base_url,
                threads=THREADS,
                server_py=str(ROOT / "tests" / "fixtures" / "mcp_servers" / "view_features.py"),
            )
        )
        .strip()
        .splitlines()[-1]
    )
    server.start()
    try:
        yield World(server, llm, password, seeded["threads"])
    finally:
        server.stop()
        llm.stop()


@pytest.fixture
def open_page(browser: Any, world: World) -> Iterator[Any]:
    contexts: list[Any] = []
    watches: list[HostPageWatch] = []

    def open_(thread: str) -> Any:
        context = browser.new_context(
            viewport={"width": 1180, "height": 900}, color_scheme="light", device_scale_factor=1
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


def open_view(page: Any) -> tuple[Any, Any, int]:
    call_tool(page, "feat.features_view", {})
    row = view_row(page, "features_view")
    call_id = wait_ready(page, row, timeout=30_000)
    return row, app_frame(row), call_id


def post(page: Any, text: str) -> None:
    box = page.locator("#composer-input")
    box.fill(text)
    box.press("Enter")


def test_view_sampling_allowed_in_this_thread_reaches_the_model_and_returns(
    open_page, world, screenshots
):
    page = open_page("sampling")
    row, app, _ = open_view(page)
    expect(app.locator("#out-caps")).to_have_text('["sampling"]')  # hostCapabilities.sampling
    before = len(world.llm.requests)
    world.llm.push(openai_text("Teal."))
    app.locator("#sample").click()

    card = page.locator(".srq[data-kind=sampling][data-status=pending]")
    expect(card).to_be_visible()
    expect(card).to_contain_text("The Features app (its view) wants to use this workspace’s model")
    expect(card).to_contain_text("Name one colour.")
    expect(card).to_contain_text("Up to 40 tokens")
    assert len(world.llm.requests) == before  # nothing runs before consent
    card.scroll_into_view_if_needed()
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.wait_for_selector(f"html[data-theme={scheme}]")
        card.screenshot(path=str(screenshots / f"view-sampling-card-{scheme}.png"))
    page.emulate_media(color_scheme="light")

    card.get_by_role("button", name="Allow in this thread").click()
    out = app.locator("#out-sample")
    expect(out).to_have_attribute("data-state", "ok")
    expect(out).to_contain_text("Teal.")
    sampled = world.llm.requests[before:]
    assert len(sampled) == 1
    assert "Name one colour." in sampled[0].raw
    assert SAMPLING_META_SENTINEL not in sampled[0].raw  # _meta never reaches the model

    # Allowed in this thread: the next request runs without a card.
    world.llm.push(openai_text("Olive."))
    app.locator("#sample").click()
    expect(out).to_contain_text("Olive.")
    expect(page.locator(".srq[data-kind=sampling][data-status=pending]")).to_have_count(0)
    assert all(SAMPLING_META_SENTINEL not in r.raw for r in world.llm.requests)

    decided = world.audit(AuditEventType.VIEW_SAMPLING_REQUESTED, "sampling")
    assert [d["decision"] for d in decided] == ["allowed", "allowed"]
    ran = world.audit(AuditEventType.SAMPLING_RAN, "sampling")
    assert len(ran) == 2 and ran[0]["extra"]["max_tokens"] == 40
    allowances = world.audit(AuditEventType.SAMPLING_ALLOWANCE_CREATED, "sampling")
    assert len(allowances) == 1


def test_model_calls_a_tool_the_view_provides_and_the_view_answers(open_page, world, screenshots):
    page = open_page("tools")
    row, app, _ = open_view(page)
    # The view's tools are registered once it is ready (tools/list, host → view).
    poll(
        lambda: world.audit(AuditEventType.VIEW_TOOLS_REGISTERED, "tools"),
        timeout=30,
        reason="the view's tools registered",
    )
    before = len(world.llm.requests)
    world.llm.push(
        openai_tool_calls(("call_v1", WIRE_NAME, ['{"column": ', '"todo"}'])),
        openai_text("The view says the board has 7 cards."),
    )
    post(page, "How many cards are on the board?")
    expect(
        page.locator(".msg-entry", has_text="The view says the board has 7 cards.")
    ).to_be_visible()
    expect(app.locator("#out-toolcall")).to_contain_text('1 call(s), last {"column":"todo"}')

    first, second = world.llm.requests[before], world.llm.requests[before + 1]
    offered = {t["function"]["name"]: t["function"] for t in first.body["tools"]}
    assert WIRE_NAME in offered
    assert offered[WIRE_NAME]["description"].startswith("(from the Features view in this thread)")
    results = [m for m in second.body["messages"] if m.get("role") == "tool"]
    assert results and "The board has 7 cards." in results[-1]["content"]
    assert '"cards": 7' in results[-1]["content"] or '"cards":7' in results[-1]["content"]

    called = world.audit(AuditEventType.VIEW_TOOL_CALLED, "tools")
    answered = world.audit(AuditEventType.VIEW_TOOL_ANSWERED, "tools")
    assert [c["decision"] for c in called] == ["allowed"]
    assert [a["reason"] for a in answered] == ["ok"]
    # The read-only call shows who ran what, in the thread (no consent asked).
    done = page.locator(".srq[data-kind=view_tool]")
    expect(done).to_contain_text("Ran (read-only)")
    row.scroll_into_view_if_needed()
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.wait_for_selector(f"html[data-theme={scheme}]")
        page.screenshot(path=str(screenshots / f"view-apptool-{scheme}.png"))
    page.emulate_media(color_scheme="light")

    # The view closes: its tools are withdrawn and no longer offered.
    page.reload()
    page.wait_for_selector("#conn-indicator[data-state=live]")
    poll(
        lambda: world.audit(AuditEventType.VIEW_TOOLS_WITHDRAWN, "tools"),
        timeout=30,
        reason="the closed view's tools withdrawn",
    )


def test_ui_log_is_accepted_and_audited(open_page, world):
    page = open_page("log")
    _, app, _ = open_view(page)
    app.locator("#log").click()
    expect(app.locator("#out-log")).to_have_text("sent")
    rows = poll(
        lambda: world.audit(AuditEventType.VIEW_LOG_MESSAGE, "log"),
        timeout=30,
        reason="the ui/log notification audited",
    )
    assert rows[0]["decision"] == "allowed"
    assert "hello from ui/log" in rows[0]["extra"]["data"]


def tool_results(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m.get("role") == "tool"]


def test_a_tool_not_declared_safe_asks_first_and_list_changed_relists(
    open_page, world, screenshots
):
    page = open_page("ask")
    _, app, _ = open_view(page)
    poll(
        lambda: world.audit(AuditEventType.VIEW_TOOLS_REGISTERED, "ask"),
        timeout=30,
        reason="the view's tools registered",
    )
    app.locator("#add").click()  # registerTool after connect → notifications/tools/list_changed
    registered = poll(
        lambda: [
            r
            for r in world.audit(AuditEventType.VIEW_TOOLS_REGISTERED, "ask")
            if "board_extra" in r["extra"]["tools"]
        ],
        timeout=30,
        reason="the view's tools listed again",
    )
    assert registered[0]["decision"] == "allowed"

    before = len(world.llm.requests)
    world.llm.push(
        openai_tool_calls(("call_c1", "view__feat__board_clear", ["{}"])),
        openai_text("Cleared."),
    )
    post(page, "Clear the board, please.")
    card = page.locator(".srq[data-kind=view_tool][data-status=pending]")
    expect(card).to_contain_text("The model wants to run board_clear in the Features view")
    assert app.locator("#out-clear").inner_text() == ""  # nothing runs before consent
    card.scroll_into_view_if_needed()
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.wait_for_selector(f"html[data-theme={scheme}]")
        card.screenshot(path=str(screenshots / f"view-apptool-ask-{scheme}.png"))
    page.emulate_media(color_scheme="light")
    card.get_by_role("button", name="Approve once").click()
    expect(app.locator("#out-clear")).to_have_text("cleared")
    expect(page.locator(".msg-entry", has_text="Cleared.")).to_be_visible()
    offered = [t["function"]["name"] for t in world.llm.requests[before].body["tools"]]
    assert "view__feat__board_extra" in offered
    assert tool_results(world.llm.requests[before + 1].body)[-1] == "The board is empty now."


def test_a_view_that_goes_mid_call_fails_the_call_clearly(open_page, world):
    page = open_page("closing")
    _, app, _ = open_view(page)
    poll(
        lambda: world.audit(AuditEventType.VIEW_TOOLS_REGISTERED, "closing"),
        timeout=30,
        reason="the view's tools registered",
    )
    before = len(world.llm.requests)
    world.llm.push(
        openai_tool_calls(("call_w1", "view__feat__board_wait", ["{}"])),
        openai_text("The view went away."),
    )
    post(page, "Wait for the board.")
    poll(
        lambda: world.audit(AuditEventType.VIEW_TOOL_CALLED, "closing"),
        timeout=30,
        reason="the view's tool called",
    )
    page.goto("about:blank")  # the page (and its socket) goes while the view has not answered
    failed = poll(
        lambda: world.audit(AuditEventType.VIEW_TOOL_FAILED, "closing"),
        timeout=30,
        reason="the call failed",
    )
    assert failed[0]["reason"] in ("view_closed", "closed")
    poll(lambda: len(world.llm.requests) >= before + 2, timeout=30, reason="the model told")
    told = tool_results(world.llm.requests[before + 1].body)[-1]
    assert "closed before it answered" in told
