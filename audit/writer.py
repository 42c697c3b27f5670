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
from typing import Any

from django.db import transaction

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


def record(
    *,
    event_type: AuditEventType,
    decision: Decision | str,
    actor_kind: str = "system",
    actor_user_id: int | None = None,
    actor_label: str = "",
    workspace_id: int | None = None,
    thread_id: int | None = None,
    binding_id: int | None = None,
    server_id: int | None = None,
    tool_name: str = "",
    action: str = "",
    reason: str = "",
    arguments: Any = None,
    latency_ms: float | None = None,
    extra: dict[str, Any] | None = None,
) -> AuditEvent:
    """Append one audit event. Must run inside the transaction of the change it records."""
    # No savepoint: one INSERT needs none, and inside the caller's transaction (the usual
    # case) it would add two statements to every audited action.
    with transaction.atomic(savepoint=False):
        event = AuditEvent(
            event_type=int(event_type),
            decision=str(decision),
            actor_kind=actor_kind,
            actor_user_id=actor_user_id,
            actor_label=_text(actor_label, 200),
            workspace_id=workspace_id,
            thread_id=thread_id,
            binding_id=binding_id,
            server_id=server_id,
            tool_name=_text(tool_name, 200),
            action=_text(action, 40),
            reason=_text(reason, 200),
            argument_digest=digest_arguments(arguments) if arguments is not None else "",
            latency_ms=latency_ms,
            extra=_bounded_extra(extra),
        )
        return insert_row(event)
