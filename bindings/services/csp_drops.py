"""The audit of CSP sources dropped from a view's resource, once per resource content, binding
and set of drops (``CspDropsAudited``, a bindings table)."""

from __future__ import annotations

import hashlib
import json

from django.db import transaction

from audit.types import AuditEventType, Decision
from audit.writer import record
from bindings.models import CspDropsAudited


def csp_drops_record(
    *,
    binding_id: int | None,
    server_id: int,
    workspace_id: int,
    thread_id: int,
    uri: str,
    content_hash: str,
    dropped: list[dict[str, str]],
) -> int:
    """Audit the CSP sources dropped from a view's resource once per resource content,
    binding and set of drops (CspDropsAudited), not on every opening: a hostile app must
    not turn each visit into rows of an insert-only table. Returns the rows written."""
    if not dropped:
        return 0
    canonical = json.dumps(sorted(dropped, key=lambda d: json.dumps(d, sort_keys=True)))
    with transaction.atomic():
        _, first = CspDropsAudited.objects.get_or_create(
            binding_id=binding_id or 0,
            content_hash=content_hash[:64],
            drops_digest=hashlib.sha256(canonical.encode()).hexdigest(),
        )
        if not first:
            return 0
        for item in dropped:
            record(
                event_type=AuditEventType.CSP_DOMAIN_DROPPED,
                decision=Decision.DENIED,
                actor_kind="system",
                workspace_id=workspace_id,
                thread_id=thread_id,
                binding_id=binding_id,
                server_id=server_id,
                action="csp",
                reason=str(item.get("code") or "dropped")[:200],
                extra={**item, "uri": uri, "content_hash": content_hash[:64]},
            )
    return len(dropped)
