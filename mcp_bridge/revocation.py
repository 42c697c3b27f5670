"""Telling the provider a grant is gone (RFC 7009 token revocation), after the fact.

A disconnect deletes the grant first (that is what protects the data); this then asks the
authorization server, in a background thread, to revoke the refresh and access tokens, so
its session does not outlive the grant. Best effort: a provider that is down or refuses
is logged (without the token), never retried.
"""

from __future__ import annotations

import base64
import logging
import threading
from typing import Any
from urllib.parse import quote

import httpx2

log = logging.getLogger(__name__)
TIMEOUT_SECONDS = 10.0


def _request(
    endpoint: str, token: str, hint: str, client: dict[str, Any]
) -> tuple[dict[str, str], dict[str, str]]:
    data = {"token": token, "token_type_hint": hint, "client_id": client.get("client_id", "")}
    headers: dict[str, str] = {}
    secret = client.get("client_secret")
    if secret and client.get("token_endpoint_auth_method") == "client_secret_basic":
        pair = f"{quote(data['client_id'], safe='')}:{quote(secret, safe='')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    elif secret:
        data["client_secret"] = secret
    return data, headers


def revoke(endpoint: str, tokens: dict[str, Any], client: dict[str, Any], label: str) -> None:
    """Revoke the grant's tokens (refresh token first: most providers drop both)."""
    for hint in ("refresh_token", "access_token"):
        token = tokens.get(hint)
        if not token:
            continue
        data, headers = _request(endpoint, token, hint, client)
        try:
            response = httpx2.post(endpoint, data=data, headers=headers, timeout=TIMEOUT_SECONDS)
        except httpx2.HTTPError as exc:
            log.info("revoking a %s grant failed: %s", label, type(exc).__name__)
            return
        if response.status_code != 200:
            log.info("revoking a %s grant: HTTP %s", label, response.status_code)


def revoke_later(endpoint: str, tokens: dict[str, Any], client: dict[str, Any], label: str):
    """Start :func:`revoke` in a daemon thread; returns the thread (tests join it)."""
    thread = threading.Thread(
        target=revoke, args=(endpoint, tokens, client, label), name="oauth-revoke", daemon=True
    )
    thread.start()
    return thread
