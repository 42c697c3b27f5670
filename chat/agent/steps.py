"""One model request's stream turned into stored events: the assistant message and its
coalesced text deltas, the tool calls' partial arguments (and the call rows of tools with
a view, opened as their arguments begin), and the message's end (complete, error or
stopped)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async

from bindings.selectors import OfferedTool
from mcp_bridge import gateway
from mcp_bridge.errors import BridgeError
from mcp_bridge.uimeta import json_safe, unstorable

from ..calls.cancel import tool_call_cancel
from ..calls.input import tool_call_open_input, tool_call_record_input
from ..models import MessageStatus
from ..partial_json import repair_partial_json
from ..providers.base import (
    Finish,
    ProviderError,
    ProviderEvent,
    TextDelta,
    ToolCallComplete,
    ToolCallDelta,
    ToolCallStart,
)
from ..services import turn_lease, turns

log = logging.getLogger(__name__)

FLUSH_INTERVAL = 0.05  # seconds between stored text deltas of one message
FLUSH_CHARS = 200  # …or as soon as this much text is waiting

# Who stopped a thread's turn (set by ``turns.cancel_turn``; read by the turn's clean-up as
# it unwinds, here and in ``tools``).
_stopped_by: dict[int, int | None] = {}


def _turn_stopper(thread_id: int) -> int | None:
    return _stopped_by.get(thread_id)


async def _notice(
    thread_id: int,
    text: str,
    user_id: int | None,
    reason: str,
    status: str = MessageStatus.COMPLETE,
) -> None:
    await database_sync_to_async(turns.message_post_notice)(
        thread_id=thread_id, text=text, status=status, actor_user_id=user_id, reason=reason
    )


@dataclass
class _Partial:
    index: int
    id: str
    name: str
    arguments: str = ""
    sent: Any = None
    dirty: bool = False
    call_id: int | None = None  # the row opened for its view while it streams


class _StepOutput:
    """One model request's stream turned into stored events at a sane rate."""

    def __init__(
        self,
        *,
        thread_id: int,
        user_id: int | None,
        by_wire_name: dict[str, OfferedTool],
        supersede_after: int | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.supersede_after = supersede_after
        self.user_id = user_id
        self.by_wire_name = by_wire_name
        self.message_id: int | None = None
        self.text = ""
        self.pending = ""
        self.partials: dict[int, _Partial] = {}
        self.completed: list[ToolCallComplete] = []
        self.call_rows: dict[int, int] = {}  # stream index → call row opened while streaming
        self.finish: Finish | None = None
        self.lock = asyncio.Lock()

    async def consume(self, stream: AsyncIterator[ProviderEvent], *, step: int) -> bool:
        """Read the whole stream; False when the turn must end (an error was posted)."""
        ticker = asyncio.get_running_loop().create_task(self._tick())
        try:
            async with contextlib.aclosing(stream):  # type: ignore[type-var]
                async for event in stream:
                    await self._on_event(event)
        except (turn_lease.LeaseLost, turn_lease.Superseded):
            # Another process took the thread over (this turn writes nothing more), or a
            # newer message arrived before any output (the turn restarts: run_turn).
            with contextlib.suppress(Exception):
                await self._stop_ticker(ticker)
            raise
        except ProviderError as exc:
            await self._stop_ticker(ticker)
            await self.abandon_rows(self.call_rows.values())
            await self.fail(exc.message, reason=f"provider_error:{exc.code}")
            return False
        except asyncio.CancelledError:
            await self._stop_ticker(ticker)
            with contextlib.suppress(Exception):
                await asyncio.shield(self.abandon_rows(self.call_rows.values()))
            with contextlib.suppress(Exception):
                await asyncio.shield(self.fail("(The answer was stopped.)", reason="cancelled"))
            raise
        except Exception:
            log.exception("reading the model's stream failed (thread %s)", self.thread_id)
            await self._stop_ticker(ticker)
            await self.abandon_rows(self.call_rows.values())
            await self.fail("The assistant's answer could not be read.", reason="internal_error")
            return False
        await self._stop_ticker(ticker)
        await self.flush()
        usage = self.finish.usage if self.finish else {}
        extra = {
            "step": step,
            "finish": self.finish.reason if self.finish else None,
            "usage": usage,
            "tool_calls": len(self.completed),
        }
        if self.message_id is not None:
            await database_sync_to_async(turns.message_finish_assistant)(
                message_id=self.message_id,
                text=self.text,
                actor_user_id=self.user_id,
                reason="ok",
                extra=extra,
            )
        elif not self.completed:
            await _notice(
                self.thread_id,
                "(The model returned an empty answer.)",
                self.user_id,
                "empty_answer",
                status=MessageStatus.ERROR,
            )
        return True

    async def _stop_ticker(self, ticker: asyncio.Task[None]) -> None:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_INTERVAL)
            await self.flush()

    async def _on_event(self, event: ProviderEvent) -> None:
        if isinstance(event, TextDelta):
            await self._ensure_message()
            self.pending += event.text
            if len(self.pending) >= FLUSH_CHARS:
                await self.flush()
        elif isinstance(event, ToolCallStart):
            await self._ensure_message()
            partial = _Partial(index=event.index, id=event.id, name=event.name)
            self.partials[event.index] = partial
            await self._open_row(partial)
        elif isinstance(event, ToolCallDelta):
            growing = self.partials.get(event.index)
            if growing is not None:
                growing.arguments += event.fragment
                growing.dirty = True
        elif isinstance(event, ToolCallComplete):
            await self._ensure_message()
            self.completed.append(event)
            self.partials.pop(event.index, None)
        elif isinstance(event, Finish):
            self.finish = event

    async def _ensure_message(self) -> None:
        if self.message_id is not None:
            return
        async with self.lock:
            if self.message_id is None:
                message = await database_sync_to_async(turns.message_create_assistant)(
                    thread_id=self.thread_id, supersede_after=self.supersede_after
                )
                self.message_id = message.pk

    async def flush(self) -> None:
        async with self.lock:
            if self.message_id is None:
                return
            if self.pending:
                delta, self.pending = self.pending, ""
                self.text += delta
                await database_sync_to_async(turns.message_append_text)(
                    message_id=self.message_id,
                    thread_id=self.thread_id,
                    text=self.text,
                    delta=delta,
                )
            for partial in list(self.partials.values()):
                if partial.dirty:
                    await self._send_partial(partial)

    async def _open_row(self, partial: _Partial) -> None:
        """A tool with a view gets its call row (and so its view) as its arguments begin."""
        offered = self.by_wire_name.get(partial.name)
        if offered is None or not offered.tool.resource_uri:
            return
        server = offered.tool.server
        try:
            resource = await gateway.ui_resource(server, offered.tool.resource_uri, refresh=False)
        except BridgeError as exc:
            log.info("no view for %s while it streams: %s", offered.tool.name, exc)
            return
        call = await database_sync_to_async(tool_call_open_input)(
            thread_id=self.thread_id,
            server=server,
            tool_name=offered.tool.name,
            message_id=self.message_id,
            provider_call_id=partial.id,
            user_id=self.user_id,
            ui_resource=resource,
            binding_id=offered.binding.pk,
        )
        partial.call_id = call.pk
        self.call_rows[partial.index] = call.pk

    async def abandon_rows(self, call_ids: Any, *, reason: str = "") -> None:
        """Calls whose arguments never completed (or that will not run) end cancelled."""
        stopper = _turn_stopper(self.thread_id)
        for call_id in list(call_ids):
            await database_sync_to_async(tool_call_cancel)(
                call_id=call_id,
                actor_user_id=stopper,
                reason=reason or ("turn_cancelled" if stopper is not None else "input_abandoned"),
            )

    async def _send_partial(self, partial: _Partial) -> None:
        partial.dirty = False
        offered = self.by_wire_name.get(partial.name)
        if offered is None:
            return  # a tool the model invented: nothing to preview
        arguments = repair_partial_json(partial.arguments)
        if arguments is not None and unstorable(arguments):
            # Only a preview: the complete arguments are refused (``_parse_arguments``).
            arguments, _ = json_safe(arguments)
        if arguments is None or arguments == partial.sent:
            return
        partial.sent = arguments
        payload = {
            "id": partial.call_id,
            "messageId": self.message_id,
            "providerCallId": partial.id,
            "index": partial.index,
            "server": offered.tool.server.slug,
            "tool": offered.tool.name,
            "arguments": arguments,
        }
        if partial.call_id is not None and isinstance(arguments, dict):
            await database_sync_to_async(tool_call_record_input)(
                call_id=partial.call_id,
                thread_id=self.thread_id,
                arguments=arguments,
                payload=payload,
            )
            return
        await database_sync_to_async(turns.tool_call_emit_input_partial)(
            thread_id=self.thread_id, payload=payload
        )

    async def fail(self, text: str, *, reason: str) -> None:
        """Close the step with an error message (keeping any text already streamed)."""
        async with self.lock:
            self.text += self.pending
            self.pending = ""
            if self.message_id is None:
                await _notice(
                    self.thread_id, text, self.user_id, reason, status=MessageStatus.ERROR
                )
                return
            final = f"{self.text}\n\n{text}" if self.text else text
            await database_sync_to_async(turns.message_finish_assistant)(
                message_id=self.message_id,
                text=final,
                status=MessageStatus.ERROR,
                actor_user_id=self.user_id,
                reason=reason,
            )
