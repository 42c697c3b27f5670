"""Slash commands, and the hand-off to the agent loop after a user message."""

from __future__ import annotations

import json
import re
import shlex
from typing import TYPE_CHECKING

from channels.db import database_sync_to_async

from bindings.selectors import offered_tools
from bindings.services.catalogues import thread_catalogues_ensure
from mcp_bridge.uimeta import unstorable

from .. import services
from ..agent import start_turn
from ..markdown import code_span, escape_markdown
from ..server_context import flows
from .tools import call_tool_as_user

if TYPE_CHECKING:
    from ..models import Message
    from .registry import ActionContext

HELP_TEXT = """**Commands**

- `/help` — this list
- `/tools` — the tools available in this thread
- `/call server.tool {"arg": "value"}` — run a tool with JSON arguments
- `/prompt server.prompt key=value …` — post a server's prompt (quote values with spaces)

Anything else is a message to the team (and to the assistant, when one is configured)."""

_CALL_RE = re.compile(r"^/call\s+([a-z0-9_-]+)\.(\S+)\s*(.*)$", re.DOTALL | re.IGNORECASE)


def parse_call(text: str) -> tuple[str, str, object]:
    """`/call server.tool {json}` → (server slug, tool name, arguments). Raises ValueError."""
    match = _CALL_RE.match(text.strip())
    if not match:
        raise ValueError('Usage: `/call server.tool {"arg": "value"}`')
    server, tool, raw = match.group(1), match.group(2), match.group(3).strip()
    if not raw:
        return server, tool, {}
    try:
        arguments = json.loads(raw)
    except ValueError as exc:
        raise ValueError(
            f"The arguments are not valid JSON: {exc.msg} (column {exc.colno})."
        ) from exc
    if not isinstance(arguments, dict):
        raise ValueError('The arguments must be a JSON object, like {"id": 3}.')
    if unstorable(arguments):  # typed as "\\u0000": no database stores it
        raise ValueError(
            "The arguments may not contain U+0000 or an unpaired surrogate (\\ud800–\\udfff)."
        )
    return server, tool, arguments


_PROMPT_RE = re.compile(r"^/prompt\s+([a-z0-9_-]+)\.(\S+)\s*(.*)$", re.DOTALL | re.IGNORECASE)


def parse_prompt(text: str) -> tuple[str, str, dict[str, str]]:
    """`/prompt server.name key=value key2="two words"` → (server, prompt, arguments)."""
    match = _PROMPT_RE.match(text.strip())
    if not match:
        raise ValueError("Usage: `/prompt server.prompt key=value …`")
    try:
        words = shlex.split(match.group(3))
    except ValueError as exc:
        raise ValueError(f"The arguments could not be read: {exc}.") from exc
    arguments: dict[str, str] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise ValueError(f"Write each argument as key=value ({code_span(word[:40])} is not).")
        arguments[key] = value
    return match.group(1), match.group(2), arguments


async def _prompt(ctx: ActionContext, text: str) -> str | None:
    """Post the prompt (None), or the reason it was not posted."""
    try:
        server, name, arguments = parse_prompt(text)
        await flows.prompt_use(
            thread=ctx.thread,
            user=ctx.user,
            can_act=ctx.can_act,
            server_slug=server,
            name=name,
            arguments=arguments,
        )
    except ValueError as exc:
        return str(exc)
    except flows.ContextRefused as exc:
        return escape_markdown(exc.message)
    await start_turn(thread=ctx.thread, user=ctx.user, role=ctx.membership.role)
    return None


def _tools_text(ctx: ActionContext) -> str:
    tools = offered_tools(thread=ctx.thread, role=ctx.membership.role)
    if not tools:
        return "No tools are available in this thread. An admin can bind an MCP server to it."
    lines = ["**Tools in this thread**", ""]
    for offered in sorted(tools, key=lambda t: (t.tool.server.slug, t.tool.name)):
        tool = offered.tool
        ui = " · has a view" if tool.resource_uri else ""
        risk = "" if offered.risk == "read" else f" · {offered.risk}"
        summary = (tool.description or tool.title or "").strip().splitlines()
        # Server-supplied names and descriptions are shown as text, never as Markdown.
        lines.append(
            f"- {code_span(f'{tool.server.slug}.{tool.name}')}{ui}{risk}"
            + (f" — {escape_markdown(summary[0][:140])}" if summary else "")
        )
    return "\n".join(lines)


async def dispatch_command(ctx: ActionContext, message: Message) -> bool:
    """Run a slash command; returns False when the message is not a command."""

    text = message.text.strip()
    if not text.startswith("/"):
        return False
    command = text.split(maxsplit=1)[0].lower()
    if command == "/help":
        reply = HELP_TEXT
    elif command == "/tools":
        await thread_catalogues_ensure(thread=ctx.thread)
        reply = await database_sync_to_async(_tools_text)(ctx)
    elif command == "/prompt":
        refusal = await _prompt(ctx, text)
        if refusal is None:
            return True
        reply = refusal
    elif command == "/call":
        try:
            server, tool, arguments = parse_call(text)
        except ValueError as exc:
            reply = str(exc)
        else:
            await call_tool_as_user(ctx, server, tool, arguments, message=message)
            return True
    else:
        reply = f"Unknown command {code_span(command[:40])}. Try `/help`."
    await database_sync_to_async(services.message_post_system)(thread=ctx.thread, text=reply)
    return True
