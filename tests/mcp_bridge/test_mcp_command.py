"""`manage.py mcp …` end to end, and the Django path (`mcp_bridge.gateway`) under failure.

Real servers only: the published ``server-everything`` (every content type it produces),
our ``examples/board`` (an MCP App) and ``examples/media`` (audio, which ``everything``
does not produce), ``raw_stdio.py`` (content a host must refuse) and ``faulty.py``
(crashes and hangs).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import shlex
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditEvent
from mcp_bridge import gateway
from mcp_bridge.errors import InvalidResource, ServerCrashed, ToolTimeout
from mcp_bridge.models import McpServer, Tool, UiResource
from mcp_bridge.services.servers import server_add, spec_for
from mcp_bridge.services.ui_resources import ui_resource_store
from tests.fixtures import third_party
from tests.waiting import apoll

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "mcp_servers"
PYTHON = shlex.quote(sys.executable)
needs_node_servers = pytest.mark.skipif(not third_party.installed(), reason=third_party.SKIP_REASON)


@dataclass
class Output:
    out: str
    err: str


def mcp(*args: str) -> Output:
    out, err = StringIO(), StringIO()
    call_command("mcp", *args, stdout=out, stderr=err)
    return Output(out.getvalue(), err.getvalue())


def sh(command_line: str) -> Output:
    """``mcp`` with its arguments written as on a shell command line."""
    return mcp(*shlex.split(command_line))


def add_stdio(name: str, command: str) -> None:
    mcp("add", name, "--stdio", command)


def call_json(server: str, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    output = mcp("call", server, tool, "--args", json.dumps(arguments or {}), "--json")
    return json.loads(output.out)


def part_types(result: dict[str, Any]) -> list[str]:
    return [part["type"] for part in result["parts"]]


def decoded_data_uri(src: str, mime: str) -> bytes:
    prefix = f"data:{mime};base64,"
    assert src.startswith(prefix)
    return base64.b64decode(src[len(prefix) :])


# ---- add / import / list ---------------------------------------------------------------


def test_add_stores_secrets_and_list_never_prints_them(monkeypatch: pytest.MonkeyPatch) -> None:
    sh(
        "add Files --stdio \"node server.js --root '/srv/my files'\""
        " --env API_TOKEN=env-s3cret --env 'FROM_ENV=${ATRIUM_MCP_FILES_TOKEN}'"
    )
    sh(
        "add remote --url"
        " 'https://alice:url-s3cret@mcp.example.com/mcp?api_key=query-s3cret&region=eu'"
        " --header 'Authorization=Bearer header-s3cret' --timeout 5"
    )
    added = sh("add old-sse --url http://127.0.0.1:9/sse --sse --header X-Key=sse-s3cret")
    assert added.out == "Added 'old-sse' (sse).\n"

    files = McpServer.objects.get(slug="files")
    assert (files.transport, files.command) == ("stdio", "node")
    assert files.args == ["server.js", "--root", "/srv/my files"]
    assert files.env == {"API_TOKEN": "env-s3cret", "FROM_ENV": "${ATRIUM_MCP_FILES_TOKEN}"}
    remote = McpServer.objects.get(slug="remote")
    assert remote.transport == "streamable_http" and remote.call_timeout == 5
    assert remote.headers == {"Authorization": "Bearer header-s3cret"}
    assert McpServer.objects.get(slug="old-sse").headers == {"X-Key": "sse-s3cret"}
    # `${NAME}` is resolved from our environment when connecting, never stored resolved.
    monkeypatch.setenv("ATRIUM_MCP_FILES_TOKEN", "resolved")
    assert spec_for(files).env["FROM_ENV"] == "resolved"

    listing = mcp("list").out
    lines = listing.splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["files", "stdio"],
        ["old-sse", "sse"],
        ["remote", "streamable_http"],
    ]
    assert all("never connected" in line for line in lines)
    assert "https://mcp.example.com/mcp?api_key=***&region=eu" in listing
    audit = json.dumps(list(AuditEvent.objects.values_list("extra", flat=True)))
    assert '"env_keys": ["API_TOKEN", "FROM_ENV"]' in audit
    for secret in ("env-s3cret", "url-s3cret", "query-s3cret", "header-s3cret", "sse-s3cret"):
        assert secret not in listing
        assert secret not in audit


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["dup", "--stdio", "x"], "already exists"),
        (["a", "--stdio", ""], "--stdio needs a command"),
        (["a", "--stdio", "node 'unclosed"], "Cannot parse the --stdio command"),
        (["a", "--stdio", "node", "--header", "K=V"], "apply to --url servers only"),
        (["a", "--url", "https://x.example/mcp", "--env", "K=V"], "--env applies to --stdio"),
        (["a", "--url", "ftp://x.example/mcp"], "needs an http(s) URL"),
        (["a", "--stdio", "node", "--timeout", "0"], "must be a positive number"),
        (["a", "--stdio", "node", "--env", "TOKEN:hunter2"], "Expected KEY=VALUE"),
    ],
)
def test_add_rejects_bad_input(args: list[str], message: str) -> None:
    mcp("add", "dup", "--stdio", "node")
    with pytest.raises(CommandError) as caught:
        mcp("add", *args)
    assert message in str(caught.value)
    assert "hunter2" not in str(caught.value)
    assert McpServer.objects.count() == 1


def test_import_adds_good_entries_and_reports_bad_ones(tmp_path: Path) -> None:
    mcp("add", "taken", "--stdio", "node")
    config = {
        "mcpServers": {
            "fs": {"command": "npx", "args": ["-y", "fs-server", 8080], "env": {"TOKEN": "t"}},
            "hosted": {"url": "https://mcp.example.com/mcp", "headers": {"X-Key": "k"}},
            "legacy": {"type": "sse", "url": "https://mcp.example.com/sse"},
            "not-an-object": ["npx"],
            "no-command": {"args": ["x"]},
            "bad-url": {"url": "ftp://example.com"},
            "url-not-text": {"url": 42},
            "args-not-list": {"command": "npx", "args": "-y fs-server"},
            "env-not-object": {"command": "npx", "env": ["TOKEN=t"]},
            "taken": {"command": "node"},
        }
    }
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps(config))
    out, err = StringIO(), StringIO()
    # The good entries are imported; the command still fails, so a script notices.
    with pytest.raises(CommandError, match="6 of 10 entries were skipped"):
        call_command("mcp", "import", str(path), stdout=out, stderr=err)

    assert out.getvalue().splitlines() == [
        "Added 'fs'.",
        "Added 'hosted'.",
        "Added 'legacy'.",
        "Unchanged 'taken'.",  # the same settings as the file: nothing to do
    ]
    skipped = dict(line.split(": ", 1) for line in err.getvalue().splitlines())
    assert skipped == {
        "Skipped 'not-an-object'": "Not an object.",
        "Skipped 'no-command'": "It has neither a 'command' nor a 'url'.",
        "Skipped 'bad-url'": "An HTTP or SSE server needs an http(s) URL.",
        "Skipped 'url-not-text'": "'url' is not a string.",
        "Skipped 'args-not-list'": "'args' is not a list of strings.",
        "Skipped 'env-not-object'": "'env' is not an object.",
    }
    fs = McpServer.objects.get(slug="fs")
    assert (fs.command, fs.args, fs.env) == ("npx", ["-y", "fs-server", "8080"], {"TOKEN": "t"})
    assert McpServer.objects.get(slug="hosted").headers == {"X-Key": "k"}
    assert McpServer.objects.get(slug="legacy").transport == "sse"

    path.write_text("{not json")
    with pytest.raises(CommandError, match="Cannot read"):
        mcp("import", str(path))
    path.write_text('{"servers": {}}')
    with pytest.raises(CommandError, match="no 'mcpServers' object"):
        mcp("import", str(path))


def test_misconfigured_row_is_a_clear_error() -> None:
    add_stdio("broken", "node")
    McpServer.objects.filter(slug="broken").update(call_timeout=0)  # say, edited in the admin
    with pytest.raises(CommandError, match="misconfigured: Timeouts must be positive"):
        mcp("call", "broken", "anything")
    with pytest.raises(CommandError, match="No server named 'missing'"):
        mcp("tools", "missing")


# ---- the board example: tools, resource, structured content and result _meta ----------------


def test_board_tools_resource_and_call() -> None:
    add_stdio("board", f"{PYTHON} {shlex.quote(str(REPO / 'examples' / 'board' / 'server.py'))}")

    tools = {tool["name"]: tool for tool in json.loads(mcp("tools", "board", "--json").out)}
    assert set(tools) == {"add_item", "delete_item", "list_items", "move_item", "refresh"}
    listing = tools["list_items"]
    assert listing["resourceUri"] == "ui://board/app"
    assert listing["visibility"] == ["model", "app"]
    assert listing["annotations"]["readOnlyHint"] is True
    assert tools["move_item"]["visibility"] == ["app"]  # only the view may drag items
    assert tools["delete_item"]["annotations"]["destructiveHint"] is True
    assert tools["add_item"]["inputSchema"]["required"] == ["title"]

    resource = json.loads(mcp("resource", "board", "ui://board/app", "--json").out)
    stored = UiResource.objects.get(server__slug="board", uri="ui://board/app")
    assert resource == {
        "uri": "ui://board/app",
        "mimeType": "text/html;profile=mcp-app",
        "flavor": "mcp-app",
        "contentHash": hashlib.sha256(stored.text.encode()).hexdigest(),
        "size": len(stored.text.encode()),
        "meta": {"csp": {}, "permissions": [], "domain": None, "prefersBorder": True},
    }
    assert "<html" in stored.text.lower()

    result = call_json("board", "list_items")
    assert part_types(result) == ["text"]
    assert set(result["structured"]) >= {"columns", "version"}
    # Result _meta goes to the UI only, as uiMeta.
    assert {"board/version", "board/renderedAt"} <= set(result["uiMeta"])
    assert result["meta"] == {
        "toolName": "list_items",
        "toolCallId": "cli",
        "server": "board",
        "success": True,
        "isError": False,
    }


# ---- every content type of server-everything ---------------------------------------------


@pytest.fixture
def everything() -> str:
    add_stdio("everything", shlex.join(third_party.SERVERS["everything"].command("stdio")))
    return "everything"


@needs_node_servers
def test_everything_tools(everything: str) -> None:
    tools = {tool["name"]: tool for tool in json.loads(mcp("tools", everything, "--json").out)}
    assert {"echo", "get-tiny-image", "get-resource-links", "get-structured-content"} <= set(tools)
    assert all(tool["resourceUri"] is None for tool in tools.values())  # no MCP Apps here
    assert tools["get-sum"]["inputSchema"]["properties"]["a"]["type"] == "number"
    assert tools["echo"]["visibility"] == ["model", "app"]


@needs_node_servers
def test_everything_text(everything: str) -> None:
    result = call_json(everything, "echo", {"message": "hi"})
    assert result == {
        "parts": [{"type": "text", "text": "Echo: hi"}],
        "structured": None,
        "resources": [],
        "meta": {
            "toolName": "echo",
            "toolCallId": "cli",
            "server": "everything",
            "success": True,
            "isError": False,
        },
        "uiMeta": None,
    }


@needs_node_servers
def test_everything_image(everything: str) -> None:
    result = call_json(everything, "get-tiny-image")
    assert part_types(result) == ["text", "image", "text"]
    image = result["parts"][1]
    png = decoded_data_uri(image["src"], "image/png")
    assert png.startswith(b"\x89PNG") and image["size"] == len(png)
    assert result["resources"] == [
        {
            "uri": None,
            "kind": "image",
            "mimeType": "image/png",
            "size": len(png),
            "status": "inline",
        }
    ]


@needs_node_servers
def test_everything_annotated_content(everything: str) -> None:
    error = call_json(
        everything, "get-annotated-message", {"messageType": "error", "includeImage": True}
    )
    text, image = error["parts"]
    # Annotated for both user and assistant: no restriction is kept.
    assert text == {"type": "text", "text": "Error: Operation failed"}
    assert image["type"] == "image" and image["audience"] == ["user"]
    debug = call_json(everything, "get-annotated-message", {"messageType": "debug"})
    assert debug["parts"][0]["audience"] == ["assistant"]


@needs_node_servers
def test_everything_resource_links(everything: str) -> None:
    result = call_json(everything, "get-resource-links", {"count": 3})
    assert part_types(result) == ["text", "link", "link", "link"]
    for part in result["parts"][1:]:
        assert part["uri"].startswith("demo://resource/dynamic/")
        assert part["mimeType"] == "text/plain" and part["name"]
        assert part["clickable"] is False  # only http(s) links are clickable


@needs_node_servers
def test_everything_embedded_text_resource(everything: str) -> None:
    result = call_json(
        everything, "get-resource-reference", {"resourceType": "Text", "resourceId": 1}
    )
    embedded = result["parts"][1]
    assert embedded["type"] == "text"
    assert embedded["uri"] == "demo://resource/dynamic/text/1"
    assert embedded["mimeType"] == "text/plain"
    assert embedded["text"].startswith("Resource 1: This is a plaintext resource")


@needs_node_servers
def test_everything_embedded_blob_resources(everything: str) -> None:
    blob = call_json(
        everything, "get-resource-reference", {"resourceType": "Blob", "resourceId": 2}
    )
    part = blob["parts"][1]
    assert (part["type"], part["mediaKind"], part["mimeType"]) == ("file", "binary", "text/plain")
    saved = Path(part["asset"]["path"])  # the CLI saves files instead of inlining them
    assert saved.read_bytes().startswith(b"Resource 2: This is a base64 blob")
    assert part["size"] == saved.stat().st_size and part["asset"]["status"] == "saved"
    assert saved.parent.stat().st_mode & 0o077 == 0  # a private folder

    data_uri = "data:text/plain;base64," + base64.b64encode(b"hello world").decode()
    gz = call_json(
        everything,
        "gzip-file-as-resource",
        {"name": "hello.txt.gz", "data": data_uri, "outputType": "resource"},
    )
    (part,) = gz["parts"]
    assert (part["type"], part["mimeType"], part["filename"]) == (
        "file",
        "application/gzip",
        "hello.txt.gz",
    )
    assert gzip.decompress(Path(part["asset"]["path"]).read_bytes()) == b"hello world"

    link = call_json(
        everything,
        "gzip-file-as-resource",
        {"name": "x.gz", "data": data_uri, "outputType": "resourceLink"},
    )
    assert link["parts"][0]["type"] == "link"
    assert link["parts"][0]["mimeType"] == "application/gzip"


@needs_node_servers
def test_everything_structured_content(everything: str) -> None:
    result = call_json(everything, "get-structured-content", {"location": "Chicago"})
    assert part_types(result) == ["text"]
    assert result["structured"] == json.loads(result["parts"][0]["text"])
    assert set(result["structured"]) == {"temperature", "conditions", "humidity"}


@needs_node_servers
def test_everything_errors(everything: str) -> None:
    # A tool that answers with an error result: a canonical result flagged as an error.
    result = call_json(everything, "simulate-research-query", {"topic": "cats"})
    assert result["meta"]["isError"] is True and result["meta"]["success"] is False
    assert "task augmentation" in result["parts"][0]["text"]
    # Arguments failing the tool's input schema never reach the server.
    with pytest.raises(CommandError, match="not valid"):
        mcp("call", everything, "get-sum", "--args", '{"a": "x"}')
    with pytest.raises(CommandError, match="does not exist"):
        mcp("call", everything, "no-such-tool")
    with pytest.raises(CommandError, match="--args is not valid JSON"):
        mcp("call", everything, "echo", "--args", "{message")


def test_audio_from_the_media_example() -> None:
    """server-everything produces no audio; the media example does."""
    add_stdio("media", f"{PYTHON} {shlex.quote(str(REPO / 'examples' / 'media' / 'server.py'))}")
    result = call_json("media", "get_audio", {"seconds": 0.2})
    assert part_types(result) == ["text", "file"]
    audio = result["parts"][1]
    assert (audio["mediaKind"], audio["mimeType"]) == ("audio", "audio/wav")
    wav = decoded_data_uri(audio["src"], "audio/wav")  # small audio plays inline
    assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE" and audio["size"] == len(wav)
    assert result["resources"][0]["kind"] == "audio"


def test_hostile_content_becomes_error_parts() -> None:
    add_stdio("raw", f"{PYTHON} {shlex.quote(str(FIXTURES / 'raw_stdio.py'))}")
    result = call_json("raw", "hostile_content")
    assert part_types(result) == ["text", "error", "error", "error", "link"]
    codes = [part["code"] for part in result["parts"] if part["type"] == "error"]
    assert codes == ["invalid_base64", "unsupported_mime", "missing_data"]
    link = result["parts"][-1]
    assert link["uri"] == "javascript:alert(1)" and link["clickable"] is False
    # Listed like any link (nothing fetched), and never made clickable.
    assert result["resources"] == [
        {"uri": "javascript:alert(1)", "kind": "link", "mimeType": None, "status": "external"}
    ]
    assert result["meta"]["success"] is True  # the tool succeeded; its bad parts are marked


# ---- the Django path: gateway + services under failure ---------------------------------------


@pytest.fixture
def faulty(tmp_path: Path) -> McpServer:
    return server_add(
        name="faulty",
        transport="stdio",
        command=sys.executable,
        args=[str(FIXTURES / "faulty.py")],
        env={"FAULTY_LOG": str(tmp_path / "faulty.jsonl")},
        call_timeout=15,
    )


@pytest.fixture
async def connections() -> AsyncIterator[None]:
    try:
        yield
    finally:
        await gateway.close_all()  # this test's loop's manager: stops its processes


async def eventually(check: Callable[[], Any], *, timeout: float = 5.0) -> Any:
    # Polled: what is checked (a process's state, a server's log file) sends no event.
    return await apoll(check, timeout=timeout, interval=0.02, reason="a server's process state")


async def call(server: McpServer, name: str, arguments: dict[str, Any] | None = None) -> str:
    tool = await gateway.tool_for(server, name)
    raw, _latency = await gateway.call_tool(server, tool, arguments or {})
    return "".join(block.get("text", "") for block in raw["content"])


async def fresh(server: McpServer) -> McpServer:
    return await McpServer.objects.aget(pk=server.pk)


async def test_gateway_reconnects_after_the_process_is_killed(
    faulty: McpServer, connections: None
) -> None:
    first = int(await call(faulty, "pid"))
    row = await fresh(faulty)
    assert row.last_seen is not None and row.last_error == ""  # the catalogue refresh
    assert await Tool.objects.filter(server=faulty, present=True).acount() == 23

    os.kill(first, signal.SIGKILL)
    spec = spec_for(faulty)
    await eventually(lambda: gateway.manager().health(spec)["state"] == "disconnected")
    second = int(await call(faulty, "pid"))
    assert second != first


async def test_gateway_crash_during_a_call(faulty: McpServer, connections: None) -> None:
    first = int(await call(faulty, "pid"))
    with pytest.raises(ServerCrashed) as caught:
        await call(faulty, "crash")
    assert caught.value.details["tool"] == "crash"
    row = await fresh(faulty)
    assert "stopped while handling the request" in row.last_error
    assert row.last_seen is not None
    # The connection recovers on the next call.
    assert int(await call(faulty, "pid")) != first


async def test_gateway_hung_tool_times_out_and_connection_stays(
    faulty: McpServer, connections: None
) -> None:
    await McpServer.objects.filter(pk=faulty.pk).aupdate(call_timeout=0.5)
    server = await fresh(faulty)
    pid = int(await call(server, "pid"))
    started = time.monotonic()
    with pytest.raises(ToolTimeout) as caught:
        await call(server, "hang", {"tag": "gateway"})
    assert time.monotonic() - started < 3
    assert caught.value.details["timeoutSeconds"] == 0.5
    assert int(await call(server, "pid")) == pid  # same process, still usable
    assert (await fresh(server)).last_error == ""  # a slow tool is not a sick server


# ---- smaller fixes ---------------------------------------------------------------------------


def test_blocking_bridge_is_shared_and_survives_with_blocks() -> None:
    bridge = gateway.blocking_bridge()
    try:
        with bridge:
            pass
        with gateway.blocking_bridge() as again:
            assert again is bridge
        assert bridge.manager is not None  # still running: other threads may be using it
    finally:
        bridge.stop()  # an explicit stop does end it (the next use starts a new one)


def test_non_html_ui_resource_is_rejected_with_its_uri() -> None:
    server = server_add(name="s", transport="stdio", command="node")
    read = {"contents": [{"uri": "ui://s/view", "mimeType": "text/plain", "text": "hello"}]}
    with pytest.raises(InvalidResource) as caught:
        ui_resource_store(server=server, uri="ui://s/view", read_result=read)
    assert caught.value.details["uri"] == "ui://s/view"
    assert str(caught.value) == (
        "The UI resource ui://s/view has mime type 'text/plain', not an HTML app type."
    )
