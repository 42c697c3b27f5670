"""The text channel (`manage.py chat`) as a real subprocess on a file database, against the
real `board` example and (for model turns) the fake OpenAI-compatible server."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.chat.fake_llm import FakeLLM, openai_text
from tests.live import PYTHON, ROOT, LiveAtrium
from tests.waiting import OutputWatch, wait_for_exit

pytestmark = [pytest.mark.slow]

SETUP = """
import json, sys
from django.contrib.auth import get_user_model
from chat import services
from bindings.services.bindings import binding_create
from bindings.services.policies import tool_policy_set
from mcp_bridge.services.servers import server_add
U = get_user_model()
owner = U.objects.create_user("olivia", password="pw-olivia-123456")
member = U.objects.create_user("marco", password="pw-marco-1234567")
viewer = U.objects.create_user("vera", password="pw-vera-12345678")
ws = services.workspace_create(name="Acme", owner=owner)
ws.provider = "openai"; ws.model = "fake-model"; ws.provider_base_url = {base_url!r}
ws.save()
services.membership_set(workspace=ws, user=member, role="member")
services.membership_set(workspace=ws, user=viewer, role="viewer")
server = server_add(
    name="Board", slug="board", transport="stdio", command=sys.executable,
    args=[{board!r}], env={{"BOARD_STATE_FILE": {state!r}}},
)
binding = binding_create(server=server, workspace=ws)
tool_policy_set(binding=binding, tool_name="add_item", approval="auto")
threads = {{}}
for name in ("session", "viewer", "live"):
    t = services.thread_create(workspace=ws, title=f"{{name}} thread", actor=owner)
    services.message_post(thread=t, author=owner, text=f"Hello from the web ({{name}})")
    threads[name] = t.pk
print(json.dumps(threads))
"""


@pytest.fixture(scope="module")
def llm():
    with FakeLLM("openai") as fake:
        yield fake


@pytest.fixture(scope="module")
def live(tmp_path_factory, llm):
    var = tmp_path_factory.mktemp("text-channel")
    atrium = LiveAtrium(var_dir=var / "var").setup()
    out = atrium.shell(
        SETUP.format(
            base_url=llm.base_url,
            board=str(ROOT / "examples" / "board" / "server.py"),
            state=str(var / "board.json"),
        )
    )
    atrium.threads = json.loads(out.strip().splitlines()[-1])
    yield atrium
    atrium.stop()


def _chat(live: LiveAtrium, thread_id: int, user: str, lines: list[str]) -> str:
    return live.manage(
        "chat", "acme", str(thread_id), "--user", user, input="".join(f"{line}\n" for line in lines)
    )


def test_session_prints_history_runs_tools_and_posts(live, llm):
    llm.push(openai_text("Hello ", "from the model."))
    thread = live.threads["session"]
    out = _chat(
        live,
        thread,
        "olivia",
        [
            "/tools",
            "/call board.list_items {}",
            '/call board.add_item {"title": "Ship the text channel"}',
            "/call board.move_item {nope",
            '/call board.delete_item {"id": "ATR-102"}',
            "/approve 1",
            "a NUL \x00 cannot be stored",
            "A plain message from the terminal",
        ],
    )
    assert "olivia: Hello from the web (session)" in out  # history
    assert "board.list_items" in out and "board.delete_item [destructive]" in out
    assert "board.move_item" not in out.split("/call board.move_item")[0]  # app-only: not listed
    # Tool results as their text fallback, printed when done.
    assert "[tool board.list_items · success · by user (olivia)]" in out
    assert "Team board: 7 items" in out and "[ATR-101] Draft the Q3 onboarding checklist" in out
    assert "Added ATR-108" in out
    assert "not valid JSON" in out
    # A person's own call is consent: the destructive call runs without asking, so there is
    # no approval #1 to give.
    assert "needs approval" not in out
    assert "[tool board.delete_item · success" in out and "Deleted ATR-102" in out
    assert "That approval request is not in this thread." in out
    # Text no database can store is refused with a clear line, and the session goes on.
    assert "Text may not contain U+0000" in out
    # The plain message ran a model turn whose answer is printed before the session ends.
    assert "Assistant: Hello from the model." in out
    request = llm.requests[-1].body
    assert request["messages"][-1] == {
        "role": "user",
        "content": "A plain message from the terminal",
    }
    stored = live.shell(
        "from chat.models import Message; "
        f"print([m.text for m in Message.objects.filter(thread_id={thread}, author__username='olivia')])"
    )
    assert "A plain message from the terminal" in stored
    assert "cannot be stored" not in stored


def test_viewer_reads_but_cannot_post(live):
    thread = live.threads["viewer"]
    out = _chat(live, thread, "vera", ["hi there", "/call board.list_items"])
    assert "olivia: Hello from the web (viewer)" in out
    assert "Viewers can read this thread but not post in it." in out
    assert "Viewers can read this thread but not run tools." in out
    stored = live.shell(
        f"from chat.models import Message; print(Message.objects.filter(thread_id={thread}).count())"
    )
    assert stored.strip().splitlines()[-1] == "1"


def test_live_updates_from_others_are_printed(live):
    thread = live.threads["live"]
    process = subprocess.Popen(
        [PYTHON, "manage.py", "chat", "acme", str(thread), "--user", "olivia"],
        cwd=ROOT,
        env=live.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    output = OutputWatch(process)  # each printed line is an event

    try:
        output.wait_for(re.escape("/quit to leave"), timeout=30)
        live.shell(
            "from django.contrib.auth import get_user_model; from chat import services; "
            "from chat.models import Thread; "
            f"services.message_post(thread=Thread.objects.get(pk={thread}), "
            "author=get_user_model().objects.get(username='marco'), text='Hi from the web')"
        )
        output.wait_for("marco: Hi from the web", timeout=15)
        process.stdin.write(b"/quit\n")
        process.stdin.flush()
        assert wait_for_exit(process, timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        print(process.stderr.read().decode(errors="replace"), file=sys.stderr)
