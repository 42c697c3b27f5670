"""State changes of the tool catalogue: a server's tool rows from its `tools/list` answer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from audit.types import AuditEventType, Decision
from audit.writer import record

from ..models import McpServer, Tool
from ..schema import measure_input_schema
from ..uimeta import parse_tool_ui


@dataclass
class CatalogueChange:
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    problems: dict[str, list[str]] = field(default_factory=dict)
    # Tools listed but not callable (their input schema was refused), with the reason.
    unusable: dict[str, str] = field(default_factory=dict)


def catalogue_apply(*, server: McpServer, tools: list[dict[str, Any]]) -> CatalogueChange:
    """Upsert the server's tool rows from a `tools/list` answer (wire form). Each input
    schema is measured (``measure_input_schema``): one past the complexity caps is stored
    with its ``schema_refusal`` (the tool cannot be called), listed under ``unusable`` in
    this refresh's audit row; the others get how many argument values may be checked
    inline (``inline_check_values``)."""
    change = CatalogueChange()
    seen: set[str] = set()
    with transaction.atomic():
        existing = {t.name: t for t in Tool.objects.filter(server=server)}
        for raw in tools:
            name = raw.get("name") if isinstance(raw, dict) else None
            if not isinstance(name, str) or not name or name in seen:
                continue
            seen.add(name)
            ui = parse_tool_ui(raw)
            input_schema = (
                raw.get("inputSchema") if isinstance(raw.get("inputSchema"), dict) else {}
            )
            # Measured here, once per listing: a call only reads the verdict. A schema too
            # big or too deep to keep is stored empty; its refusal says why.
            cost = measure_input_schema(input_schema)
            if not cost.keep:
                input_schema = {}
            values = {
                "title": str(raw.get("title") or ui.annotations.get("title") or "")[:300],
                "description": str(raw.get("description") or ""),
                "input_schema": input_schema,
                "output_schema": raw.get("outputSchema")
                if isinstance(raw.get("outputSchema"), dict)
                else None,
                "annotations": ui.annotations,
                "resource_uri": ui.resource_uri or "",
                "visibility": list(ui.visibility),
                "is_app_sdk": ui.is_app_sdk,
                "meta": raw.get("_meta") if isinstance(raw.get("_meta"), dict) else {},
                "problems": ui.problems,
                "schema_refusal": (cost.problem or "")[:300],
                "inline_check_values": cost.inline_nodes,
                "present": True,
            }
            if ui.problems or cost.problem:
                change.problems[name] = [*ui.problems, *([cost.problem] if cost.problem else [])]
            if cost.problem:
                change.unusable[name] = cost.problem
            row = existing.get(name)
            if row is None:
                Tool.objects.create(server=server, name=name, **values)
                change.added.append(name)
            else:
                changed = any(getattr(row, k) != v for k, v in values.items())
                if changed:
                    for k, v in values.items():
                        setattr(row, k, v)
                    row.save()
                    change.updated.append(name)
        gone = [n for n, t in existing.items() if n not in seen and t.present]
        Tool.objects.filter(server=server, name__in=gone).update(present=False)
        change.removed = gone
        server.catalogue_refreshed_at = timezone.now()
        server.last_seen = server.catalogue_refreshed_at
        server.last_error = ""
        server.save(update_fields=["catalogue_refreshed_at", "last_seen", "last_error"])
        record(
            event_type=AuditEventType.CATALOGUE_REFRESHED,
            decision=Decision.ALLOWED,
            server_id=server.pk,
            extra={
                "added": change.added,
                "removed": change.removed,
                "updated": change.updated,
                "problems": change.problems,
                "unusable": change.unusable,
            },
        )
    return change
