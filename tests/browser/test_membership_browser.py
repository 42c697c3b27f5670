"""Issue 23, F1, where a person sees it: real Chromium against a real web server.

An owner demotes a member in the Django admin: the member's open thread page goes
read-only at once (role badge, composer). The owner then removes two members: each of
their open pages says plainly that they no longer have access to this workspace, in place
of the composer (screenshots, light and dark), and their socket is closed for good. A
member whose account is deactivated is told their session ended, with a way to sign in.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.helpers_ui import CSP_WATCH_JS, PageWatch, login
from tests.live import LiveAtrium

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SEED = """
import json
from django.contrib.auth import get_user_model
from chat import services

User = get_user_model()
owner = User.objects.create_user("olivia", password={password!r}, first_name="Olivia",
                                 is_staff=True, is_superuser=True)
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
ids = {{}}
for name in ("marco", "mina"):
    user = User.objects.create_user(name, password={password!r}, first_name=name.title())
    ids[name] = services.membership_set(workspace=workspace, user=user, role="member").pk
sam = User.objects.create_user("sam", password={password!r}, first_name="Sam")
services.membership_set(workspace=workspace, user=sam, role="member")
ids["sam_user"] = sam.pk
thread = services.thread_create(workspace=workspace, title="Launch plan", actor=owner)
services.message_post(thread=thread, author=owner, text="The launch moves to Thursday.")
print(json.dumps({{"thread": thread.pk, "memberships": ids}}))
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    server = LiveAtrium(var_dir=tmp_path_factory.mktemp("membership") / "var").setup()
    password = "pw-" + secrets.token_urlsafe(10)
    out = json.loads(server.shell(SEED.format(password=password)).strip().splitlines()[-1])
    server.start()
    try:
        yield {"server": server, "password": password, **out}
    finally:
        server.stop()


@pytest.fixture
def page_for(browser, world) -> Iterator[Any]:
    contexts, watches = [], []

    def open_page(username: str, path: str, color_scheme: str = "light") -> Any:
        context = browser.new_context(
            viewport={"width": 1200, "height": 760}, color_scheme=color_scheme
        )
        context.add_init_script(CSP_WATCH_JS)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(30_000)
        watches.append(PageWatch(page))
        origin = world["server"].app_origin
        login(page, origin, username, world["password"])
        page.goto(f"{origin}{path}")
        return page

    yield open_page
    problems = [p for w in watches for p in w.problems()]
    for context in contexts:
        context.close()
    assert not problems, problems


def _thread_page(page_for, world, username: str, scheme: str = "light") -> Any:
    page = page_for(username, f"/w/acme/t/{world['thread']}/", scheme)
    expect(page.locator("#conn-indicator")).to_have_attribute("data-state", "live")
    return page


def test_a_demoted_then_removed_member_sees_it_on_their_open_page(page_for, world, screenshots):
    marco = _thread_page(page_for, world, "marco", "light")
    mina = _thread_page(page_for, world, "mina", "dark")
    expect(marco.locator("#composer-input")).to_be_enabled()
    admin = page_for("olivia", "/admin/")

    # Demoted in the admin: marco's open page goes read-only without a reload.
    admin.goto(
        f"{world['server'].app_origin}/admin/chat/membership/"
        f"{world['memberships']['marco']}/change/"
    )
    admin.select_option("select[name=role]", "viewer")
    with admin.expect_navigation():
        admin.click("input[name=_save]")
    expect(marco.locator("#role-badge")).to_have_text("Viewer")
    expect(marco.locator(".user-role")).to_have_text("Viewer")
    expect(marco.locator("#composer-input")).to_be_disabled()
    expect(marco.locator("#composer-input")).to_have_attribute(
        "placeholder", "You have view-only access"
    )
    expect(marco.locator("#conn-indicator")).to_have_attribute("data-state", "live")

    # Removed in the admin: both open pages say so, in place of the composer.
    for name in ("marco", "mina"):
        admin.goto(
            f"{world['server'].app_origin}/admin/chat/membership/"
            f"{world['memberships'][name]}/delete/"
        )
        with admin.expect_navigation():
            admin.click("#content form input[type=submit]")
    for page, scheme in ((marco, "light"), (mina, "dark")):
        notice = page.locator("#access-ended")
        expect(notice).to_be_visible()
        expect(notice).to_have_attribute("role", "alert")
        expect(notice.locator(".access-ended-title")).to_have_text(
            "You no longer have access to this workspace"
        )
        expect(notice).to_contain_text("You were removed from Acme.")
        expect(notice.locator("a")).to_have_attribute("href", "/")
        expect(page.locator(".user-role")).to_have_text("No access")
        expect(page.locator("#composer")).to_be_hidden()
        expect(page.locator("#composer-input")).to_be_disabled()
        expect(page.locator("#conn-indicator")).to_have_attribute("data-state", "ended")
        # A notice, not a raw error: no error toast, no red "offline" banner.
        expect(page.locator("#reconnect-banner")).to_be_hidden()
        expect(page.locator("#toasts .toast-error")).to_have_count(0)
        # What they read before stays; the socket is closed for good (no reconnecting).
        expect(page.locator("#messages")).to_contain_text("The launch moves to Thursday.")
        assert page.evaluate("window.AtriumClient.connected") is False
        page.screenshot(path=str(screenshots / f"membership-removed-{scheme}.png"))

    out = world["server"].shell(
        "from audit.models import AuditEvent\n"
        "print(AuditEvent.objects.filter(event_type=103).count(),"
        " AuditEvent.objects.filter(event_type=107).count())"
    )
    assert out.strip().splitlines()[-1] == "2 2"


def test_a_deactivated_member_is_told_their_session_ended(page_for, world, screenshots):
    sam = _thread_page(page_for, world, "sam")
    admin = page_for("olivia", "/admin/")
    admin.goto(
        f"{world['server'].app_origin}/admin/auth/user/{world['memberships']['sam_user']}/change/"
    )
    admin.uncheck("#id_is_active")
    with admin.expect_navigation():
        admin.click("input[name=_save]")
    notice = sam.locator("#access-ended")
    expect(notice).to_be_visible()
    expect(notice).to_have_attribute("data-reason", "session_ended")
    expect(notice.locator(".access-ended-title")).to_have_text("Your session has ended")
    expect(notice.locator("a")).to_have_text("Sign in again")
    expect(sam.locator("#composer")).to_be_hidden()
    expect(sam.locator("#toasts .toast-error")).to_have_count(0)
    expect(sam.locator("#conn-indicator")).to_have_attribute("data-state", "ended")
    sam.screenshot(path=str(screenshots / "session-ended-light.png"))
