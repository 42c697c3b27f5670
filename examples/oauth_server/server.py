"""Notes behind a sign-in: an OAuth 2.1 authorization server and a protected MCP server.

Built with the ``mcp`` SDK's server auth support (``OAuthAuthorizationServerProvider``,
``AuthSettings``): protected resource metadata, authorization server metadata, dynamic
client registration, PKCE, refresh-token rotation and revocation, all in memory, on one
loopback origin. Two accounts (Alice and Bob) each have their own notes, so a client that
signs in per member can show that everyone sees their own data.

    python examples/oauth_server/server.py --port 8105        # http://127.0.0.1:8105/mcp

Options for tests: ``--access-ttl``/``--refresh-ttl`` (seconds), ``--refuse-registration``,
``--no-metadata`` (a 401 with no metadata anywhere), ``--other-resource`` (the protected
resource metadata names another resource). ``POST /_control/revoke?account=alice`` revokes
an account's tokens and ``POST /_control/expire-refresh`` ages every refresh token out;
``GET /_control/stats`` counts token grants. Tokens start with ``TOKEN_PREFIX`` so a test
can grep for them. Loopback only: the control routes have no authentication.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import secrets
import time
from dataclasses import dataclass, field
from typing import Final

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    RegistrationError,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

DEFAULT_HTTP_PORT: Final = 8105
TOKEN_PREFIX: Final = "atrium-oauth-sentinel-"
SCOPE: Final = "notes"
ACCOUNTS: Final = {
    "alice": ("Alice", ["Ship the OAuth card", "Water the ficus"]),
    "bob": ("Bob", ["Review Alice's pull request"]),
}


def _token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(24)


@dataclass
class _Pending:
    client_id: str
    params: AuthorizationParams


@dataclass
class NotesAuthority:
    """The in-memory authorization server (the SDK calls these methods)."""

    access_ttl: int = 3600
    refresh_ttl: int = 86400
    refuse_registration: bool = False
    clients: dict[str, OAuthClientInformationFull] = field(default_factory=dict)
    pending: dict[str, _Pending] = field(default_factory=dict)
    codes: dict[str, AuthorizationCode] = field(default_factory=dict)
    access: dict[str, AccessToken] = field(default_factory=dict)
    refresh: dict[str, RefreshToken] = field(default_factory=dict)
    stats: dict[str, int] = field(
        default_factory=lambda: {"authorization_code": 0, "refresh_token": 0, "registrations": 0}
    )
    base_url: str = ""

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        if self.refuse_registration:
            raise RegistrationError("invalid_client_metadata", "Registration is closed here.")
        self.stats["registrations"] += 1
        self.clients[client_info.client_id or ""] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        request_id = secrets.token_urlsafe(16)
        self.pending[request_id] = _Pending(client.client_id or "", params)
        return f"{self.base_url}/consent?request={request_id}"

    def grant(self, request_id: str, account: str) -> str:
        """The consent page's answer: a one-time code for the client's redirect URI."""
        pending = self.pending.pop(request_id, None)
        if pending is None or account not in ACCOUNTS:
            raise AuthorizeError("invalid_request", "Unknown or finished sign-in request.")
        code = secrets.token_urlsafe(32)
        params = pending.params
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [SCOPE],
            expires_at=time.time() + 300,
            client_id=pending.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject=account,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    def deny(self, request_id: str) -> str:
        pending = self.pending.pop(request_id, None)
        if pending is None:
            raise AuthorizeError("invalid_request", "Unknown or finished sign-in request.")
        return construct_redirect_uri(
            str(pending.params.redirect_uri), error="access_denied", state=pending.params.state
        )

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        code = self.codes.get(authorization_code)
        return code if code is not None and code.client_id == client.client_id else None

    def _issue(self, client_id: str, scopes: list[str], resource: str | None, subject: str | None):
        access = _token()
        refresh = _token()
        now = int(time.time())
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=now + self.access_ttl,
            resource=resource,
            subject=subject,
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh,
            client_id=client_id,
            scopes=scopes,
            expires_at=now + self.refresh_ttl,
            resource=resource,
            subject=subject,
        )
        return OAuthToken(
            access_token=access,
            expires_in=self.access_ttl,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        # One use only: a replayed code finds nothing.
        if self.codes.pop(authorization_code.code, None) is None:
            raise TokenError("invalid_grant", "This authorization code was already used.")
        self.stats["authorization_code"] += 1
        return self._issue(
            client.client_id or "",
            authorization_code.scopes,
            authorization_code.resource,
            authorization_code.subject,
        )

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        token = self.refresh.get(refresh_token)
        if token is None or token.client_id != client.client_id:
            return None
        if token.expires_at is not None and token.expires_at < time.time():
            return None
        return token

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)  # rotated
        self.stats["refresh_token"] += 1
        return self._issue(
            client.client_id or "",
            scopes or refresh_token.scopes,
            refresh_token.resource,
            refresh_token.subject,
        )

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        """RFC 7009: this client's tokens for this account go, access and refresh alike."""
        for store in (self.access, self.refresh):
            for value, found in list(store.items()):
                if found.subject == token.subject and found.client_id == token.client_id:
                    del store[value]

    def live_tokens(self) -> dict[str, int]:
        counts = dict.fromkeys(ACCOUNTS, 0)
        for found in [*self.access.values(), *self.refresh.values()]:
            counts[found.subject or ""] = counts.get(found.subject or "", 0) + 1
        return counts

    def revoke_account(self, subject: str | None) -> int:
        gone = [t for t, v in self.access.items() if v.subject == subject]
        gone += [t for t, v in self.refresh.items() if v.subject == subject]
        for token in gone:
            self.access.pop(token, None)
            self.refresh.pop(token, None)
        return len(gone)


_CONSENT_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Sign in to Notes</title><style>
body{{font-family:system-ui,sans-serif;background:#f4f5f7;color:#1d2330;display:grid;
place-items:center;min-height:100vh;margin:0}}
main{{background:#fff;border-radius:12px;padding:28px 32px;box-shadow:0 2px 12px #0002;
max-width:380px}}
h1{{font-size:1.25rem;margin:0 0 8px}} p{{color:#4b5563;margin:0 0 18px}}
button{{display:block;width:100%;margin:8px 0;padding:10px;border-radius:8px;border:0;
font-size:1rem;cursor:pointer;background:#2563eb;color:#fff}}
button.deny{{background:#e5e7eb;color:#1d2330}}
</style></head><body><main><h1>Notes would like access</h1>
<p><strong>{client}</strong> asks to read your notes. Sign in as:</p>
<form method="post" action="/consent"><input type="hidden" name="request" value="{request}">
<button name="account" value="alice">Allow as Alice</button>
<button name="account" value="bob">Allow as Bob</button>
<button class="deny" name="deny" value="1">Deny</button></form></main></body></html>"""


def build_app(
    *,
    port: int,
    access_ttl: int = 3600,
    refresh_ttl: int = 86400,
    refuse_registration: bool = False,
    other_resource: bool = False,
) -> tuple[Starlette, NotesAuthority]:
    base = f"http://127.0.0.1:{port}"
    authority = NotesAuthority(
        access_ttl=access_ttl,
        refresh_ttl=refresh_ttl,
        refuse_registration=refuse_registration,
        base_url=base,
    )
    resource = f"{base}/elsewhere" if other_resource else f"{base}/mcp"
    mcp = MCPServer(
        name="Notes",
        instructions="Each signed-in person's own notes.",
        auth_server_provider=authority,
        auth=AuthSettings(
            issuer_url=base,
            resource_server_url=resource,
            validate_token_resource=True,
            required_scopes=[SCOPE],
            client_registration_options=ClientRegistrationOptions(
                enabled=True, valid_scopes=[SCOPE], default_scopes=[SCOPE]
            ),
            revocation_options=RevocationOptions(enabled=True),
        ),
    )

    @mcp.tool()
    def my_notes() -> str:
        """The signed-in person's notes."""
        token = get_access_token()
        account = token.subject if token is not None else None
        name, notes = ACCOUNTS.get(account or "", ("nobody", []))
        return f"Notes of {name}: " + "; ".join(notes)

    @mcp.custom_route("/consent", methods=["GET", "POST"])
    async def consent(request: Request) -> Response:
        if request.method == "GET":
            request_id = request.query_params.get("request", "")
            pending = authority.pending.get(request_id)
            if pending is None:
                return HTMLResponse("Unknown or finished sign-in request.", status_code=400)
            client = authority.clients.get(pending.client_id)
            name = (client.client_name if client else None) or pending.client_id
            page = _CONSENT_PAGE.format(client=html.escape(name), request=html.escape(request_id))
            return HTMLResponse(page)
        form = await request.form()
        try:
            if form.get("deny"):
                target = authority.deny(str(form.get("request", "")))
            else:
                target = authority.grant(str(form.get("request", "")), str(form.get("account")))
        except AuthorizeError as exc:
            return HTMLResponse(exc.error_description or exc.error, status_code=400)
        return RedirectResponse(target, status_code=302)

    @mcp.custom_route("/_control/revoke", methods=["POST"])
    async def control_revoke(request: Request) -> Response:
        return JSONResponse({"revoked": authority.revoke_account(request.query_params["account"])})

    @mcp.custom_route("/_control/expire-refresh", methods=["POST"])
    async def control_expire_refresh(request: Request) -> Response:
        for token in authority.refresh.values():
            token.expires_at = 0
        return JSONResponse({"expired": len(authority.refresh)})

    @mcp.custom_route("/_control/stats", methods=["GET"])
    async def control_stats(request: Request) -> Response:
        return JSONResponse({**authority.stats, "live": authority.live_tokens()})

    return mcp.streamable_http_app(host="127.0.0.1"), authority


def build_app_without_metadata() -> Starlette:
    """An MCP endpoint that wants a bearer token but says nowhere how to get one."""

    async def refuse(request: Request) -> Response:
        return Response(status_code=401, headers={"WWW-Authenticate": "Bearer"})

    async def missing(request: Request) -> Response:
        return Response("Not found", status_code=404)

    return Starlette(
        routes=[
            Route("/mcp", refuse, methods=["GET", "POST", "DELETE"]),
            Route("/{path:path}", missing, methods=["GET", "POST"]),
        ]
    )


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description="Notes behind an OAuth sign-in.")
    parser.add_argument("--port", type=int, default=DEFAULT_HTTP_PORT)
    parser.add_argument("--access-ttl", type=int, default=3600)
    parser.add_argument("--refresh-ttl", type=int, default=86400)
    parser.add_argument("--refuse-registration", action="store_true")
    parser.add_argument("--no-metadata", action="store_true")
    parser.add_argument("--other-resource", action="store_true")
    args = parser.parse_args(argv)
    if args.no_metadata:
        app = build_app_without_metadata()
    else:
        app, _ = build_app(
            port=args.port,
            access_ttl=args.access_ttl,
            refresh_ttl=args.refresh_ttl,
            refuse_registration=args.refuse_registration,
            other_resource=args.other_resource,
        )
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: uvicorn already shut down
        uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
