"""Prompts, resources and the server log in real Chromium (issue 25; docs/mcp-client.md).

The server is the published ``@modelcontextprotocol/server-everything`` over stdio, bound to
the workspace; the model is the fake OpenAI-compatible server (tests/chat/fake_llm.py), so
what the model was sent is read from its recorded requests.

- The prompt picker lists the server's prompts; "Team Management" asks for its arguments
  with the server's completions (the second narrowed by the first) and posts the prompt as
  the member's message, labelled with it; the model answers.
- The resource picker lists resources and templates; a template's variable is filled in,
  the resource waits as a chip, the next message carries it, and the model's request holds
  the resource's text.
- The server's log lines (its subscribe acknowledgement) are in the admin's server log.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.helpers_ui import login
from tests.chat.fake_llm import FakeLLM, openai_text
from tests.fixtures import third_party
from tests.live import LiveAtrium

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not third_party.installed(), reason=third_party.SKIP_REASON),
]

SHOTS = "/work/notes/shots"

SEED = """
import json
from django.contrib.auth import get_user_model
from chat import services
from bindings.services.bindings import binding_create
from mcp_bridge.services.servers import server_add

U = get_user_model()
owner = U.objects.create_user("olivia", password={password!r}, first_name="Olivia", last_name="Park")
U.objects.create_superuser("root", password={password!r})
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
workspace.provider = "openai"
workspace.model = "fake-model"
workspace.provider_base_url = {llm_url!r}
workspace.provider_api_key = "sk-test-prompts"
workspace.save()
thread = services.thread_create(workspace=workspace, title="Context", actor=owner)
server = server_add(
    name="Everything", slug="everything", transport="stdio", command={command!r}, args={args!r},
)
binding_create(server=server, workspace=workspace)
print(json.dumps({{"thread": thread.pk}}))
"""


@dataclass
class World:
    server: LiveAtrium
    llm: FakeLLM
    password: str
    thread: int

    @property
    def thread_url(self) -> str:
        return f"{self.server.app_origin}/w/acme/t/{self.thread}/"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("context")
    llm = FakeLLM("openai").start()
    server = LiveAtrium(var_dir=base / "var").setup()
    password = "pw-" + secrets.token_urlsafe(10)
    command, *args = third_party.SERVERS["everything"].command("stdio")
    seeded = json.loads(
        server.shell(
            SEED.format(password=password, llm_url=llm.base_url, command=command, args=args)
        )
        .strip()
        .splitlines()[-1]
    )
    server.start()
    try:
        yield World(server, llm, password, seeded["thread"])
    finally:
        server.stop()
        llm.stop()


def _page(browser: Any, world: World, scheme: str, user: str = "olivia") -> Any:
    context = browser.new_context(
        viewport={"width": 1100, "height": 820}, color_scheme=scheme, device_scale_factor=1
    )
    page = context.new_page()
    page.set_default_timeout(30_000)
    login(page, world.server.app_origin, user, world.password)
    return page


def _open_thread(page: Any, world: World) -> None:
    page.goto(world.thread_url)
    page.wait_for_selector("#conn-indicator[data-state=live]")


def _user_texts(world: World) -> str:
    return "\n".join(
        str(m.get("content"))
        for r in world.llm.requests
        for m in r.body.get("messages", [])
        if m.get("role") == "user"
    )


def test_prompt_posted_via_picker(browser: Any, world: World) -> None:
    world.llm.push(openai_text("Eve it is."))
    page = _page(browser, world, "light")
    _open_thread(page, world)
    page.click("#prompt-picker-btn")
    picker = page.locator("#prompt-picker")
    expect(picker.locator(".picker-item", has_text="Team Management")).to_be_visible()
    picker.locator(".picker-item", has_text="Team Management").click()

    department = picker.locator("input[name=department]")
    department.click()
    department.fill("S")
    expect(picker.locator(".context-hint", has_text="Sales")).to_be_visible()
    expect(picker.locator(".context-hint", has_text="Support")).to_be_visible()
    picker.locator(".context-hint", has_text="Sales").click()
    picker.locator("input[name=name]").click()
    expect(picker.locator(".context-hint", has_text="Eve")).to_be_visible()  # narrowed by Sales
    picker.locator(".context-hint", has_text="Eve").click()
    page.screenshot(path=f"{SHOTS}/prompts-picker-light.png")
    picker.locator("button[type=submit]").click()

    posted = page.locator(
        ".msg-entry", has_text="Please promote Eve to the head of the Sales team."
    )
    expect(posted).to_be_visible()
    expect(posted.locator(".prompt-tag")).to_have_text("prompt everything.completable-prompt")
    expect(page.locator(".msg-entry.role-assistant", has_text="Eve it is.")).to_be_visible()
    assert "Please promote Eve to the head of the Sales team." in _user_texts(world)
    page.context.close()


def test_resource_attached_seen_by_model_and_log_in_admin(browser: Any, world: World) -> None:
    world.llm.push(openai_text("It is resource 5."))
    page = _page(browser, world, "light")
    _open_thread(page, world)
    page.click("#resource-picker-btn")
    picker = page.locator("#resource-picker")
    expect(picker.locator(".picker-item", has_text="features.md")).to_be_visible()
    picker.locator(".picker-item", has_text="Dynamic Text Resource").click()
    field = picker.locator("input[name=resourceId]")
    field.fill("5")
    expect(picker.locator(".context-hint", has_text="5")).to_be_visible()  # the server agrees
    picker.locator("button[type=submit]").click()
    chip = page.locator(".resource-chips .resource-chip")
    expect(chip).to_contain_text("Dynamic Text Resource")
    page.fill("#composer-input", "What does it say?")
    page.screenshot(path=f"{SHOTS}/prompts-resource-chip-light.png")
    page.keyboard.press("Enter")

    message = page.locator(".msg-entry", has_text="What does it say?")
    attached = message.locator(".msg-resources .resource-chip")
    expect(attached).to_contain_text("Dynamic Text Resource")
    expect(attached).to_contain_text("Everything · text/plain")
    expect(page.locator(".msg-entry.role-assistant", has_text="It is resource 5.")).to_be_visible()
    assert "Resource 5: This is a plaintext resource" in _user_texts(world)
    message.screenshot(path=f"{SHOTS}/prompts-resource-attached-light.png")
    page.context.close()

    dark = _page(browser, world, "dark")
    _open_thread(dark, world)
    dark.locator(".msg-entry", has_text="What does it say?").screenshot(
        path=f"{SHOTS}/prompts-resource-attached-dark.png"
    )
    dark.click("#prompt-picker-btn")
    expect(dark.locator("#prompt-picker .picker-item", has_text="Team Management")).to_be_visible()
    dark.locator("#prompt-picker .picker-item", has_text="Team Management").click()
    dark.locator("#prompt-picker input[name=department]").fill("")
    dark.locator("#prompt-picker input[name=department]").click()
    expect(dark.locator("#prompt-picker .context-hint", has_text="Engineering")).to_be_visible()
    dark.screenshot(path=f"{SHOTS}/prompts-picker-dark.png")
    dark.context.close()

    # Attaching subscribed to the resource; the server acknowledged it in its log.
    admin = _page(browser, world, "light", user="root")
    admin.goto(f"{world.server.app_origin}/admin/mcp_bridge/serverlogentry/?q=Subscribe")
    expect(admin.locator("#result_list")).to_contain_text("Received Subscribe Resource request")
    expect(admin.locator("#result_list")).to_contain_text("info")
    admin.screenshot(path=f"{SHOTS}/prompts-server-log-admin.png")
    admin.context.close()
