"""The thread websocket: one consumer per connection, one group per thread (DESIGN §6)."""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from audit.types import AuditEventType
from bindings.services.approvals import approval_expire_due
from chat.services.refusals import action_record_refused, socket_record_refused

from .. import actions  # noqa: F401  (importing the package registers every handler)
from ..actions.app_views import DEFERRED
from ..actions.registry import (
    HANDLERS,
    SELF_ADMITTING,
    ActionContext,
    ActionError,
    SessionEnded,
    rate_limited_error,
    refusal_record,
    take_tokens,
)
from ..actions.view_tools import socket_closed as view_tools_socket_closed
from ..calls import stops as call_stops
from ..calls.app_view import view_calls_cancel
from ..models import Membership
from ..presenters import INTERACTIVE_UI, present_event
from ..selectors import SessionPin, membership_for_session, thread_with_membership
from . import event_tail, waiters
from .events import events_after
from .frames import UNSTORABLE_REFUSED, frame_unstorable
from .groups import thread_group, user_group

log = logging.getLogger(__name__)

KNOWN_CAPABILITIES = {"interactiveToolUi"}
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404


@database_sync_to_async
def _load_thread(user: Any, thread_id: int):
    return thread_with_membership(user=user, thread_id=thread_id)


@database_sync_to_async
def _reload_membership(membership: Membership, pin: SessionPin) -> Membership | None:
    return membership_for_session(membership_id=membership.pk, pin=pin)


@database_sync_to_async
def _membership_and_events(
    membership: Membership, pin: SessionPin, thread_id: int, after: int
) -> tuple[Membership | None, list[dict[str, Any]]]:
    """A replay's one database trip: the membership (and session) first, then the events,
    none of them when the membership is gone."""
    current = membership_for_session(membership_id=membership.pk, pin=pin)
    if current is None:
        return None, []
    return current, events_after(thread_id=thread_id, after=after)


_audit_refusal = database_sync_to_async(refusal_record)

SESSION_ENDED_TEXT = (
    "Your session has ended, or you are no longer a member of this workspace; sign in again."
)
MEMBERSHIP_REMOVED_TEXT = "You no longer have access to this workspace."


@database_sync_to_async
def _audit_session_ended(ctx: ActionContext, reason: str, event_type: AuditEventType) -> None:
    action_record_refused(
        user=ctx.user,
        workspace_id=ctx.thread.workspace_id,
        thread_id=ctx.thread.pk,
        action="socket",
        reason=reason,
        event_type=event_type,
    )


@database_sync_to_async
def _audit_refused(user: Any, thread_id: int, reason: str, client: str) -> None:
    socket_record_refused(user=user, thread_id=thread_id, reason=reason, client=client)


class ThreadConsumer(AsyncJsonWebsocketConsumer):
    ctx: ActionContext | None = None
    pin: SessionPin

    async def dispatch(self, message: dict[str, Any]) -> None:
        """As channels' dispatch, without its `aclose_old_connections()` before every message.

        That is a trip to the single database thread for each frame and for every event a
        member's socket relays (it waits behind whatever database work is running). It
        checks nothing more: every database access here and in the actions goes through
        `database_sync_to_async`, which closes old connections around its own trip.
        """
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def connect(self) -> None:
        user = self.scope.get("user")
        thread_id = int(self.scope["url_route"]["kwargs"]["thread_id"])
        found = await _load_thread(user, thread_id)
        if found is None:
            # Outsiders learn nothing: the same refusal whether or not the thread exists.
            client = self.scope.get("client")
            await _audit_refused(user, thread_id, "not_a_member", str(client[0]) if client else "")
            await self.close(code=CLOSE_FORBIDDEN)
            return
        thread, membership = found
        # Overdue approvals are closed when someone looks (no scheduler is needed).
        await database_sync_to_async(approval_expire_due)(thread_id=thread.pk)
        query = parse_qs(self.scope.get("query_string", b"").decode())
        caps = {c for c in ",".join(query.get("caps", [])).split(",") if c in KNOWN_CAPABILITIES}
        session = self.scope.get("session")
        self.pin = SessionPin(
            user_id=user.pk,
            password=user.password,
            session_key=getattr(session, "session_key", None),
        )
        self.ctx = ActionContext(
            user=user,
            thread=thread,
            membership=membership,
            capabilities=caps,
            channel_name=self.channel_name,
            send=self.send_json,
            pin=self.pin,
            end_session=self._end_session_refused,
        )
        await self.channel_layer.group_add(thread_group(thread.pk), self.channel_name)
        await self.channel_layer.group_add(user_group(user.pk), self.channel_name)
        # Events other processes store after `last_seq` (the replay covers the ones before).
        event_tail.watch(thread_id=thread.pk, last_seq=thread.last_seq)
        call_stops.listen()  # stops of calls running here, asked through other processes
        await self.accept()
        await self.send_json(
            {
                "type": "hello",
                "threadId": thread.pk,
                "role": membership.role,
                "capabilities": sorted(caps),
                "lastSeq": thread.last_seq,
                # The client refuses larger requests itself (static/chat/socket.js): they never get here.
                "maxMessageBytes": settings.ATRIUM_MAX_WS_MESSAGE,
            }
        )
        after = query.get("after", [None])[0]
        if after is not None and after.isdigit():
            await self._replay(int(after))

    async def disconnect(self, code: int) -> None:
        view_calls_cancel(self.channel_name)  # its views' waiting tools/call requests end
        await view_tools_socket_closed(self.channel_name)  # its views' own tools go (issue 27)
        if self.ctx is not None:
            event_tail.unwatch(thread_id=self.ctx.thread.pk)
            await self.channel_layer.group_discard(
                thread_group(self.ctx.thread.pk), self.channel_name
            )
            await self.channel_layer.group_discard(user_group(self.ctx.user.pk), self.channel_name)

    async def session_ended(self, message: dict[str, Any]) -> None:
        """The user logged out (one session) or their account changed (all: re-check)."""
        if self.ctx is None:
            return
        ended = message.get("session_key")
        if ended is not None and ended != self.pin.session_key:
            return
        if ended is None and await _reload_membership(self.ctx.membership, self.pin):
            return  # e.g. their name changed: this session is still good
        await self._end_session("session_ended")

    async def membership_changed(self, message: dict[str, Any]) -> None:
        """The user's membership of some workspace was saved or deleted (chat.receivers):
        re-read it when it is this socket's. Gone: the socket ends now (audited), so nothing
        of the thread reaches a removed member any more. Another role: the socket takes it
        and tells the client (a demoted member's composer goes read-only; every action
        re-reads the membership anyway)."""
        if self.ctx is None or message.get("workspace_id") != self.ctx.thread.workspace_id:
            return
        membership = await _reload_membership(self.ctx.membership, self.pin)
        if self.ctx is None:
            return  # ended while the membership was read
        if membership is None:
            await self._end_session(
                "membership_removed",
                code="membership_removed",
                text=MEMBERSHIP_REMOVED_TEXT,
                event_type=AuditEventType.SOCKET_CLOSED_MEMBERSHIP_REMOVED,
            )
            return
        await self._take_membership(membership)

    async def _take_membership(self, membership: Membership) -> None:
        """Use the membership just re-read; a changed role is sent to the client."""
        assert self.ctx is not None
        previous = self.ctx.membership.role
        self.ctx.membership = membership
        if membership.role != previous:
            await self.send_json(
                {"type": "role", "role": membership.role, "canAct": membership.can_act}
            )

    async def _end_session_refused(self, rid: Any) -> None:
        """An action found the membership or session gone (before it or in its first trip)."""
        await self._end_session("not_a_member_or_session_ended", rid, "forbidden")

    async def _end_session(
        self,
        reason: str,
        rid: Any = None,
        code: str = "session_ended",
        *,
        text: str = SESSION_ENDED_TEXT,
        event_type: AuditEventType = AuditEventType.SOCKET_CLOSED_SESSION_ENDED,
    ) -> None:
        if self.ctx is None:
            return  # ended already (a view call's task and a frame may both find it)
        await _audit_session_ended(self.ctx, reason, event_type)
        if self.ctx is None:
            return  # ended by another path while the audit row was written
        await self._send_error(rid, code, text)
        ctx, self.ctx = self.ctx, None  # nothing more is handled on this socket
        event_tail.unwatch(thread_id=ctx.thread.pk)
        await self.channel_layer.group_discard(thread_group(ctx.thread.pk), self.channel_name)
        await self.channel_layer.group_discard(user_group(ctx.user.pk), self.channel_name)
        await self.close(code=CLOSE_FORBIDDEN)

    async def _replay(self, after: int, rid: Any = None) -> None:
        """Stored events after ``after`` (the ``?after=`` of a connect, or a ``replay``
        frame), only while the membership and session hold: both are read in the same trip,
        first (a removed member, or one whose session ended, gets nothing and the socket
        ends)."""
        assert self.ctx is not None
        membership, events = await _membership_and_events(
            self.ctx.membership, self.pin, self.ctx.thread.pk, after
        )
        if self.ctx is None:
            return
        if membership is None:
            await self._end_session_refused(rid)
            return
        await self._take_membership(membership)
        for event in events:
            await self.send_json({"type": "event", **present_event(event, self.ctx.capabilities)})
        done: dict[str, Any] = {"type": "replayed", "after": after, "count": len(events)}
        if rid is not None:
            done["rid"] = rid  # the `replay` frame's, when it carried one
        await self.send_json(done)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.ctx is None:
            return
        if text_data is None:
            await self._send_error(None, "binary_not_supported", "Send JSON text frames.")
            return
        if len(text_data) > settings.ATRIUM_MAX_WS_MESSAGE:
            await _audit_refusal(
                self.ctx, "websocket", "message_too_large", {"chars": len(text_data)}
            )
            await self._send_error(
                None,
                "message_too_large",
                f"Messages are limited to {settings.ATRIUM_MAX_WS_MESSAGE:,} bytes.",
            )
            return
        try:
            content = json.loads(text_data)
        except (ValueError, RecursionError):
            await _audit_refusal(self.ctx, "websocket", "invalid_json")
            await self._send_error(None, "invalid_json", "That message was not valid JSON.")
            return
        if frame_unstorable(text_data, content):
            rid = content.get("rid") if isinstance(content, dict) else None
            rid = rid if isinstance(rid, (str, int)) and not isinstance(rid, bool) else None
            await _audit_refusal(self.ctx, "websocket", "unstorable_text")
            await self._send_error(rid, "invalid_text", UNSTORABLE_REFUSED)
            return
        await self.receive_json(content)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        assert self.ctx is not None
        if not isinstance(content, dict) or not isinstance(content.get("type"), str):
            await self._send_error(None, "invalid_message", "Messages are objects with a 'type'.")
            return
        rid = content.get("rid")
        rid = rid if isinstance(rid, (str, int)) and not isinstance(rid, bool) else None
        kind = content["type"]
        if kind == "replay":
            after = content.get("after")
            if not isinstance(after, int) or isinstance(after, bool) or after < 0:
                await self._send_error(rid, "invalid_message", "'after' must be a sequence number.")
                return
            # A replay reads up to 2000 events: a client that asks in a loop is refused
            # (audited, at most once a bucket every few seconds); the socket stays open.
            verdict = await take_tokens(self.ctx, [("replay", str(self.ctx.user.pk))])
            if not verdict.allowed:
                error = rate_limited_error(verdict, "replay requests")
                await self.send_json(
                    {"type": "reply", "rid": rid, "ok": False, "error": error.to_dict()}
                )
                return
            await self._replay(after, rid)
            return
        if kind == "ping":
            await self.send_json({"type": "pong", "rid": rid})
            return
        handler = HANDLERS.get(kind)
        if handler is None:
            await _audit_refusal(self.ctx, "websocket", "unknown_type", {"type": kind[:60]})
            await self._send_error(rid, "unknown_type", f"Unknown message type '{kind[:60]}'.")
            return
        # Roles, sessions and accounts change while a socket is open: re-check them on
        # every action (the membership, the session, the user's password and active flag).
        # A handler registered with `admits_itself` does it in its own first database trip.
        if kind not in SELF_ADMITTING:
            membership = await _reload_membership(self.ctx.membership, self.pin)
            if membership is None:
                await self._end_session_refused(rid)
                return
            await self._take_membership(membership)
        try:
            result = await handler(self.ctx, content)
        except SessionEnded:
            await self._end_session_refused(rid)
            return
        except ActionError as exc:
            if not exc.audited:
                await _audit_refusal(self.ctx, kind[:60], exc.code)
            await self.send_json({"type": "reply", "rid": rid, "ok": False, "error": exc.to_dict()})
            return
        except Exception:
            log.exception("action %s failed", kind)
            await self._send_error(rid, "internal_error", "Something went wrong; nothing was lost.")
            return
        if result is DEFERRED:
            return  # the handler's task replies when its work is done
        await self.send_json({"type": "reply", "rid": rid, "ok": True, "result": result})

    async def _send_error(self, rid: Any, code: str, message: str) -> None:
        await self.send_json(
            {"type": "reply", "rid": rid, "ok": False, "error": {"code": code, "message": message}}
        )

    async def thread_event(self, message: dict[str, Any]) -> None:
        # Why no membership check per event: a removal reaches this socket as a
        # `membership.changed` message on this same channel (sent on the removal's commit,
        # chat.receivers), and a consumer handles its channel's messages one at a time, in
        # the order the layer queued them (one FIFO per channel, in memory and in Redis).
        # `membership_changed` re-reads the membership (no event is handled while it
        # waits), sets `self.ctx` to None and leaves the groups before the next message is
        # taken, so every event queued after the removal message is dropped here. The
        # events queued before it were broadcast before the removal was announced, which
        # happens as soon as it commits: they were the thread's while the person was a
        # member (a replay, and every action, re-read the membership themselves).
        if self.ctx is None:
            return
        frame = message.get("frame")
        if frame is None:  # the decoded form ({"event": {...}})
            event = message["event"]
            if event["kind"] == "toolcall":
                waiters.resolve(event["data"])
            await self.send_json({"type": "event", **present_event(event, self.ctx.capabilities)})
            return
        # The frame was encoded once for every member (chat.realtime.events.wire_message).
        call = message.get("call") or {}
        if call.get("status") in waiters.FINAL and waiters.is_waiting(call.get("id")):
            # A call finished in another process (this process's broadcast already
            # resolved its own calls): decode only when something here waits for it.
            waiters.resolve(json.loads(frame)["data"])
        if INTERACTIVE_UI in self.ctx.capabilities or message["kind"] != "toolcall":
            await self.send(text_data=frame)
            return
        event = json.loads(frame)
        event.pop("type", None)
        await self.send_json({"type": "event", **present_event(event, self.ctx.capabilities)})

    async def thread_layout(self, message: dict[str, Any]) -> None:
        """The member changed their side pane of this thread on another socket (a tab, a
        device): this page follows (chat.layout.services; nobody else is told)."""
        if self.ctx is not None and message.get("thread_id") == self.ctx.thread.pk:
            await self.send_json({"type": "layout", "layout": message["layout"]})

    async def view_message(self, message: dict[str, Any]) -> None:
        """A message for this connection only (e.g. a bridge response to one of its views)."""
        if self.ctx is None:
            return  # the socket ended (e.g. its member was removed): nothing more is sent
        await self.send_json(message["payload"])
