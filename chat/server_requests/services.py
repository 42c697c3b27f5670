"""Server requests to a person: open, answer, expire, complete; sampling allowances.

Every change is audited in its transaction and emitted as a ``serverrequest`` thread event on
commit; the answer's wire result goes to the waiting handler (``waiting.deliver``), never
into a stored row or event (a form's values are not kept: only its field names).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from django.db import transaction
from django.utils import timezone

from audit.types import AuditEventType, Decision
from audit.writer import record
from chat.models import Membership, ToolCall
from chat.realtime.events import emit

from . import waiting
from .models import SamplingAllowance, ServerRequest, ServerRequestKind, ServerRequestStatus
from .presenters import serialize_server_request, url_domain
from .schema import Problem, SchemaRefused, answer_check, form_fields

EVENT_KIND = "serverrequest"
MAX_PENDING_PER_THREAD = 10  # DESIGN invariant 13: what a server can cause is bounded
MAX_PARAMS_BYTES = 64 * 1024
URL_SCHEMES = ("https", "http")

Answer = Literal["accept", "decline", "cancel"]
_STATUS_FOR: dict[str, str] = {
    "accept": ServerRequestStatus.ACCEPTED,
    "decline": ServerRequestStatus.DECLINED,
    "cancel": ServerRequestStatus.CANCELLED,
}


class ServerRequestRefused(Exception):
    """A request or an answer that is not accepted (``code``; ``message`` for people).
    ``problems``: what is wrong with a form's answer."""

    def __init__(self, code: str, message: str, problems: list[Problem] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.problems = problems or []


@dataclass(frozen=True, kw_only=True)
class Opened:
    row: ServerRequest
    allowance_id: int | None = None  # sampling allowed in the thread: no card to answer


def _strip_meta(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_meta(v) for k, v in value.items() if k != "_meta"}
    if isinstance(value, list):
        return [_strip_meta(v) for v in value]
    return value


def _sanitised(kind: str, params: dict[str, Any]) -> dict[str, Any]:
    kept = _strip_meta(params) if kind == ServerRequestKind.SAMPLING else dict(params)
    if kind != ServerRequestKind.SAMPLING:
        kept.pop("_meta", None)
    if len(json.dumps(kept, default=str)) > MAX_PARAMS_BYTES:
        raise ServerRequestRefused("too_large", "The request is too large to show.")
    return kept


def _emit(row: ServerRequest) -> None:
    emit(thread_id=row.thread_id, kind=EVENT_KIND, payload=serialize_server_request(row))


def _audit(
    row: ServerRequest,
    event_type: AuditEventType,
    decision: Decision,
    *,
    user_id: int | None = None,
    reason: str = "",
    extra: dict[str, Any] | None = None,
) -> None:
    record(
        event_type=event_type,
        decision=decision,
        actor_kind="user" if user_id else "system",
        actor_user_id=user_id,
        workspace_id=row.workspace_id,
        thread_id=row.thread_id,
        server_id=row.server_id,
        binding_id=row.tool_call.binding_id if row.tool_call is not None else None,
        tool_name=row.tool_call.tool_name if row.tool_call is not None else "",
        action=row.kind,
        reason=reason,
        extra={"serverRequest": row.pk, "toolCall": row.tool_call_id, **(extra or {})},
    )


class _Refusal(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _refuse_open(call: ToolCall, kind: str, code: str, message: str) -> _Refusal:
    return _Refusal(code, message)


def _record_refused_open(call: ToolCall, kind: str, code: str) -> None:
    with transaction.atomic():
        record(
            event_type=AuditEventType.SERVER_REQUEST_REFUSED,
            decision=Decision.DENIED,
            workspace_id=call.thread.workspace_id,
            thread_id=call.thread_id,
            server_id=call.server_id,
            binding_id=call.binding_id,
            tool_name=call.tool_name,
            action=kind,
            reason=code,
            extra={"toolCall": call.pk},
        )


def sampling_allowance_for(
    *, thread_id: int, server_id: int, requester: str = "server"
) -> SamplingAllowance | None:
    """The thread's allowance of a server's sampling, or (``requester="app_view"``) of its
    app view's: the two are granted separately."""
    return (
        SamplingAllowance.objects.filter(
            thread_id=thread_id, server_id=server_id, requester=requester, revoked_at__isnull=True
        )
        .order_by("-id")
        .first()
    )


def server_request_open(
    *,
    call_id: int,
    kind: str,
    params: dict[str, Any],
    key: str,
    expires_in: float,
    retries_call: bool = False,
    requester: str = "server",
    for_user_id: int | None = None,
    preapproved: str = "",
) -> Opened:
    """Store a server's request to the person the call runs for, audited and shown to the
    thread. Raises ``ServerRequestRefused`` (audited) for a request that cannot be shown:
    nobody to ask, too many pending in the thread, a schema that is not a form, a URL that is
    not http(s).

    An app view's request (issue 27, ``chat.view_tools``): ``requester="app_view"``,
    ``call_id`` the view's call and ``for_user_id`` the member whose view asks (or whose turn
    called the view's tool); ``preapproved`` (a reason, e.g. ``"read_only"``) stores it
    already accepted, shown and audited like an allowance."""
    call = ToolCall.objects.select_related("thread", "server", "requested_by").get(pk=call_id)
    try:
        return _open(
            call=call,
            kind=kind,
            params=params,
            key=key,
            expires_in=expires_in,
            retries_call=retries_call,
            requester=requester,
            for_user_id=for_user_id,
            preapproved=preapproved,
        )
    except _Refusal as refusal:
        # Audited once the opening's transaction is gone (it rolled back).
        _record_refused_open(call, kind, refusal.code)
        raise ServerRequestRefused(refusal.code, refusal.message) from None


def _open(
    *,
    call: ToolCall,
    kind: str,
    params: dict[str, Any],
    key: str,
    expires_in: float,
    retries_call: bool,
    requester: str = "server",
    for_user_id: int | None = None,
    preapproved: str = "",
) -> Opened:
    with transaction.atomic():
        for_user_id = for_user_id or call.requested_by_id
        if for_user_id is None:
            raise _refuse_open(call, kind, "nobody_to_ask", "This call runs for nobody to ask.")
        pending = ServerRequest.objects.filter(
            thread_id=call.thread_id, status=ServerRequestStatus.PENDING
        ).count()
        if pending >= MAX_PENDING_PER_THREAD:
            raise _refuse_open(
                call, kind, "too_many_pending", "Too many questions are waiting in this thread."
            )
        try:
            kept = _sanitised(kind, params)
        except ServerRequestRefused as exc:
            raise _refuse_open(call, kind, exc.code, exc.message) from None
        extra: dict[str, Any] = {}
        elicitation_id = ""
        if kind == ServerRequestKind.ELICITATION_FORM:
            try:
                fields = form_fields(kept.get("requestedSchema"))
            except SchemaRefused as exc:
                raise _refuse_open(
                    call, kind, "schema_refused", f"Atrium cannot show this form: {exc}"
                ) from None
            extra["fields"] = [f["name"] for f in fields]
        elif kind == ServerRequestKind.ELICITATION_URL:
            url = kept.get("url")
            if not isinstance(url, str) or not url_domain(url) or len(url) > 4000:
                raise _refuse_open(call, kind, "bad_url", "The page's address is not a URL.")
            if url.split(":", 1)[0].lower() not in URL_SCHEMES:
                raise _refuse_open(call, kind, "bad_url", "Atrium opens only http(s) pages.")
            elicitation_id = str(kept.get("elicitationId") or "")[:200]
            extra["domain"] = url_domain(url)
        allowance = None
        if kind == ServerRequestKind.SAMPLING:
            allowance = sampling_allowance_for(
                thread_id=call.thread_id, server_id=call.server_id, requester=requester
            )
        now = timezone.now()
        row = ServerRequest.objects.create(
            kind=kind,
            thread=call.thread,
            workspace_id=call.thread.workspace_id,
            tool_call=call,
            server=call.server,
            for_user_id=for_user_id,
            requester=requester,
            params=kept,
            elicitation_id=elicitation_id,
            retries_call=retries_call,
            expires_at=now + timedelta(seconds=expires_in),
            wait_key=key,
        )
        if allowance is not None or preapproved:
            row.status = ServerRequestStatus.ACCEPTED
            row.decided_at = now
            row.outcome = (
                {"action": "accept", "allowance": allowance.pk}
                if allowance is not None
                else {"action": "accept", "basis": preapproved[:40]}
            )
            row.save(update_fields=["status", "decided_at", "outcome"])
        granted = allowance is not None or bool(preapproved)
        _audit(
            row,
            AuditEventType.SERVER_REQUEST_OPENED,
            Decision.ALLOWED if granted else Decision.PENDING,
            reason=("allowed_in_thread" if allowance is not None else preapproved[:40])
            if granted
            else "",
            extra={**extra, "requester": requester} if requester != "server" else extra,
        )
        _emit(row)
    return Opened(row=row, allowance_id=allowance.pk if allowance is not None else None)


def _refuse_answer(
    row: ServerRequest, user: Any, code: str, message: str, *, audited: bool = True
) -> ServerRequestRefused:
    if audited:
        with transaction.atomic():
            _audit(
                row,
                AuditEventType.SERVER_REQUEST_REFUSED,
                Decision.DENIED,
                user_id=user.pk,
                reason=code,
            )
    return ServerRequestRefused(code, message)


def server_request_answer(
    *,
    request_id: int,
    user: Any,
    answer: Answer,
    content: Any = None,
    remember: str = "",
) -> ServerRequest:
    """The person's answer: accept (a form with its content), decline or cancel.

    Only the person the call runs for may answer (a viewer never); anyone else is refused,
    audited. A form's content is checked against its schema; the audit row and the event
    name the fields answered, never their values. ``remember="thread"`` (sampling) also
    allows the server's sampling in this thread (audited)."""
    if answer not in _STATUS_FOR:
        raise ServerRequestRefused("invalid", "The answer is accept, decline or cancel.")
    row = ServerRequest.objects.select_related("server", "tool_call", "for_user").get(pk=request_id)
    membership = Membership.objects.filter(user=user, workspace_id=row.workspace_id).first()
    if membership is None or not membership.can_act:
        raise _refuse_answer(row, user, "viewer_cannot_act", "Viewers cannot answer.")
    if row.for_user_id != user.pk:
        name = (row.for_user.get_full_name() or row.for_user.get_username()) if row.for_user else ""
        raise _refuse_answer(
            row, user, "not_for_you", f"Only {name or 'the person this call runs for'} can answer."
        )
    result: dict[str, Any] = {"action": answer}
    fields_answered: list[str] = []
    if answer == "accept" and row.kind == ServerRequestKind.ELICITATION_FORM:
        fields = form_fields(row.params.get("requestedSchema"))
        clean, problems = answer_check(fields, content if content is not None else {})
        if problems:
            raise ServerRequestRefused("invalid_answer", problems[0].message, problems)
        result["content"] = clean
        fields_answered = sorted(clean)
    with transaction.atomic():
        locked = ServerRequest.objects.select_for_update().get(pk=row.pk)
        if locked.status != ServerRequestStatus.PENDING:
            raise ServerRequestRefused("already_decided", "This question was already answered.")
        now = timezone.now()
        row.status = _STATUS_FOR[answer]
        row.decided_at = now
        row.decided_by = user
        key = row.wait_key
        row.outcome = {"action": answer}
        if fields_answered:
            row.outcome["fields"] = fields_answered
        allowance = None
        if remember == "thread" and answer == "accept" and row.kind == ServerRequestKind.SAMPLING:
            allowance = SamplingAllowance.objects.create(
                thread_id=row.thread_id,
                server=row.server,
                requester=row.requester,
                granted_by=user,
                server_request=row,
            )
            row.outcome["allowance"] = allowance.pk
            _audit(
                row,
                AuditEventType.SAMPLING_ALLOWANCE_CREATED,
                Decision.ALLOWED,
                user_id=user.pk,
                extra={"allowance": allowance.pk},
            )
        row.save(update_fields=["status", "decided_at", "decided_by", "outcome"])
        _audit(
            row,
            AuditEventType.SERVER_REQUEST_ANSWERED,
            Decision.APPROVED if answer == "accept" else Decision.REJECTED,
            user_id=user.pk,
            reason=answer,
            extra={"fields": fields_answered} if fields_answered else None,
        )
        _emit(row)
        message = {"status": row.status, "result": result}
        transaction.on_commit(lambda: waiting.deliver(key, message))
    return row


def server_request_complete(
    *,
    server_id: int | None = None,
    elicitation_id: str = "",
    request_id: int | None = None,
    user: Any = None,
) -> list[ServerRequest]:
    """A URL elicitation is done: the server said so (``notifications/elicitation/complete``
    naming its ``elicitationId``) or the person did ("I've finished"). A pending one counts
    as accepted. Returns the rows completed (audited, emitted, their waiters told)."""
    rows = ServerRequest.objects.select_related("server", "tool_call", "for_user").filter(
        kind=ServerRequestKind.ELICITATION_URL, completed_at__isnull=True
    )
    if request_id is not None:
        rows = rows.filter(pk=request_id)
    else:
        if not elicitation_id or server_id is None:
            return []
        rows = rows.filter(server_id=server_id, elicitation_id=elicitation_id)
    done = []
    for row in rows.exclude(status__in=["declined", "cancelled", "expired", "failed"])[:20]:
        if user is not None and row.for_user_id != user.pk:
            raise _refuse_answer(row, user, "not_for_you", "Only the person asked can finish it.")
        with transaction.atomic():
            now = timezone.now()
            key = row.wait_key
            row.completed_at = now
            if row.status == ServerRequestStatus.PENDING:
                row.status = ServerRequestStatus.ACCEPTED
                row.decided_at = now
                row.decided_by = user
                row.outcome = {**(row.outcome or {}), "action": "accept"}
            row.save(
                update_fields=["completed_at", "status", "decided_at", "decided_by", "outcome"]
            )
            _audit(
                row,
                AuditEventType.SERVER_REQUEST_COMPLETED,
                Decision.ALLOWED,
                user_id=user.pk if user is not None else None,
                reason="person" if user is not None else "server",
            )
            _emit(row)
            message = {"status": row.status, "result": {"action": "accept"}, "completed": True}
            transaction.on_commit(functools.partial(waiting.deliver, key, message))
        done.append(row)
    return done


def server_request_expire(*, request_id: int, reason: str = "expired") -> ServerRequest | None:
    """Nobody answered in time, or the call ended first: the request is closed (audited).
    None: it was answered meanwhile."""
    with transaction.atomic():
        row = (
            # Only the request's own row: its call and person may be gone (outer joins,
            # which PostgreSQL does not lock).
            ServerRequest.objects.select_for_update(of=("self",))
            .select_related("server", "tool_call", "for_user")
            .filter(pk=request_id)
            .first()
        )
        if row is None or row.status != ServerRequestStatus.PENDING:
            return None
        row.status = ServerRequestStatus.EXPIRED
        row.decided_at = timezone.now()
        row.outcome = {**(row.outcome or {}), "action": "cancel", "reason": reason}
        row.save(update_fields=["status", "decided_at", "outcome"])
        _audit(row, AuditEventType.SERVER_REQUEST_EXPIRED, Decision.FAILED, reason=reason)
        _emit(row)
    return row


def server_request_fail(*, request_id: int, reason: str) -> ServerRequest | None:
    """Consent was given but serving the request failed (sampling: no model, an error)."""
    with transaction.atomic():
        row = (
            ServerRequest.objects.select_related("server", "tool_call", "for_user")
            .filter(pk=request_id)
            .first()
        )
        if row is None:
            return None
        row.status = ServerRequestStatus.FAILED
        row.outcome = {**(row.outcome or {}), "reason": reason[:300]}
        row.save(update_fields=["status", "outcome"])
        _audit(row, AuditEventType.SERVER_REQUEST_ANSWERED, Decision.FAILED, reason=reason[:200])
        _emit(row)
    return row


FORM_MAIL_GRACE = timedelta(seconds=5)


def request_state(*, request_id: int) -> dict[str, Any] | None:
    """A decided request as a waiter's message (None while pending). A form accepted in
    another process without the channel layer carries no values: it is answered as cancel."""
    row = (
        ServerRequest.objects.filter(pk=request_id)
        .only("status", "completed_at", "kind", "decided_at")
        .first()
    )
    if row is None or row.status == ServerRequestStatus.PENDING:
        return None
    action = {"accepted": "accept", "declined": "decline"}.get(row.status, "cancel")
    if action == "accept" and row.kind == ServerRequestKind.ELICITATION_FORM:
        # A form's values travel only in the waiter's mail (never stored), sent just after
        # the commit: a read between the two must wait for it, not answer without them.
        if row.decided_at is not None and timezone.now() - row.decided_at < FORM_MAIL_GRACE:
            return None
        action = "cancel"
    return {
        "status": row.status,
        "result": {"action": action},
        "completed": row.completed_at is not None,
        "fromState": True,
    }


def server_requests_expire_due(*, grace_seconds: float = 30.0, limit: int = 200) -> int:
    """Expire pending requests past their time whose waiting call is gone (its process
    stopped): for a beat sweep. Returns how many were expired."""
    cutoff = timezone.now() - timedelta(seconds=grace_seconds)
    due = ServerRequest.objects.filter(
        status=ServerRequestStatus.PENDING, expires_at__lt=cutoff
    ).values_list("pk", flat=True)[:limit]
    return sum(
        1 for pk in list(due) if server_request_expire(request_id=pk, reason="expired") is not None
    )


def sampling_allowance_revoke(*, allowance_id: int, actor: Any, actor_label: str = "") -> bool:
    """Revoke an *Allow in this thread* for sampling: the next request asks again. Audited;
    ``False`` when it was already revoked."""
    with transaction.atomic():
        allowance = (
            SamplingAllowance.objects.select_for_update(of=("self",))
            .select_related("thread")
            .get(pk=allowance_id)
        )
        if allowance.revoked_at is not None:
            return False
        allowance.revoked_at = timezone.now()
        allowance.save(update_fields=["revoked_at"])
        record(
            event_type=AuditEventType.SAMPLING_ALLOWANCE_REVOKED,
            decision=Decision.ALLOWED,
            actor_kind="user",
            actor_user_id=getattr(actor, "pk", None),
            actor_label=actor_label,
            workspace_id=allowance.thread.workspace_id,
            thread_id=allowance.thread_id,
            server_id=allowance.server_id,
            action="sampling_allowance_revoke",
            extra={"allowance": allowance.pk, "requester": allowance.requester},
        )
    return True
