"""App views and the thread's files in real Chromium (issue 26 part 4; docs/files.md "App
views and files"), through the real path: a live Atrium with a Celery worker, the fixture
Apps SDK widget (tests/fixtures/mcp_servers/view_files.py) in its sandbox.

- ``window.openai.uploadFile`` → ``getFileDownloadUrl`` → the widget ``fetch``es the URL and
  gets the very bytes it uploaded (its resource declares Atrium's origin in
  ``connect_domains`` and the binding's admin list names it: docs/files.md);
- ``selectFiles`` opens the host's chooser (outside the frame); the person picks a file of
  the thread; the widget gets that one file (and can read it), nothing else;
- ``ui/download-file`` leaves "Files app saved report.csv" with its chip in the thread, the
  same for another member after a reload;
- a viewer's widget is refused.
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
from tests.live import ROOT, LiveAtrium

pytestmark = [pytest.mark.browser, pytest.mark.slow]

THREADS = ["upload", "select", "save", "viewer"]

SEED = """
import json, sys
from django.contrib.auth import get_user_model
from chat import services
from chat.models import Membership
from bindings.services.bindings import binding_create
from mcp_bridge.services.servers import server_add

U = get_user_model()
owner = U.objects.create_user("olivia", password={password!r}, first_name="Olivia", last_name="Park")
marco = U.objects.create_user("marco", password={password!r}, first_name="Marco", last_name="Rossi")
vera = U.objects.create_user("vera", password={password!r}, first_name="Vera", last_name="Lind")
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
Membership.objects.create(workspace=workspace, user=marco, role="member")
Membership.objects.create(workspace=workspace, user=vera, role="viewer")
threads = {{
    name: services.thread_create(workspace=workspace, title="Files " + name, actor=owner).pk
    for name in {threads!r}
}}
server = server_add(
    name="Files app", slug="files", transport="stdio", command=sys.executable,
    args=[{server_py!r}], env={{"ATRIUM_FILES_ORIGIN": {origin!r}}},
)
binding_create(server=server, workspace=workspace, allowed_domains=[{origin!r}])
print(json.dumps({{"threads": threads}}))
"""


@dataclass
class World:
    server: LiveAtrium
    password: str
    threads: dict[str, int]

    def thread_url(self, name: str) -> str:
        return f"{self.server.app_origin}/w/acme/t/{self.threads[name]}/"

    def audit(self, event_type: int, thread: str) -> list[dict[str, Any]]:
        def query(alias: str) -> list[dict[str, Any]]:
            rows = AuditEvent.objects.using(alias).filter(
                event_type=event_type, thread_id=self.threads[thread]
            )
            return [{"decision": r.decision, "reason": r.reason} for r in rows.order_by("id")]

        return self.server.read(query)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("view-files")
    server = LiveAtrium(var_dir=base / "var").setup()
    password = "pw-" + secrets.token_urlsafe(10)
    seeded = json.loads(
        server.shell(
            SEED.format(
                password=password,
                threads=THREADS,
                origin=server.app_origin,
                server_py=str(ROOT / "tests" / "fixtures" / "mcp_servers" / "view_files.py"),
            )
        )
        .strip()
        .splitlines()[-1]
    )
    server.start(worker=True)
    try:
        yield World(server, password, seeded["threads"])
    finally:
        server.stop()


@pytest.fixture
def open_page(browser: Any, world: World) -> Iterator[Any]:
    contexts: list[Any] = []
    watches: list[HostPageWatch] = []

    def open_(thread: str, user: str = "olivia") -> Any:
        context = browser.new_context(
            viewport={"width": 1180, "height": 900}, color_scheme="light", device_scale_factor=1
        )
        context.add_init_script(CSP_WATCH_JS)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(30_000)
        watches.append(HostPageWatch(page, world.server.app_origin))
        login(page, world.server.app_origin, user, world.password)
        page.goto(world.thread_url(thread))
        page.wait_for_selector("#conn-indicator[data-state=live]")
        return page

    yield open_
    problems = [p for watch in watches for p in watch.problems()]
    for context in contexts:
        context.close()
    assert not problems, "CSP violations or script errors on the host page:\n" + "\n".join(problems)


def open_widget(page: Any) -> tuple[Any, Any]:
    call_tool(page, "files.show_files", {})
    row = view_row(page, "show_files")
    wait_ready(page, row, timeout=30_000)
    return row, app_frame(row)


def test_upload_then_download_url_gives_the_view_its_bytes_back(open_page, world):
    page = open_page("upload")
    _row, app = open_widget(page)
    app.locator("#upload").press("Enter")  # see test_a_viewers_widget_is_refused
    out = app.locator("#out-upload")
    expect(out).to_have_attribute("data-state", "ok", timeout=40_000)
    expect(out).to_have_attribute("data-match", "yes")
    expect(out).to_contain_text("same bytes via " + world.server.app_origin + "/media/")
    assert [r["decision"] for r in world.audit(AuditEventType.VIEW_FILE_UPLOADED, "upload")] == [
        "allowed",
        "allowed",
    ]
    assert "allowed" in [
        r["decision"] for r in world.audit(AuditEventType.VIEW_FILE_LINK_ISSUED, "upload")
    ]


def test_select_files_with_the_hosts_chooser(open_page, world, screenshots):
    page = open_page("select")
    # A member's file in the thread first (the composer's paperclip path).
    with page.expect_file_chooser() as chosen:
        page.locator("#attach-btn").click()
    chosen.value.set_files(
        [{"name": "plan.txt", "mimeType": "text/plain", "buffer": b"The plan: ship it.\n"}]
    )
    expect(page.locator("#composer-files .upload-chip.is-done")).to_have_count(1)
    box = page.locator("#composer-input")
    box.fill("The plan")
    box.press("Enter")
    expect(page.locator(".msg-files .file-chip", has_text="plan.txt")).to_be_visible(timeout=30_000)

    _row, app = open_widget(page)
    app.locator("#select").press("Enter")
    chooser = page.locator("dialog.file-chooser")
    expect(chooser).to_be_visible()
    expect(chooser).to_contain_text("Files app asks for a file")
    item = chooser.locator(".file-chooser-item", has_text="plan.txt")
    expect(item).to_be_visible()
    item.click()
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.wait_for_selector(f"html[data-theme={scheme}]")
        chooser.screenshot(path=str(screenshots / f"view-files-chooser-{scheme}.png"))
    page.emulate_media(color_scheme="light")
    chooser.get_by_role("button", name="Share with Files app").click()
    out = app.locator("#out-select")
    expect(out).to_have_attribute("data-state", "ok", timeout=40_000)
    expect(out).to_have_attribute("data-count", "1")
    expect(out).to_contain_text("plan.txt (text/plain) :: The plan: ship it.")
    steps = world.audit(AuditEventType.VIEW_FILES_SELECTED, "select")
    assert [s["decision"] for s in steps] == ["allowed", "allowed"]


def test_download_file_is_saved_in_the_thread_for_everyone(open_page, world, screenshots):
    page = open_page("save")
    _row, app = open_widget(page)
    app.locator("#save").press("Enter")
    expect(app.locator("#out-save")).to_have_attribute("data-state", "ok", timeout=30_000)
    line = page.locator(".msg-entry", has_text="Files app saved report.csv")
    expect(line).to_be_visible()
    chip = line.locator("a.file-chip", has_text="report.csv")
    expect(chip).to_be_visible(timeout=30_000)  # stored by the worker: a download link
    expect(chip).to_have_attribute("download", "report.csv")
    line.scroll_into_view_if_needed()
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.wait_for_selector(f"html[data-theme={scheme}]")
        line.screenshot(path=str(screenshots / f"view-files-saved-{scheme}.png"))
    page.emulate_media(color_scheme="light")

    # Another member, after a reload: the same line, the same chip, and the same bytes.
    marco = open_page("save", "marco")
    other = marco.locator(".msg-entry", has_text="Files app saved report.csv")
    expect(other).to_be_visible()
    other_chip = other.locator("a.file-chip", has_text="report.csv")
    expect(other_chip).to_be_visible()
    href = other_chip.get_attribute("href")
    got = marco.evaluate("url => fetch(url).then(r => r.text())", href)
    assert got == "id,title,status\n1,Fix login,open\n2,Ship files,closed\n"
    assert [r["decision"] for r in world.audit(AuditEventType.VIEW_FILE_SAVED, "save")] == [
        "allowed"
    ]


def test_a_viewers_widget_is_refused(open_page, world):
    owner = open_page("viewer")
    call_tool(owner, "files.show_files", {})
    wait_ready(owner, view_row(owner, "show_files"), timeout=30_000)
    vera = open_page("viewer", "vera")
    row = view_row(vera, "show_files")
    wait_ready(vera, row, timeout=30_000)
    app = app_frame(row)
    # Enter, not a click: the refusal's status line moves the buttons under the pointer.
    app.locator("#upload").press("Enter")
    expect(app.locator("#out-upload")).to_have_attribute("data-state", "error")
    expect(app.locator("#out-upload")).to_have_attribute("data-code", "viewer_cannot_act")
    app.locator("#save").press("Enter")
    expect(app.locator("#out-save")).to_have_attribute("data-code", "viewer_cannot_act")
    expect(vera.locator(".msg-entry", has_text="saved report.csv")).to_have_count(0)
    decided = world.audit(AuditEventType.VIEW_FILE_SAVED, "viewer")
    assert [(r["decision"], r["reason"]) for r in decided] == [("denied", "viewer_cannot_act")]
