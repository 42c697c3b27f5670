"""Fixtures for the chat UI browser tests: one seeded web server per module, and pages
logged in through the real login form that fail the test on any CSP violation or
uncaught script error."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.live import ROOT, LiveAtrium

# Records every CSP violation in the page (init scripts are injected by the browser, so
# the page's own policy does not apply to this one).
CSP_WATCH_JS = """
(() => {
  const seen = [];
  Object.defineProperty(window, "__cspViolations", { value: seen });
  document.addEventListener("securitypolicyviolation", (e) => {
    seen.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"} (${e.sourceFile}:${e.lineNumber})`);
  }, true);
})();
"""

SEED = """
import json, sys
from pathlib import Path
from django.contrib.auth import get_user_model
from chat import services

PASSWORD = {password!r}
VAR = Path({var_dir!r})
U = get_user_model()

def person(username, first, last, staff=False):
    user = U.objects.create_user(username, password=PASSWORD, first_name=first, last_name=last)
    user.is_staff = user.is_superuser = staff
    user.save()
    return user

owner = person("olivia", "Olivia", "Park", staff=True)
member = person("marco", "Marco", "Rossi")
viewer = person("vera", "Vera", "Lind")
person("nadia", "Nadia", "Kaur")  # in no workspace
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
services.membership_set(workspace=workspace, user=member, role="member")
services.membership_set(workspace=workspace, user=viewer, role="viewer")

launch = services.thread_create(workspace=workspace, title="Launch plan", actor=owner)
for author, text in [
    (owner, "Morning! Kicking off the **Q3 launch** thread. Goals for this week:\\n\\n"
            "1. Freeze the feature list\\n2. Draft the announcement\\n3. Book the demo slot"),
    (owner, "I put the draft in `launch/announcement.md` — comments welcome."),
    (member, "Looks great. I'll take the demo slot, and I can walk through the "
             "[release checklist](https://example.com/checklist) on Thursday."),
    (member, "One question: do we ship the board app in the first wave?"),
]:
    services.message_post(thread=launch, author=author, text=text)

tools_thread = services.thread_create(workspace=workspace, title="Board sync", actor=owner)

servers = {{}}
try:
    from bindings.services.bindings import binding_create
    from bindings.services.policies import tool_policy_set
    from mcp_bridge.services.servers import server_add

    board = server_add(
        name="Board", slug="board", transport="stdio", command=sys.executable,
        args=[str(Path({root!r}) / "examples" / "board" / "server.py")],
        env={{"BOARD_STATE_FILE": str(VAR / "board.json")}},
    )
    binding = binding_create(server=board, workspace=workspace)
    for tool in ("move_item", "add_item"):
        tool_policy_set(binding=binding, tool_name=tool, approval="auto")
    media = server_add(
        name="Media", slug="media", transport="stdio", command=sys.executable,
        args=[str(Path({root!r}) / "examples" / "media" / "server.py")],
    )
    binding_create(server=media, workspace=workspace)
    servers = {{"board": board.pk, "media": media.pk}}
except Exception as exc:  # the tool tests skip when the backend cannot bind servers
    servers = {{"error": repr(exc)}}

print(json.dumps({{"launch": launch.pk, "tools": tools_thread.pk, "servers": servers}}))
"""


@dataclass
class UiWorld:
    server: LiveAtrium
    password: str
    launch_thread: int
    tools_thread: int
    servers: dict[str, Any] = field(default_factory=dict)

    @property
    def origin(self) -> str:
        return self.server.app_origin

    def thread_url(self, thread_id: int) -> str:
        return f"{self.origin}/w/acme/t/{thread_id}/"


@pytest.fixture(scope="module")
def ui_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiWorld]:
    var_dir = tmp_path_factory.mktemp("chat-ui") / "var"
    server = LiveAtrium(var_dir=var_dir).setup()
    password = "pw-" + secrets.token_urlsafe(10)
    out = server.shell(SEED.format(password=password, var_dir=str(var_dir), root=str(ROOT)))
    seeded = json.loads(out.strip().splitlines()[-1])
    server.start()
    try:
        yield UiWorld(
            server=server,
            password=password,
            launch_thread=seeded["launch"],
            tools_thread=seeded["tools"],
            servers=seeded["servers"],
        )
    finally:
        server.stop()


class PageWatch:
    """Collects CSP violations (console and DOM events) and uncaught errors of one page."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.console_csp: list[str] = []
        self.errors: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))

    def _console(self, message: Any) -> None:
        text = message.text
        if "Content Security Policy" in text or "Content-Security-Policy" in text:
            self.console_csp.append(text)

    def problems(self) -> list[str]:
        found = list(self.console_csp) + list(self.errors)
        try:
            if not self.page.is_closed():
                found += self.page.evaluate("Array.from(window.__cspViolations || [])")
        except Exception:  # a page mid-navigation cannot be asked; its console still was
            pass
        return found


# (origin, username) -> the session cookies of that person's first login through the form.
_sessions: dict[tuple[str, str], list[dict[str, Any]]] = {}


def login(page: Any, origin: str, username: str, password: str) -> None:
    """Log in through the real form, the first time per server and person; later pages of
    that person reuse the session (a login costs a password hash on the server: about a
    CPU-second each, for ~60 pages a run). A session that ended (a test logged out or
    ended it) falls back to the form."""
    saved = _sessions.get((origin, username))
    if saved:
        page.context.add_cookies(saved)
        page.goto(f"{origin}/")
        if "/login/" not in page.url:
            return
        page.context.clear_cookies()
    page.goto(f"{origin}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    with page.expect_navigation():
        page.click("button[type=submit]")
    assert "/login/" not in page.url, f"login as {username} failed"
    _sessions[(origin, username)] = [
        c for c in page.context.cookies() if c["name"] in ("sessionid", "csrftoken")
    ]


OpenAs = Callable[..., Any]


@pytest.fixture
def open_as(browser: Any, ui_world: UiWorld) -> Iterator[OpenAs]:
    """open_as("olivia", color_scheme="light") → a logged-in Playwright page in its own
    browser context. Every page is checked for CSP violations and script errors."""
    contexts: list[Any] = []
    watches: list[PageWatch] = []

    def open_page(
        username: str | None,
        *,
        color_scheme: str = "light",
        viewport: tuple[int, int] = (1280, 820),
    ) -> Any:
        context = browser.new_context(
            viewport={"width": viewport[0], "height": viewport[1]},
            color_scheme=color_scheme,
            device_scale_factor=1,
        )
        context.add_init_script(CSP_WATCH_JS)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(15_000)
        watches.append(PageWatch(page))
        if username:
            login(page, ui_world.origin, username, ui_world.password)
        return page

    yield open_page
    problems = [p for watch in watches for p in watch.problems()]
    for context in contexts:
        context.close()
    assert not problems, "CSP violations or script errors:\n" + "\n".join(problems)


def wait_live(page: Any) -> None:
    page.wait_for_selector("#conn-indicator[data-state=live]")


def shot(page: Any, directory: Path, name: str) -> Path:
    path = directory / f"{name}.png"
    page.screenshot(path=str(path))
    return path
