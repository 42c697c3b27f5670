"""Admitting an app view's request: the person's session and membership, re-read, and the
view its token names (docs/view-bridge.md). It runs first in the request's first trip to
the database thread — for a ``tools/call``, in the decision's own trip."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chat.app_view_bridge import view_of, view_reads
from chat.calls.requests import ViewAdmission
from chat.models import Membership, ToolCall
from chat.selectors import membership_of, membership_read
from chat.services.app_views import app_view_token_rejected
from lean_rows import Part, select_together

# The JSON-RPC error codes a view's refused request is answered with.
JSONRPC_INVALID_PARAMS = -32602
POLICY_DENIED = -32003
RATE_LIMITED = -32029  # server-defined: too many requests


class SessionGone(Exception):
    """The member left the workspace, or the session or account changed: the socket ends."""


class ViewRefused(Exception):
    """A view's request refused; ``audited``: its audit row is written already."""

    def __init__(
        self,
        code: str,
        message: str,
        jsonrpc_code: int = POLICY_DENIED,
        *,
        audited: bool = False,
        details: Any = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.jsonrpc_code = jsonrpc_code
        self.audited = audited
        self.details = details


@dataclass(frozen=True)
class AdmittedView:
    """The member's membership as just read, the view the request is from, and the rows
    of the request's own reads (``view_admit``'s ``also``), in their order."""

    membership: Membership
    view: ToolCall
    also: tuple[list[Any], ...] = ()


def token_is_this_sockets(admission: ViewAdmission) -> bool:
    """The token's signature held and it names this socket's person and thread (no
    database: whether its view still exists is read with the request)."""
    claims = admission.claims
    return (
        claims is not None
        and claims.user_id == admission.user.pk
        and claims.thread_id == admission.thread.pk
    )


def view_admit(admission: ViewAdmission, *, also: Sequence[Part] = ()) -> AdmittedView:
    """The member's session and membership (re-read) and the view the token names: what
    every view request checks first, in one statement. ``also``: the request's own reads
    (``lean_rows.Part``), run in that statement when the token holds — one round trip
    instead of two (a ``tools/call`` reads its authority so). Raises ``SessionGone`` or
    ``ViewRefused``."""
    claims = admission.claims
    token_ok = claims is not None and token_is_this_sockets(admission)
    reads = [membership_read(membership_id=admission.membership_id, pin=admission.pin)]
    if claims is not None and token_ok:
        reads.extend(view_reads(claims))
        reads.extend(also)
    found = select_together(*reads)
    membership = membership_of(found[0], admission.pin)
    if membership is None:
        raise SessionGone()
    if claims is None or not token_ok:
        app_view_token_rejected(
            user=admission.user,
            thread=admission.thread,
            reason="invalid_token" if claims is None else "token_not_for_this_thread_or_user",
        )
        raise ViewRefused(
            "invalid_token",
            "This view's token is invalid or expired; reload the view.",
            audited=True,
        )
    view = view_of(found[1], found[2], admission.thread.pk)
    if view is None or view.server_id != claims.server_id:
        raise ViewRefused("invalid_token", "This view no longer exists.")
    return AdmittedView(membership=membership, view=view, also=tuple(found[3:]))
