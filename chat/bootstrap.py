"""The demo set-up `make run` creates: an admin, a demo workspace, the example servers."""

from __future__ import annotations

import os
import secrets
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction

from bindings.services.bindings import binding_create
from bindings.services.policies import tool_policy_set
from mcp_bridge.models import McpServer
from mcp_bridge.services.servers import server_add

from . import services
from .models import Workspace

ROOT = Path(__file__).resolve().parent.parent
NPM_ROOT = ROOT / "tools" / "mcp-servers" / "node_modules" / "@modelcontextprotocol"
# Published MCP Apps servers, when `tools/install-mcp-servers.sh` has installed them.
THIRD_PARTY_SERVERS = [
    ("Basic (vanilla JS)", "basic", "server-basic-vanillajs", ["--stdio"]),
    ("System monitor", "system-monitor", "server-system-monitor", ["--stdio"]),
    ("Debug", "debug", "server-debug", ["--stdio"]),
]
EXAMPLE_SERVERS = [
    ("Board", "board", "examples/board/server.py"),
    ("Media", "media", "examples/media/server.py"),
    ("Live view", "liveview", "examples/liveview/server.py"),
    ("Legacy MCP-UI", "legacy", "examples/legacy/server.py"),
    ("Files", "files", "examples/files/server.py"),
]


# The demo admin's standing approvals: harmless writes the views make (moving a card,
# switching the live view's mode). Destructive tools still ask.
STANDING_APPROVALS = {
    "board": ("move_item", "add_item"),
    "liveview": ("set_mode", "pause", "resume"),
    "legacy": ("legacy_echo",),
}


# Loopback origins reach a view only when the binding's admin list names them exactly
# (docs/sandbox.md): the live view's <img> streams from the example's local MJPEG server.
LEGACY_PAGE_PORT = os.environ.get("LEGACY_PAGE_PORT", "8766")
EXAMPLE_ENV = {
    "board": {"BOARD_STATE_FILE": str(ROOT / "var" / "board-state.json")},
    "legacy": {"LEGACY_PAGE_PORT": LEGACY_PAGE_PORT},
}
ADMIN_NAMED_DOMAINS = {
    "liveview": {
        "resourceDomains": [
            f"http://127.0.0.1:{os.environ.get('LIVEVIEW_STREAM_PORT', '8765')}",
        ]
    },
    # The legacy example's external page, on a fixed port so the binding can name it.
    "legacy": {"frameDomains": [f"http://127.0.0.1:{LEGACY_PAGE_PORT}"]},
}


WELCOME_TEXT = """Welcome to **Atrium**. The example MCP servers are bound to this workspace:

- `/tools` lists what you can run here
- `/call board.list_items` opens the team board — drag cards between columns, delete one
  to see an approval card
- `/call liveview.open_live_view` shows a live stream inside its sandboxed view
- `/call media.get_everything` returns text, an image, audio and a link

Every action a view takes is checked against its binding and written to the audit log
(staff: **Audit review** in the user menu)."""


@dataclass
class BootstrapResult:
    admin_username: str
    admin_password: str | None  # only when the admin was created by this run
    workspace: Workspace
    created_servers: list[str]


def ensure_demo(*, admin_username: str = "admin") -> BootstrapResult:
    user_model = get_user_model()
    password = None
    with transaction.atomic():
        admin = user_model.objects.filter(username=admin_username).first()
        if admin is None:
            password = secrets.token_urlsafe(12)
            admin = user_model.objects.create_superuser(
                username=admin_username, email="", password=password
            )
        workspace = Workspace.objects.filter(slug="demo").first()
        if workspace is None:
            workspace = services.workspace_create(name="Demo", owner=admin, slug="demo")
            thread = services.thread_create(workspace=workspace, title="Welcome", actor=admin)
            services.message_post_system(thread=thread, text=WELCOME_TEXT)
    created = _ensure_example_servers(workspace=workspace, actor=admin)
    return BootstrapResult(admin_username, password, workspace, created)


def _ensure_example_servers(*, workspace: Workspace, actor) -> list[str]:
    created: list[str] = []
    candidates = [
        (name, slug, sys.executable, [str(ROOT / script)]) for name, slug, script in EXAMPLE_SERVERS
    ]
    node = shutil.which("node")
    for name, slug, package, args in THIRD_PARTY_SERVERS:
        entry = NPM_ROOT / package / "dist" / "index.js"
        if node and entry.exists():
            candidates.append((name, slug, node, [str(entry), *args]))
    for name, slug, command, args in candidates:
        if McpServer.objects.filter(slug=slug).exists() or not Path(args[0]).exists():
            continue
        _register(
            name=name, slug=slug, command=command, args=args, workspace=workspace, actor=actor
        )
        created.append(slug)
    return created


def _register(
    *, name: str, slug: str, command: str, args: list[str], workspace: Workspace, actor
) -> None:

    server = server_add(
        name=name,
        slug=slug,
        transport="stdio",
        command=command,
        args=args,
        env=EXAMPLE_ENV.get(slug, {}),
        actor=actor,
    )

    binding = binding_create(
        server=server,
        workspace=workspace,
        thread=None,
        actor=actor,
        allowed_domains=ADMIN_NAMED_DOMAINS.get(slug),
    )
    for tool in STANDING_APPROVALS.get(slug, ()):
        tool_policy_set(binding=binding, tool_name=tool, approval="auto", actor=actor)
