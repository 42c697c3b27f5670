"""The text channel: a terminal client of one thread, on the same services as the web.

    python manage.py chat WORKSPACE_SLUG THREAD_ID [--user USERNAME]

Prints the thread (tool results as their text fallback), then reads lines from stdin:
plain text posts a message (and runs a model turn when the workspace has a provider),
``/call server.tool {json}`` runs a tool through the same path as the web, ``/tools``
lists the thread's tools, ``/approve N`` / ``/reject N`` decide an approval, ``/quit``
leaves. What others do in the thread shows up as it happens (stored events are polled).
Without ``--user`` the client acts as the thread's creator.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from bindings.models import ApprovalRequest
from bindings.selectors import offered_tools
from bindings.services.catalogues import thread_catalogues_ensure
from bindings.services.errors import BindingError
from mcp_bridge import gateway
from mcp_bridge.models import McpServer
from mcp_bridge.normalize import text_fallback

from ... import agent, services
from ...actions.commands import parse_call
from ...calls import approvals
from ...calls.requests import CallRequest
from ...calls.run import tool_call_start
from ...models import Membership, Role, Thread, ToolCall, ToolCallStatus
from ...realtime import waiters
from ...realtime.events import events_after
from ...selectors import thread_snapshot

POLL_INTERVAL = 0.5
HELP = """Commands:
  /tools                          the tools available in this thread
  /call server.tool {"a": 1}      run a tool with JSON arguments
  /approve N   /reject N          decide approval request N
  /help                           this list
  /quit                           leave (also Ctrl-D)
Anything else is a message to the thread."""


def _who(payload: dict[str, Any] | None, label: str = "") -> str:
    if payload:
        return str(payload.get("name") or "someone")
    return label or "Atrium"


def format_message(data: dict[str, Any]) -> str:
    who = _who(data.get("author"), data.get("authorLabel") or "")
    if data.get("author") and data.get("authorLabel"):
        who = f"{who} ({data['authorLabel']})"
    status = " [error]" if data.get("status") == "error" else ""
    return f"{who}{status}: {data.get('text', '')}"


def format_tool_call(data: dict[str, Any]) -> str:
    server = (data.get("server") or {}).get("slug", "?")
    head = f"[tool {server}.{data.get('tool')} · {data.get('status')} · by {data.get('origin')}"
    if data.get("requestedBy"):
        head += f" ({_who(data['requestedBy'])})"
    head += "]"
    status = data.get("status")
    if status == ToolCallStatus.AWAITING_APPROVAL:
        approval = data.get("approval") or {}
        return (
            f"{head} needs approval #{approval.get('id')} ({approval.get('risk')}), arguments "
            f"{data.get('arguments')}: /approve {approval.get('id')} or /reject {approval.get('id')}"
        )
    if data.get("result"):
        body = text_fallback(data["result"])
    elif data.get("error"):
        body = str((data["error"] or {}).get("message") or data["error"])
    else:
        body = ""
    return head + ("\n" + _indent(body) if body else "")


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())


@dataclass
class Session:
    command: BaseCommand
    thread: Thread
    user: Any
    role: str
    printed: set[tuple[str, int, str]] = field(default_factory=set)
    last_seq: int = 0
    own_calls: set[int] = field(default_factory=set)
    poll_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    # ----------------------------------------------------------------------- output

    def say(self, text: str) -> None:
        self.command.stdout.write(text)
        self.command.stdout.flush()

    def show(self, kind: str, data: dict[str, Any]) -> None:
        """Print a message or tool call once per final state."""
        if kind == "message":
            if data.get("status") == "streaming":
                return
            key = ("message", data["id"], "final")
            if key in self.printed:
                return
            self.printed.add(key)
            mine = (
                data.get("role") == "user" and (data.get("author") or {}).get("id") == self.user.pk
            )
            if not mine or data.get("authorLabel"):
                self.say(format_message(data))
        elif kind == "toolcall":
            status = data.get("status", "")
            if status not in waiters.FINAL and status != ToolCallStatus.AWAITING_APPROVAL:
                return
            key = ("toolcall", data["id"], status)
            if key in self.printed:
                return
            self.printed.add(key)
            self.say(format_tool_call(data))

    # ------------------------------------------------------------------------ loop

    async def run(self) -> None:
        snapshot = await database_sync_to_async(self._snapshot)()
        workspace = self.thread.workspace
        self.say(
            f"# {self.thread.title} — {workspace.name} · you are "
            f"{self.user.get_username()} ({self.role})"
        )
        rows: list[tuple[str, int, str, dict[str, Any]]] = [
            (m["createdAt"], 0, "message", m) for m in snapshot["messages"]
        ] + [(c["createdAt"], 1, "toolcall", c) for c in snapshot["toolCalls"]]
        for _, _, kind, data in sorted(rows, key=lambda r: (r[0], r[1], r[3]["id"])):
            if kind == "message" and data.get("status") != "streaming":
                self.printed.add(("message", data["id"], "final"))
                self.say(format_message(data))
            elif kind == "toolcall":
                self.show("toolcall", data)
        self.last_seq = snapshot["lastSeq"]
        if self.role == Role.VIEWER:
            self.say("(You are a viewer: you can read this thread but not post in it.)")
        self.say("— type a message, /help for commands, /quit to leave —")

        queue: asyncio.Queue[str | None] = asyncio.Queue()
        _start_reader(asyncio.get_running_loop(), queue)
        poller = asyncio.get_running_loop().create_task(self._poll_forever())
        try:
            while True:
                line = await queue.get()
                if line is None:
                    break
                line = line.strip()
                if not line:
                    continue
                if line.split()[0].lower() in ("/quit", "/exit"):
                    break
                await self.handle(line)
            await self._settle()
        finally:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
            await gateway.close_all()

    def _snapshot(self) -> dict[str, Any]:
        self.thread = Thread.objects.select_related("workspace").get(pk=self.thread.pk)
        return thread_snapshot(thread=self.thread)

    async def _poll_forever(self) -> None:
        while True:
            await asyncio.sleep(POLL_INTERVAL)
            try:
                await self.poll()
            except Exception as exc:  # a transient database error must not end the session
                self.say(f"(could not read new events: {exc})")

    async def poll(self) -> None:
        async with self.poll_lock:
            events = await database_sync_to_async(events_after)(
                thread_id=self.thread.pk, after=self.last_seq
            )
            for event in events:
                self.last_seq = max(self.last_seq, event["seq"])
                self.show(event["kind"], event["data"])

    async def _settle(self) -> None:
        """Before leaving: let this process's turn and calls finish, print what they did."""
        if agent.turn_running(self.thread.pk):
            self.say("(waiting for the assistant to finish — Ctrl-C to leave now)")
            await agent.wait_idle(self.thread.pk)
        running = await database_sync_to_async(self._running_own_calls)()
        for call in running:
            await agent.wait_for_call(call)
        await self.poll()

    def _running_own_calls(self) -> list[ToolCall]:
        return list(ToolCall.objects.filter(pk__in=self.own_calls, status=ToolCallStatus.RUNNING))

    # -------------------------------------------------------------------- commands

    async def handle(self, line: str) -> None:
        command = line.split(maxsplit=1)[0].lower() if line.startswith("/") else ""
        if command == "/help":
            self.say(HELP)
        elif command == "/tools":
            await self.list_tools()
        elif command == "/call":
            await self.call(line)
        elif command in ("/approve", "/reject"):
            await self.decide(line, approve=command == "/approve")
        elif command:
            self.say(f"Unknown command {command[:40]}. Try /help.")
        else:
            await self.post(line)

    async def post(self, text: str) -> None:
        try:
            await database_sync_to_async(services.message_post)(
                thread=self.thread, author=self.user, text=text
            )
        except services.ChatError as exc:
            self.say(exc.message)
            return
        await agent.start_turn(thread=self.thread, user=self.user, role=self.role)

    async def list_tools(self) -> None:
        await thread_catalogues_ensure(thread=self.thread)
        tools = await database_sync_to_async(offered_tools)(thread=self.thread, role=self.role)
        if not tools:
            self.say("No tools are available in this thread.")
            return
        lines = ["Tools in this thread:"]
        for offered in sorted(tools, key=lambda t: (t.tool.server.slug, t.tool.name)):
            tool = offered.tool
            summary = (tool.description or tool.title or "").strip().splitlines()
            risk = "" if offered.risk == "read" else f" [{offered.risk}]"
            ui = " [view]" if tool.resource_uri else ""
            lines.append(
                f"  {tool.server.slug}.{tool.name}{risk}{ui}"
                + (f" — {summary[0][:120]}" if summary else "")
            )
        self.say("\n".join(lines))

    async def call(self, line: str) -> None:
        if self.role not in (Role.OWNER, Role.MEMBER):
            self.say("Viewers can read this thread but not run tools.")
            return
        try:
            slug, tool_name, arguments = parse_call(line)
        except ValueError as exc:
            self.say(str(exc).replace("`", ""))
            return
        server = await database_sync_to_async(
            McpServer.objects.filter(slug=slug, enabled=True).first
        )()
        if server is None:
            self.say(f"There is no enabled server named '{slug}'.")
            return
        try:
            message = await database_sync_to_async(services.message_post)(
                thread=self.thread, author=self.user, text=line
            )
        except services.ChatError as exc:
            self.say(exc.message)
            return
        call = await tool_call_start(
            CallRequest(
                thread=self.thread,
                server=server,
                tool_name=tool_name,
                arguments=arguments if isinstance(arguments, dict) else {},
                origin="user",
                user=self.user,
                role=self.role,
                message=message,
            )
        )
        self.own_calls.add(call.pk)
        if call.status == ToolCallStatus.RUNNING:
            await agent.wait_for_call(call)
        await self.poll()

    async def decide(self, line: str, *, approve: bool) -> None:
        parts = line.split()
        if len(parts) != 2 or not parts[1].lstrip("#").isdigit():
            self.say("Usage: /approve N or /reject N (N: the approval number).")
            return
        approval_id = int(parts[1].lstrip("#"))

        exists = await database_sync_to_async(
            ApprovalRequest.objects.filter(pk=approval_id, thread_id=self.thread.pk).exists
        )()
        if not exists:
            self.say("That approval request is not in this thread.")
            return
        try:
            call = await approvals.approval_decide(
                approval_id=approval_id, decider=self.user, role=self.role, approve=approve
            )
        except BindingError as exc:
            self.say(exc.message)
            return
        if call.status == ToolCallStatus.RUNNING:
            self.own_calls.add(call.pk)
            await agent.wait_for_call(call)
        await self.poll()


def _start_reader(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
    """Read stdin in a daemon thread (a blocked read never keeps the process alive)."""

    def put(item: str | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: we are leaving anyway
            loop.call_soon_threadsafe(queue.put_nowait, item)

    def read() -> None:
        try:
            for line in sys.stdin:
                put(line)
        finally:
            put(None)

    threading.Thread(target=read, name="chat-stdin", daemon=True).start()


class Command(BaseCommand):
    help = "Chat in a thread from the terminal (the text channel)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("workspace", help="workspace slug")
        parser.add_argument("thread", type=int, help="thread id")
        parser.add_argument("--user", help="act as this user (default: the thread's creator)")

    def handle(self, *args: Any, **options: Any) -> None:
        thread = (
            Thread.objects.select_related("workspace", "created_by")
            .filter(pk=options["thread"], workspace__slug=options["workspace"])
            .first()
        )
        if thread is None:
            raise CommandError(
                f"No thread {options['thread']} in a workspace named '{options['workspace']}'."
            )
        if options.get("user"):
            user = get_user_model().objects.filter(username=options["user"]).first()
            if user is None:
                raise CommandError(f"There is no user named '{options['user']}'.")
        else:
            user = thread.created_by
            if user is None:
                raise CommandError("This thread has no creator: name a user with --user.")
        membership = Membership.objects.filter(workspace=thread.workspace, user=user).first()
        if membership is None:
            raise CommandError(f"{user.get_username()} is not a member of this workspace.")
        session = Session(command=self, thread=thread, user=user, role=membership.role)
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(session.run())
