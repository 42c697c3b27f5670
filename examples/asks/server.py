"""Asks: tools that ask the person using them something, through the client (elicitation).

    python examples/asks/server.py                                     # stdio
    python examples/asks/server.py --http --host 127.0.0.1 --port 8106 # http://127.0.0.1:8106/mcp

- ``ask_name`` — a form (MCP 2025-11-25 form mode): a name, an email address, an age (an
  integer with a default, SEP-1034), a role (an enum with titles) and a newsletter yes/no.
- ``ask_url`` — a web page to open (URL mode); when the person says they are done, the tool
  tells the client the page is finished (``notifications/elicitation/complete``).
- ``ask_model`` — asks the client's model a question (sampling; the person approves it).
- ``needs_url`` — refuses its first call with ``URLElicitationRequired`` (-32042) naming a
  page to finish; the call after that succeeds.

``ASKS_BASE_URL`` sets where the pages live (default ``https://example.com/asks``).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import warnings
from typing import Any, Final

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import NoBackChannelError, UrlElicitationRequiredError
from mcp.types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
    SamplingMessage,
    TextContent,
    ToolAnnotations,
)

DEFAULT_HTTP_PORT: Final = 8106
BASE_URL: Final = os.environ.get("ASKS_BASE_URL", "https://example.com/asks").rstrip("/")
READ_ONLY: Final = ToolAnnotations(read_only_hint=True, open_world_hint=False)

mcp = MCPServer(
    "asks",
    title="Asks",
    version="1.0.0",
    instructions="Tools that ask the person something: a form, a web page, a page first.",
)

_numbers = itertools.count(1)
_pages_required: set[str] = set()

PROFILE_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "minLength": 1, "maxLength": 80},
        "email": {"type": "string", "title": "Email", "format": "email"},
        "age": {
            "type": "integer",
            "title": "Age",
            "minimum": 0,
            "maximum": 150,
            "default": 30,
        },
        "role": {
            "type": "string",
            "title": "Role",
            "oneOf": [
                {"const": "dev", "title": "Developer"},
                {"const": "pm", "title": "Product manager"},
                {"const": "design", "title": "Designer"},
            ],
            "default": "dev",
        },
        "newsletter": {
            "type": "boolean",
            "title": "Send me the newsletter",
            "default": False,
        },
    },
    "required": ["name", "email"],
}


async def _ask(
    ctx: Context, key: str, params: ElicitRequestFormParams | ElicitRequestURLParams
) -> ElicitResult | InputRequiredResult:
    """Ask through the connection's back-channel (2025 protocol), or, where there is none
    (2026: requests travel inside the result), answer with the question and take the
    answer from the call's retry."""
    answered = (ctx.input_responses or {}).get(key)
    if isinstance(answered, ElicitResult):
        return answered
    session = ctx.request_context.session
    try:
        if isinstance(params, ElicitRequestURLParams):
            return await session.elicit_url(
                params.message, params.url, params.elicitation_id, ctx.request_id
            )
        return await session.elicit_form(params.message, params.requested_schema, ctx.request_id)
    except NoBackChannelError:
        return InputRequiredResult(input_requests={key: ElicitRequest(params=params)})


@mcp.tool(annotations=READ_ONLY)
async def ask_name(ctx: Context) -> str | InputRequiredResult:
    """Ask the person for their name, email, age, role and newsletter choice."""
    result = await _ask(
        ctx,
        "profile",
        ElicitRequestFormParams(
            message="Who are you? (Asks uses this to greet you.)",
            requested_schema=PROFILE_SCHEMA,
        ),
    )
    if isinstance(result, InputRequiredResult):
        return result
    if result.action != "accept":
        return f"No answer: the person chose {result.action}."
    content = result.content or {}
    role = {"dev": "developer", "pm": "product manager", "design": "designer"}.get(
        str(content.get("role")), "someone"
    )
    news = "with" if content.get("newsletter") else "without"
    return (
        f"Hello {content.get('name')} <{content.get('email')}>, {content.get('age')}, "
        f"{role}, {news} the newsletter."
    )


@mcp.tool(annotations=READ_ONLY)
async def ask_url(ctx: Context) -> str | InputRequiredResult:
    """Ask the person to finish something on a web page (URL mode)."""
    elicitation_id = ctx.request_state or f"asks-connect-{next(_numbers)}"
    result = await _ask(
        ctx,
        "connect",
        ElicitRequestURLParams(
            mode="url",
            message="Connect your Asks account on its web page.",
            url=f"{BASE_URL}/connect?session={elicitation_id}",
            elicitation_id=elicitation_id,
        ),
    )
    if isinstance(result, InputRequiredResult):
        result.request_state = elicitation_id
        return result
    if result.action != "accept":
        return f"Not connected: the person chose {result.action}."
    with contextlib.suppress(NoBackChannelError):  # 2026: nowhere to say it; the answer did
        await ctx.request_context.session.send_elicit_complete(
            elicitation_id, related_request_id=ctx.request_id
        )
    return "Connected: the page is finished."


@mcp.tool(annotations=READ_ONLY)
async def needs_url() -> str:
    """Refuse with URLElicitationRequired until its page was shown once, then succeed."""
    if _pages_required:
        _pages_required.clear()
        return "Set up: the page was finished, so this call works now."
    elicitation_id = f"asks-setup-{next(_numbers)}"
    _pages_required.add(elicitation_id)
    raise UrlElicitationRequiredError(
        [
            ElicitRequestURLParams(
                mode="url",
                message="Finish setting up Asks first.",
                url=f"{BASE_URL}/setup?session={elicitation_id}",
                elicitation_id=elicitation_id,
            )
        ]
    )


@mcp.tool(annotations=READ_ONLY)
async def ask_model(ctx: Context, question: str = "Say hello.") -> str | InputRequiredResult:
    """Ask the client's model a question (sampling: the person approves it first)."""
    params = CreateMessageRequestParams(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=question))],
        system_prompt="Answer in one short line.",
        max_tokens=60,
    )
    answered = (ctx.input_responses or {}).get("model")
    if not isinstance(answered, CreateMessageResult):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # sampling is deprecated in 2026 (SEP-2577)
                answered = await ctx.request_context.session.create_message(
                    params.messages,
                    max_tokens=params.max_tokens,
                    system_prompt=params.system_prompt,
                    related_request_id=ctx.request_id,
                )
        except NoBackChannelError:
            return InputRequiredResult(
                input_requests={"model": CreateMessageRequest(params=params)}
            )
    content = answered.content
    text = content.text if isinstance(content, TextContent) else "(no text)"
    return f"The model says: {text}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Asks: an MCP server that asks questions.")
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp")
    transport.add_argument("--sse", action="store_true", help="serve the legacy SSE transport")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP bind address")
    parser.add_argument("--port", type=int, default=DEFAULT_HTTP_PORT, help="HTTP port")
    args = parser.parse_args(argv)
    try:
        if args.http:
            mcp.run("streamable-http", host=args.host, port=args.port)
        elif args.sse:
            mcp.run("sse", host=args.host, port=args.port)
        else:
            mcp.run()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
