"""State changes of MCP server rows: add, save, import, reconfigure, remove, health.

Sync and DB-only; the network side lives in :mod:`mcp_bridge.gateway`.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from audit.types import AuditEventType, Decision
from audit.writer import record

from ..models import AuthMode, McpServer, Transport
from ..server_config import ServerEntry
from ..server_spec import ServerSpec
from .oauth_grants import grant_disconnect

_ENV_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")


class ServerConfigError(ValueError):
    pass


# `${NAME}` may name only variables with this prefix: the deployment decides which of its
# environment servers may see (never SECRET_KEY, DATABASE_URL, provider keys...).
ENV_REF_PREFIX = "ATRIUM_MCP_"


def env_reference_problem(value: Any) -> str | None:
    """Why a configured env/header value may not be stored, or None."""
    match = _ENV_REF.match(str(value or ""))
    if match and not match.group(1).startswith(ENV_REF_PREFIX):
        return (
            f"${{{match.group(1)}}} is not allowed: only variables named "
            f"{ENV_REF_PREFIX}* can be referenced."
        )
    return None


def _resolve(value: str) -> str:
    """`${NAME}` reads NAME from the environment, so secrets need not live in the DB; only
    an allow-listed NAME (ENV_REF_PREFIX) resolves."""
    match = _ENV_REF.match(value or "")
    if not match:
        return value
    problem = env_reference_problem(value)
    if problem:
        raise ServerConfigError(problem)
    return os.environ.get(match.group(1), "")


def spec_for(server: McpServer) -> ServerSpec:
    """The connection spec of a server row; ``ServerConfigError`` if the row is unusable
    (a row edited in the admin can hold what ``server_add`` would refuse)."""
    env = tuple((k, _resolve(str(v))) for k, v in (server.env or {}).items())
    headers = tuple((k, _resolve(str(v))) for k, v in (server.headers or {}).items())
    try:
        return _cached_spec(
            server.slug,
            server.name,
            server.transport,
            server.command or None,
            tuple(str(a) for a in (server.args or [])),
            env,
            server.cwd or None,
            server.url or None,
            headers,
            float(server.call_timeout),
            float(server.connect_timeout),
            server.log_level or None,
        )
    except ValueError as exc:
        raise ServerConfigError(f"Server '{server.slug}' is misconfigured: {exc}.") from exc


# A tool call asks for its server's spec more than once (issue 28): building one hashes
# the whole config (``ServerSpec.create``). Keyed by every value the spec is made of —
# `${NAME}` references resolved — so a changed row or variable is simply another entry;
# specs are immutable, so one may be shared. A refused config raises and is not kept.
@functools.lru_cache(maxsize=256)
def _cached_spec(
    slug: str,
    name: str,
    transport: str,
    command: str | None,
    args: tuple[str, ...],
    env: tuple[tuple[str, str], ...],
    cwd: str | None,
    url: str | None,
    headers: tuple[tuple[str, str], ...],
    call_timeout: float,
    connect_timeout: float,
    log_level: str | None,
) -> ServerSpec:
    return ServerSpec.create(
        slug,
        name=name,
        transport=transport,
        command=command,
        args=args,
        env=dict(env),
        cwd=cwd,
        url=url,
        headers=dict(headers),
        call_timeout=call_timeout,
        connect_timeout=connect_timeout,
        **({"log_level": log_level} if log_level else {}),  # issue 25: logging
    )


def _check_server_fields(
    *,
    name: str,
    transport: str,
    command: str,
    url: str,
    call_timeout: float,
    env: dict[str, str] | None,
    headers: dict[str, str] | None,
) -> None:
    """What every server row must satisfy, added or changed; ``ServerConfigError`` if not."""
    if transport not in Transport.values:
        raise ServerConfigError(f"Unknown transport '{transport}' (stdio, streamable_http, sse).")
    if transport == Transport.STDIO and not (isinstance(command, str) and command.strip()):
        raise ServerConfigError("A stdio server needs a command.")
    if transport != Transport.STDIO and not (
        isinstance(url, str) and url.startswith(("http://", "https://"))
    ):
        raise ServerConfigError("An HTTP or SSE server needs an http(s) URL.")
    for label, value, limit in (("name", name, 100), ("command", command, 500), ("URL", url, 500)):
        # The columns' limits: PostgreSQL would fail the insert, SQLite would not notice.
        if len(value) > limit:
            raise ServerConfigError(f"The {label} is longer than {limit} characters.")
    if not call_timeout > 0:  # also catches NaN
        raise ServerConfigError("The call timeout must be a positive number of seconds.")
    for kind, pairs in (("environment variable", env), ("header", headers)):
        if any(not isinstance(key, str) or not key.strip() for key in pairs or {}):
            raise ServerConfigError(f"Every {kind} needs a name.")
        for value in (pairs or {}).values():
            problem = env_reference_problem(value)
            if problem:
                raise ServerConfigError(problem)


def server_add(
    *,
    name: str,
    transport: str,
    slug: str = "",
    command: str = "",
    args: list[str] | tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    url: str = "",
    headers: dict[str, str] | None = None,
    cwd: str = "",
    call_timeout: float = 60.0,
    auth_mode: str = "",
    actor: Any = None,
    via: str = "",
) -> McpServer:
    auth_mode = auth_mode or (AuthMode.HEADERS if headers else AuthMode.NONE)
    if auth_mode not in AuthMode.values:
        raise ServerConfigError(f"Unknown auth mode '{auth_mode}' ({', '.join(AuthMode.values)}).")
    if auth_mode in (AuthMode.OAUTH_SHARED, AuthMode.OAUTH_MEMBER) and transport == Transport.STDIO:
        raise ServerConfigError("OAuth sign-in needs an HTTP server (a URL), not stdio.")
    _check_server_fields(
        name=name,
        transport=transport,
        command=command,
        url=url,
        call_timeout=call_timeout,
        env=env,
        headers=headers,
    )
    slug = slugify(slug or name)[:60]
    if not slug:
        raise ServerConfigError("The server needs a name made of letters or digits.")
    if McpServer.objects.filter(slug=slug).exists():
        raise ServerConfigError(f"A server named '{slug}' already exists.")
    with transaction.atomic():
        server = McpServer.objects.create(
            name=name,
            slug=slug,
            transport=transport,
            command=command,
            args=list(args),
            env=dict(env or {}),
            url=url,
            headers=dict(headers or {}),
            cwd=cwd,
            call_timeout=call_timeout,
            auth_mode=auth_mode,
        )
        _audit_server_added(server, actor=actor, via=via)
    return server


def _server_record(
    event_type: AuditEventType,
    *,
    actor: Any,
    actor_label: str = "",
    decision: Decision = Decision.ALLOWED,
    action: str | None = None,
    **fields: Any,
) -> None:
    """Audit a change to the servers (or a refused one) by ``actor``, the system when None;
    an admin's (``actor_label="admin"``) has the action ``admin`` unless ``action`` is given.
    ``fields``: the rest, as :func:`audit.writer.record` takes them."""
    record(
        event_type=event_type,
        decision=decision,
        actor_kind="user" if actor else "system",
        actor_user_id=getattr(actor, "pk", None),
        actor_label=actor_label,
        action=("admin" if actor_label == "admin" else "") if action is None else action,
        **fields,
    )


def _audit_server_added(server: McpServer, *, actor: Any, via: str, actor_label: str = "") -> None:
    _server_record(
        AuditEventType.SERVER_ADDED,
        actor=actor,
        actor_label=actor_label,
        server_id=server.pk,
        # Key names only: values may be secrets.
        extra={
            "transport": server.transport,
            "auth_mode": server.auth_mode,
            "env_keys": sorted(server.env or {}),
            "header_keys": sorted(server.headers or {}),
            **({"via": via} if via else {}),
        },
    )


# Fields whose changes are audited by name (env / headers: only their keys).
AUDITED_SERVER_FIELDS = (
    "name",
    "slug",
    "transport",
    "command",
    "args",
    "cwd",
    "url",
    "enabled",
    "call_timeout",
    "connect_timeout",
    "sandbox_subdomain",
    "auth_mode",
)


def server_snapshot(server: McpServer) -> dict[str, Any]:
    """What SERVER_CHANGED compares: the audited fields, and env / header key names."""
    snap = {name: getattr(server, name) for name in AUDITED_SERVER_FIELDS}
    snap["env_keys"] = sorted(server.env or {})
    snap["header_keys"] = sorted(server.headers or {})
    return snap


def server_save(
    *,
    server: McpServer,
    actor: Any,
    actor_label: str = "",
    secrets_changed: list[str] | tuple[str, ...] = (),
) -> McpServer:
    """Store a server edited as a whole (the admin's form), audited in the same transaction:
    SERVER_ADDED for a new row, SERVER_CHANGED with the names of the fields that changed
    (``secrets_changed``: env / headers whose values changed; only key names are stored)."""
    via = actor_label or "service"
    with transaction.atomic():
        stored = McpServer.objects.filter(pk=server.pk).first() if server.pk else None
        before = server_snapshot(stored) if stored is not None else None
        server.save()
        if before is None:
            _audit_server_added(server, actor=actor, via=via, actor_label=actor_label)
            return server
        after = server_snapshot(server)
        changed = sorted({k for k in after if after[k] != before[k]} | set(secrets_changed))
        if changed:
            _audit_server_changed(
                server, actor=actor, actor_label=actor_label, via=via, changed=changed
            )
    return server


def _audit_server_changed(
    server: McpServer, *, actor: Any, via: str, changed: list[str], actor_label: str = ""
) -> None:
    """SERVER_CHANGED: the names of the fields that changed, and env / header key names."""
    _server_record(
        AuditEventType.SERVER_CHANGED,
        actor=actor,
        actor_label=actor_label,
        server_id=server.pk,
        extra={
            "via": via,
            "changed": changed,
            "env_keys": sorted(server.env or {}),
            "header_keys": sorted(server.headers or {}),
        },
    )


def server_remove(*, server: McpServer, actor: Any, actor_label: str = "") -> None:
    """Remove a server (its catalogue and bindings go with it); its OAuth grants are
    disconnected first (tokens revoked at the provider), all audited."""
    with transaction.atomic():
        _server_record(
            AuditEventType.SERVER_REMOVED,
            actor=actor,
            actor_label=actor_label,
            server_id=server.pk,
            extra={"via": actor_label or "service", "name": server.name, "slug": server.slug},
        )
        for grant in server.oauth_grants.all():
            grant_disconnect(grant=grant, actor=actor, reason="server_removed")
        server.delete()


def server_change_refused(*, actor: Any, attempt: str, method: str, actor_label: str = "") -> None:
    """Audit a staff member's refused attempt to add or reconfigure a server (committed on
    its own: the refusal is the point)."""
    _server_record(
        AuditEventType.SERVER_CHANGE_REFUSED,
        actor=actor,
        actor_label=actor_label,
        decision=Decision.DENIED,
        reason="superuser_required",
        extra={"via": actor_label or "service", "attempt": attempt, "method": method},
    )


# What a server starts or connects to: the fields an `mcpServers` entry sets (the others —
# name, timeouts, enabled, sandbox subdomain — are left as an admin set them).
CONNECTION_FIELDS: dict[str, Any] = {
    "transport": "",
    "command": "",
    "args": [],
    "env": {},
    "url": "",
    "headers": {},
}


def server_update_connection(
    *, server_id: int, fields: dict[str, Any], actor: Any = None, via: str = ""
) -> tuple[McpServer, list[str]]:
    """Set what a server runs or where it connects (the `CONNECTION_FIELDS`; missing ones
    are cleared). Returns the row and the names of the fields that changed; an unchanged
    row writes nothing. Audited as SERVER_CHANGED with field and key names, never values."""
    unknown = set(fields) - set(CONNECTION_FIELDS)
    if unknown:
        raise ServerConfigError(f"Cannot change {', '.join(sorted(unknown))} this way.")
    wanted = {name: fields.get(name, default) for name, default in CONNECTION_FIELDS.items()}
    wanted["args"] = [str(a) for a in wanted["args"]]
    with transaction.atomic():
        server = McpServer.objects.select_for_update().filter(pk=server_id).first()
        if server is None:
            raise ServerConfigError("That server no longer exists.")
        _check_server_fields(
            name=server.name,
            transport=wanted["transport"],
            command=wanted["command"],
            url=wanted["url"],
            call_timeout=server.call_timeout,
            env=wanted["env"],
            headers=wanted["headers"],
        )
        changed = [name for name, value in wanted.items() if getattr(server, name) != value]
        if changed:
            for name in changed:
                setattr(server, name, wanted[name])
            server.save(update_fields=[*changed, "updated_at"])
            _audit_server_changed(server, actor=actor, via=via or "service", changed=changed)
    return server, changed


@dataclass(frozen=True)
class ImportedServer:
    name: str
    # added | updated | unchanged | skipped
    status: str
    server: McpServer | None = None
    changed: tuple[str, ...] = ()
    error: str = ""


def server_import(
    *, entries: list[ServerEntry], source: str, actor: Any = None
) -> list[ImportedServer]:
    """Apply the entries of an `mcpServers` file: add new servers, bring existing ones (same
    slug) to the file's settings, skip unusable entries. Running it twice changes nothing
    the second time. Each entry commits on its own (one bad entry never undoes the others);
    every refused entry is audited (SERVER_IMPORT_REFUSED) and the import as a whole is
    summarized (SERVERS_IMPORTED), with names and statuses only."""
    outcomes: list[ImportedServer] = []
    seen: dict[str, str] = {}
    for entry in entries:
        outcome = _import_entry(entry, seen, actor=actor)
        outcomes.append(outcome)
        if outcome.status == "skipped":
            with transaction.atomic():
                _server_record(
                    AuditEventType.SERVER_IMPORT_REFUSED,
                    actor=actor,
                    decision=Decision.DENIED,
                    action="server_import",
                    reason=outcome.error[:200],
                    extra={"name": entry.name[:200], "source": source},
                )
    with transaction.atomic():
        _server_record(
            AuditEventType.SERVERS_IMPORTED,
            actor=actor,
            action="server_import",
            extra={
                "source": source,
                **{
                    status: [o.name for o in outcomes if o.status == status]
                    for status in ("added", "updated", "unchanged", "skipped")
                },
            },
        )
    return outcomes


def _import_entry(entry: ServerEntry, seen: dict[str, str], *, actor: Any) -> ImportedServer:
    if entry.fields is None:
        return ImportedServer(entry.name, "skipped", error=entry.error)
    slug = slugify(entry.name)[:60]
    if slug in seen:
        return ImportedServer(
            entry.name,
            "skipped",
            error=f"The entry '{seen[slug]}' of this file already names the server '{slug}'.",
        )
    if slug:
        seen[slug] = entry.name
    existing = McpServer.objects.filter(slug=slug).first() if slug else None
    try:
        if existing is None:
            server = server_add(name=entry.name, actor=actor, via="import", **entry.fields)
            return ImportedServer(entry.name, "added", server)
        server, changed = server_update_connection(
            server_id=existing.pk, fields=entry.fields, actor=actor, via="import"
        )
    except ServerConfigError as exc:
        return ImportedServer(entry.name, "skipped", error=str(exc))
    status = "updated" if changed else "unchanged"
    return ImportedServer(entry.name, status, server, tuple(changed))


def server_record_health(*, server_id: int, error: str | None) -> None:
    now = timezone.now()
    if error:
        McpServer.objects.filter(pk=server_id).update(last_error=error[:2000])
    else:
        McpServer.objects.filter(pk=server_id).update(last_seen=now, last_error="")
