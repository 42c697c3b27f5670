"""The one writer of audit rows. Imports no other app (workspaces, servers … by id).

Every service that changes state calls :func:`record` inside its own transaction, so the
change and its audit row commit (or roll back) together.

Its INSERT is a lean one (``lean_rows.insert_row``): an audited action is on the hot path of
every tool call, and ``AuditEvent`` has no ``save()`` logic or receivers to bypass.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Required, TypedDict

from django.db import transaction
from typing_extensions import Unpack

from lean_rows import insert_row

from .models import AuditEvent
from .types import AuditEventType, Decision

MAX_EXTRA_BYTES = 16 * 1024


def digest_arguments(arguments: Any) -> str:
    """A stable sha256 of JSON arguments (key order does not matter)."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


# PostgreSQL stores no NUL character in text or jsonb; refused input (a hostile frame's
# type, a server's tool name) may carry one. It is kept visible as U+FFFD.
_JSON_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def _text(value: str, limit: int) -> str:
    return value.replace("\x00", "\ufffd")[:limit]


def _bounded_extra(extra: dict[str, Any] | None) -> dict[str, Any]:
    if not extra:
        return {}
    encoded = _JSON_NUL.sub(r"\1\\ufffd", json.dumps(extra, default=str))
    if len(encoded) <= MAX_EXTRA_BYTES:
        return json.loads(encoded)
    return {"truncated": True, "preview": encoded[:MAX_EXTRA_BYTES]}


class AuditFields(TypedDict, total=False):
    """What an audit event says (``record``, ``audit_row``); the two first are required."""

    event_type: Required[AuditEventType]
    decision: Required[Decision | str]
    actor_kind: str  # "system" unless said
    actor_user_id: int | None
    actor_label: str
    workspace_id: int | None
    thread_id: int | None
    binding_id: int | None
    server_id: int | None
    tool_name: str
    action: str
    reason: str
    arguments: Any  # stored as its digest only
    latency_ms: float | None
    extra: dict[str, Any] | None


def audit_row(**fields: Unpack[AuditFields]) -> AuditEvent:
    """The audit event ``record`` appends, built but not written: for a change that writes
    it together with its own rows in one statement (``lean_rows.write_together``), still
    inside that change."""
    arguments = fields.get("arguments")
    return AuditEvent(
        event_type=int(fields["event_type"]),
        decision=str(fields["decision"]),
        actor_kind=fields.get("actor_kind", "system"),
        actor_user_id=fields.get("actor_user_id"),
        actor_label=_text(fields.get("actor_label", ""), 200),
        workspace_id=fields.get("workspace_id"),
        thread_id=fields.get("thread_id"),
        binding_id=fields.get("binding_id"),
        server_id=fields.get("server_id"),
        tool_name=_text(fields.get("tool_name", ""), 200),
        action=_text(fields.get("action", ""), 40),
        reason=_text(fields.get("reason", ""), 200),
        argument_digest=digest_arguments(arguments) if arguments is not None else "",
        latency_ms=fields.get("latency_ms"),
        extra=_bounded_extra(fields.get("extra")),
    )


def record(**fields: Unpack[AuditFields]) -> AuditEvent:
    """Append one audit event. Must run inside the transaction of the change it records."""
    # No savepoint: one INSERT needs none, and inside the caller's transaction (the usual
    # case) it would add two statements to every audited action.
    with transaction.atomic(savepoint=False):
        return insert_row(audit_row(**fields))
