"""State changes of mcp_bridge: servers, catalogue rows, UI resource versions, health.

Sync and DB-only; the network side lives in :mod:`mcp_bridge.gateway`.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from audit.types import AuditEventType, Decision
from audit.writer import record

from .connections import ServerSpec
from .errors import InvalidResource
from .models import AuthMode, McpServer, OAuthAuthorization, OAuthGrant, Tool, Transport, UiResource
from .revocation import revoke_later
from .schema import measure_input_schema
from .sealing import reseal, seal, unseal
from .server_config import ServerEntry
from .uimeta import normalize_mime, parse_resource_ui, parse_tool_ui, ui_flavor

_ENV_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
MAX_UI_DOCUMENT_BYTES = 5 * 1024 * 1024


def document_hash(text: str) -> str:
    """The same key the normalizer gives embedded documents: sha256 of the UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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
    env = {k: _resolve(str(v)) for k, v in (server.env or {}).items()}
    headers = {k: _resolve(str(v)) for k, v in (server.headers or {}).items()}
    try:
        return _create_spec(server, env, headers)
    except ValueError as exc:
        raise ServerConfigError(f"Server '{server.slug}' is misconfigured: {exc}.") from exc


def _create_spec(server: McpServer, env: dict[str, str], headers: dict[str, str]) -> ServerSpec:
    return ServerSpec.create(
        server.slug,
        name=server.name,
        transport=server.transport,
        command=server.command or None,
        args=tuple(str(a) for a in (server.args or [])),
        env=env,
        cwd=server.cwd or None,
        url=server.url or None,
        headers=headers,
        call_timeout=float(server.call_timeout),
        connect_timeout=float(server.connect_timeout),
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


def ui_resource_store(
    *,
    server: McpServer,
    uri: str,
    read_result: dict[str, Any],
    listing_meta: dict[str, Any] | None = None,
) -> UiResource:
    """Validate a `resources/read` answer and keep it as a version keyed by content hash."""
    contents = read_result.get("contents") if isinstance(read_result, dict) else None
    if not isinstance(contents, list) or not contents:
        raise InvalidResource(uri, user_message=f"The server returned no content for {uri}.")
    item = next((c for c in contents if isinstance(c, dict) and c.get("uri") == uri), contents[0])
    if not isinstance(item, dict):
        raise InvalidResource(uri, user_message=f"The content for {uri} is malformed.")
    mime = normalize_mime(item.get("mimeType"), default="")
    text = item.get("text")
    if text is None and isinstance(item.get("blob"), str):
        import base64
        import binascii

        try:
            text = base64.b64decode(item["blob"], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise InvalidResource(
                uri, user_message=f"The UI resource {uri} is not valid base64 UTF-8."
            ) from exc
    if not isinstance(text, str):
        raise InvalidResource(uri, user_message=f"The UI resource {uri} has no HTML text.")
    size = len(text.encode())
    if size > MAX_UI_DOCUMENT_BYTES:
        raise InvalidResource(uri, user_message=f"The UI resource {uri} is larger than 5 MB.")
    flavor = ui_flavor(mime, text)
    if flavor is None:
        raise InvalidResource(
            uri,
            user_message=(
                f"The UI resource {uri} has mime type '{mime or 'none'}', not an HTML app type."
            ),
        )
    meta = parse_resource_ui(item.get("_meta"), listing_meta).to_dict()
    with transaction.atomic():
        resource, created = _ui_resource_keep(
            server=server, uri=uri, mime_type=mime, flavor=flavor, text=text, meta=meta
        )
        if created:
            record(
                event_type=AuditEventType.UI_RESOURCE_FETCHED,
                decision=Decision.ALLOWED,
                server_id=server.pk,
                extra={
                    "uri": uri,
                    "hash": resource.content_hash,
                    "flavor": flavor,
                    "size": resource.size,
                    "csp": meta.get("csp"),
                    "problems": meta.get("problems", []),
                },
            )
    return resource


def ui_resource_store_document(
    *, server: McpServer, uri: str, mime_type: str, text: str, meta: dict[str, Any] | None
) -> UiResource:
    """Keep a UI document that arrived embedded in a tool result (legacy MCP-UI forms)."""
    flavor = ui_flavor(mime_type, text) or "html"
    resource, _ = _ui_resource_keep(
        server=server, uri=uri, mime_type=mime_type, flavor=flavor, text=text, meta=meta or {}
    )
    return resource


def _ui_resource_keep(
    *, server: McpServer, uri: str, mime_type: str, flavor: str, text: str, meta: dict[str, Any]
) -> tuple[UiResource, bool]:
    """The version of ``uri`` with this text (by content hash), stored when new."""
    return UiResource.objects.get_or_create(
        server=server,
        uri=uri,
        content_hash=document_hash(text),
        defaults={
            "mime_type": mime_type,
            "flavor": flavor,
            "text": text,
            "meta": meta,
            "size": len(text.encode()),
        },
    )


def server_record_health(*, server_id: int, error: str | None) -> None:
    now = timezone.now()
    if error:
        McpServer.objects.filter(pk=server_id).update(last_error=error[:2000])
    else:
        McpServer.objects.filter(pk=server_id).update(last_seen=now, last_error="")


# ----------------------------------------------------------------------- OAuth grants
#
# Grants are sealed (mcp_bridge.sealing); audit rows carry who, which server and why, never
# a token, a code or a client secret.


class OAuthRefused(Exception):
    """A sign-in step was refused; ``str()`` is the message for the person."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


def _grant_owner(user_id: int | None) -> dict[str, Any]:
    return {"grant_user_id": user_id, "grant": "shared" if user_id is None else "member"}


def grant_for(*, server: McpServer, user_id: int | None) -> OAuthGrant | None:
    """The grant a call on behalf of ``user_id`` uses: the shared one, or the member's own.
    ``user_id`` None on a per-member server: any member's (listings and UI resources are the
    same for everyone; only tool calls carry someone's data)."""
    grants = OAuthGrant.objects.filter(server=server)
    if server.auth_mode == AuthMode.OAUTH_SHARED:
        return grants.filter(user__isnull=True).first()
    if user_id is None:
        return grants.filter(user__isnull=False).order_by("-connected_at").first()
    return grants.filter(user_id=user_id).first()


def authorization_begin(
    *, server: McpServer, user: Any, shared: bool, state: str, listener: str
) -> OAuthAuthorization:
    """Remember a sign-in that is waiting for its callback (by the digest of its state)."""
    return OAuthAuthorization.objects.create(
        server=server,
        user=user,
        shared=shared,
        state_digest=hashlib.sha256(state.encode()).hexdigest(),
        listener=listener,
    )


def authorization_claim(*, state: str, user: Any, problem: str = "") -> OAuthAuthorization:
    """The callback's sign-in, marked used (once: a replayed state is refused). Refusals are
    audited and raise ``OAuthRefused``."""
    digest = hashlib.sha256((state or "").encode()).hexdigest()
    pending = OAuthAuthorization.objects.select_related("server").filter(state_digest=digest)
    found = pending.first()
    reason, message = "", ""
    if not state or found is None:
        reason, message = "unknown_state", "This sign-in link is unknown. Start again with Connect."
    elif found.used_at is not None:
        reason, message = "replayed_state", "This sign-in link was already used."
    elif found.user_id != getattr(user, "pk", None):
        reason, message = "other_user", "This sign-in was started by someone else."
    elif not pending.filter(used_at__isnull=True).update(used_at=timezone.now()):
        reason, message = "replayed_state", "This sign-in link was already used."
    if reason or found is None:
        _record_sign_in_problem(
            AuditEventType.OAUTH_CALLBACK_REJECTED,
            decision=Decision.DENIED,
            user=user,
            server_id=found.server_id if found else None,
            action="oauth_callback",
            reason=reason,
        )
        raise OAuthRefused(message, code=reason)
    return found


def grant_connect(
    *,
    server: McpServer,
    user: Any,
    shared: bool,
    client_info: dict[str, Any],
    tokens: dict[str, Any],
    expires_at: Any,
    revocation_endpoint: str = "",
) -> OAuthGrant:
    """Store a completed sign-in (registration and tokens together, replacing an older
    grant of the same owner) and audit it."""
    owner = None if shared else user
    with transaction.atomic():
        OAuthGrant.objects.filter(server=server, user=owner).delete()
        grant = OAuthGrant.objects.create(
            server=server,
            user=owner,
            connected_by=user,
            sealed_tokens=seal(tokens),
            sealed_client=seal(client_info),
            scope=str(tokens.get("scope") or "")[:500],
            revocation_endpoint=revocation_endpoint[:500],
            expires_at=expires_at,
        )
        record(
            event_type=AuditEventType.OAUTH_CONNECTED,
            decision=Decision.ALLOWED,
            actor_kind="user",
            actor_user_id=user.pk,
            server_id=server.pk,
            action="oauth_connect",
            extra={**_grant_owner(grant.user_id), "scope": grant.scope},
        )
    return grant


def grant_tokens_refreshed(*, grant_id: int, tokens: dict[str, Any], expires_at: Any) -> None:
    """New tokens from a refresh (no audit row: a refresh is not a decision)."""
    OAuthGrant.objects.filter(pk=grant_id).update(
        sealed_tokens=seal(tokens), expires_at=expires_at, refreshed_at=timezone.now()
    )


def grant_lapsed(*, grant_id: int, reason: str) -> None:
    """The server no longer accepts a grant (refresh refused, tokens revoked): forget it,
    so the owner is asked to connect again."""
    with transaction.atomic():
        grant = OAuthGrant.objects.filter(pk=grant_id).first()
        if grant is None:
            return
        grant.delete()
        record(
            event_type=AuditEventType.OAUTH_REFRESH_FAILED,
            decision=Decision.FAILED,
            actor_kind="system",
            server_id=grant.server_id,
            action="oauth_refresh",
            reason=reason[:200],
            extra=_grant_owner(grant.user_id),
        )


def grant_disconnect(*, grant: OAuthGrant, actor: Any = None, reason: str = "disconnected") -> None:
    """Delete a grant (its tokens go with it) and audit who did it and why; once that is
    committed, ask the provider to revoke the tokens (``mcp_bridge.revocation``)."""
    with transaction.atomic():
        owner = grant.user_id
        server_id = grant.server_id
        deleted, _ = OAuthGrant.objects.filter(pk=grant.pk).delete()
        tokens, client = unseal(grant.sealed_tokens), unseal(grant.sealed_client)
        if deleted and grant.revocation_endpoint and tokens and client:
            endpoint, label = grant.revocation_endpoint, f"server {server_id}"
            transaction.on_commit(lambda: revoke_later(endpoint, tokens, client, label))
        record(
            event_type=AuditEventType.OAUTH_DISCONNECTED,
            decision=Decision.ALLOWED,
            actor_kind="user" if actor else "system",
            actor_user_id=getattr(actor, "pk", None),
            server_id=server_id,
            action="oauth_disconnect",
            reason=reason,
            extra=_grant_owner(owner),
        )


def grant_disconnect_member(*, user_id: int, reason: str) -> int:
    """A member left: their own grants go (shared grants stay)."""
    grants = list(OAuthGrant.objects.filter(user_id=user_id))
    for grant in grants:
        grant_disconnect(grant=grant, reason=reason)
    return len(grants)


def grant_connect_failed(
    *, server: McpServer, user: Any, reason: str, message: str, refused: bool = False
) -> None:
    """Audit a sign-in that failed, or that Atrium refused (``refused``: denied)."""
    _record_sign_in_problem(
        AuditEventType.OAUTH_CONNECT_FAILED,
        decision=Decision.DENIED if refused else Decision.FAILED,
        user=user,
        server_id=server.pk,
        action="oauth_connect",
        reason=reason,
        extra={"message": message[:300]},
    )


def _record_sign_in_problem(
    event_type: AuditEventType,
    *,
    decision: Decision,
    user: Any,
    server_id: int | None,
    action: str,
    reason: str,
    extra: dict[str, Any] | None = None,
) -> None:
    """Audit a sign-in that was refused or failed, by the person signing in (committed on
    its own)."""
    with transaction.atomic():
        record(
            event_type=event_type,
            decision=decision,
            actor_kind="user",
            actor_user_id=getattr(user, "pk", None),
            server_id=server_id,
            action=action,
            reason=reason,
            extra=extra,
        )


def grant_record_call(
    *, server: McpServer, user_id: int | None, grant: OAuthGrant | None, tool_name: str
) -> None:
    """Which auth mode a tool call ran with and whose grant it used (or that it had none)."""
    with transaction.atomic():
        record(
            event_type=AuditEventType.OAUTH_CALL_AUTHORIZED
            if grant is not None
            else AuditEventType.OAUTH_AUTHORIZATION_REQUIRED,
            decision=Decision.ALLOWED if grant is not None else Decision.DENIED,
            actor_kind="user" if user_id else "system",
            actor_user_id=user_id,
            server_id=server.pk,
            tool_name=tool_name,
            action="oauth_call",
            reason="granted" if grant is not None else "not_connected",
            extra={
                "auth_mode": server.auth_mode,
                **_grant_owner(grant.user_id if grant else None),
                "grant_id": grant.pk if grant else None,
            },
        )


def grant_reseal_all() -> int:
    """Re-encrypt every grant with the newest key (after adding one; docs/oauth.md)."""
    count = 0
    for grant in OAuthGrant.objects.all():
        OAuthGrant.objects.filter(pk=grant.pk).update(
            sealed_tokens=reseal(grant.sealed_tokens), sealed_client=reseal(grant.sealed_client)
        )
        count += 1
    return count
