"""State changes of OAuth sign-ins and grants: begin, claim, connect, refresh, disconnect.

Grants are sealed (mcp_bridge.sealing); audit rows carry who, which server and why, never a
token, a code or a client secret.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.db import transaction
from django.utils import timezone

from audit.types import AuditEventType, Decision
from audit.writer import record

from ..models import AuthMode, McpServer, OAuthAuthorization, OAuthGrant
from ..revocation import revoke_later
from ..sealing import reseal, seal, unseal


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


def grant_scope_step_up(*, grant_id: int, wanted_scope: str) -> None:
    """A server answered 403 insufficient_scope: keep the grant (it still serves what it
    was granted for), remember the scope the owner's next sign-in asks for, and audit it."""
    with transaction.atomic():
        grant = OAuthGrant.objects.select_for_update().filter(pk=grant_id).first()
        if grant is None:
            return
        grant.wanted_scope = wanted_scope[:500]
        grant.save(update_fields=["wanted_scope"])
        record(
            event_type=AuditEventType.OAUTH_SCOPE_STEP_UP,
            decision=Decision.DENIED,
            actor_kind="system",
            server_id=grant.server_id,
            action="oauth_call",
            reason="insufficient_scope",
            extra={
                **_grant_owner(grant.user_id),
                "granted_scope": grant.scope,
                "wanted_scope": grant.wanted_scope,
            },
        )


def machine_token_failed(*, server: McpServer, reason: str) -> None:
    """A machine-to-machine server's authorization server refused its client credentials."""
    with transaction.atomic():
        record(
            event_type=AuditEventType.OAUTH_MACHINE_TOKEN_FAILED,
            decision=Decision.FAILED,
            actor_kind="system",
            server_id=server.pk,
            action="oauth_client_credentials",
            reason=reason[:200],
            extra={"auth_mode": server.auth_mode},
        )


def grant_call_needs_sign_in(
    *, server: McpServer, user_id: int | None, tool_name: str, reason: str
) -> None:
    """A tool call ended asking for a sign-in: the server answered 401 to a call made
    without a grant (``server_asked_for_sign_in``), or refused the grant it carried."""
    with transaction.atomic():
        record(
            event_type=AuditEventType.OAUTH_AUTHORIZATION_REQUIRED,
            decision=Decision.DENIED,
            actor_kind="user" if user_id else "system",
            actor_user_id=user_id,
            server_id=server.pk,
            tool_name=tool_name,
            action="oauth_call",
            reason=reason[:200],
            extra={"auth_mode": server.auth_mode},
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
    *,
    server: McpServer,
    user_id: int | None,
    grant: OAuthGrant | None,
    tool_name: str,
    unsigned: bool = False,
) -> None:
    """Which auth mode a tool call ran with and whose grant it used (or that it had none).
    ``unsigned``: no grant, and the call is tried without one (the server may answer it)."""
    if grant is not None:
        event, decision, reason = AuditEventType.OAUTH_CALL_AUTHORIZED, Decision.ALLOWED, "granted"
    elif unsigned:
        event, decision = AuditEventType.OAUTH_CALL_WITHOUT_GRANT, Decision.ALLOWED
        reason = "not_connected_tried_without"
    else:
        event, decision = AuditEventType.OAUTH_AUTHORIZATION_REQUIRED, Decision.DENIED
        reason = "not_connected"
    with transaction.atomic():
        record(
            event_type=event,
            decision=decision,
            actor_kind="user" if user_id else "system",
            actor_user_id=user_id,
            server_id=server.pk,
            tool_name=tool_name,
            action="oauth_call",
            reason=reason,
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
