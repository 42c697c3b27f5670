"""Signing Atrium in to MCP servers: the ``mcp`` SDK's ``OAuthClientProvider`` (discovery,
dynamic client registration, PKCE, refresh) on Django storage.

Two uses of the provider:

* **Connecting** (:func:`start_connect`): a flow task sends one request to the server; the
  SDK meets the 401, discovers the metadata, registers, and hands us the authorization URL
  (the person's browser goes there). The SDK then waits for the callback: the callback view
  (:func:`deliver_callback`, any process) passes the code and state on through the channel
  layer; the SDK checks the state, exchanges the code with its PKCE verifier (which never
  leaves this memory) and gives us the tokens. Registration and tokens are stored together,
  only then (nothing half-stored when a step fails).
* **Calling** (:func:`spec_with_grant`): a connection spec per grant whose provider carries
  the stored tokens, refreshes them before they expire (stored again, sealed), and when the
  server no longer accepts the grant forgets it (audited) and fails the request with
  ``AuthorizationRequired`` — never an interactive sign-in in the middle of a call.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
import os
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlencode, urlparse

import httpx2
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connections
from mcp.client.auth import (
    AuthorizationCodeResult,
    OAuthClientProvider,
    OAuthFlowError,
    OAuthRegistrationError,
    OAuthTokenError,
)
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.utils import (
    extract_field_from_www_auth,
    is_valid_client_metadata_url,
    union_scopes,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from .egress import EgressRefused, GuardedTransport
from .errors import AuthorizationRequired
from .models import OAUTH_MODES, McpServer, OAuthGrant, TokenAuthMethod
from .sealing import unseal
from .server_spec import ServerSpec
from .services.oauth_grants import (
    OAuthRefused,
    authorization_begin,
    authorization_claim,
    grant_connect,
    grant_connect_failed,
    grant_lapsed,
    grant_scope_step_up,
    grant_tokens_refreshed,
    machine_token_failed,
)
from .services.servers import spec_for

log = logging.getLogger(__name__)
_T = TypeVar("_T")

CALLBACK_PATH = "/oauth/callback/"
# Refresh this long before the access token expires, so a request never carries a token
# that expires on the way.
REFRESH_MARGIN_SECONDS = 5
# How long a started sign-in waits for its callback, and the callback for the outcome.
FLOW_TIMEOUT_SECONDS = 600
CALLBACK_WAIT_SECONDS = 45

_flows: set[asyncio.Task[Any]] = set()


class _FlowLoop:
    """One event loop per process, in a daemon thread, that runs every sign-in flow.

    A flow outlives the request that starts it (it waits for the callback), and an async
    view behind sync middleware runs on a short-lived loop of its own; so flows, and the
    channel-layer messages between them and the callback, all live on this loop. Its
    database work runs in plain worker threads, never on the request thread that may be
    waiting for it."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None
    _pid: int | None = None

    @classmethod
    def get(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None or cls._pid != os.getpid():
                loop = asyncio.new_event_loop()
                threading.Thread(
                    target=loop.run_forever, name="atrium-oauth-flows", daemon=True
                ).start()
                cls._loop, cls._pid = loop, os.getpid()
            return cls._loop


async def on_flow_loop(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` on the flow loop and await its result from any loop."""
    future = asyncio.run_coroutine_threadsafe(coro, _FlowLoop.get())
    return await asyncio.wrap_future(future)


def _db(fn: Callable[..., _T]) -> Callable[..., Awaitable[_T]]:
    """``fn`` run in a worker thread with its own database connection (the flow loop's)."""

    async def run(**kwargs: Any) -> _T:
        def call() -> _T:
            try:
                return fn(**kwargs)
            finally:
                # A worker thread of the default pool: no connection is kept in it.
                connections.close_all()

        return await asyncio.to_thread(call)

    return run


def callback_url() -> str:
    return settings.ATRIUM_APP_ORIGIN + CALLBACK_PATH


CLIENT_METADATA_PATH = "/oauth/client-metadata.json"


def client_metadata() -> OAuthClientMetadata:
    return OAuthClientMetadata(
        redirect_uris=[callback_url()],
        client_name="Atrium",
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        application_type="web",
    )


def client_metadata_url() -> str | None:
    """Atrium's client ID metadata document URL (its client id where an authorization server
    supports them), or None when Atrium is not served over https (the document must be)."""
    url = getattr(settings, "ATRIUM_OAUTH_CLIENT_METADATA_URL", "") or (
        settings.ATRIUM_APP_ORIGIN + CLIENT_METADATA_PATH
    )
    return url if is_valid_client_metadata_url(url) else None


def client_metadata_document() -> dict[str, Any] | None:
    """The document served at :func:`client_metadata_url` (``views.client_metadata``)."""
    url = client_metadata_url()
    if url is None:
        return None
    document = client_metadata().model_dump(mode="json", exclude_none=True)
    document.pop("scope", None)
    return {
        "client_id": url,
        **document,
        "client_uri": settings.ATRIUM_APP_ORIGIN,
        "token_endpoint_auth_method": "none",
    }


def preregistered_client(server: McpServer) -> OAuthClientInformationFull | None:
    """The client a superuser registered for ``server`` ahead of time, if any."""
    entered = server.oauth_client or {}
    client_id = str(entered.get("client_id") or "").strip()
    if not client_id:
        return None
    secret = str(entered.get("client_secret") or "") or None
    method = server.oauth_token_auth or ("client_secret_basic" if secret else "none")
    if method == TokenAuthMethod.PRIVATE_KEY_JWT:
        method = "none"  # a private key signs client-credential requests only
    return OAuthClientInformationFull(
        client_id=client_id,
        client_secret=secret,
        redirect_uris=[callback_url()],  # type: ignore[list-item]
        token_endpoint_auth_method=method,  # type: ignore[arg-type]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )


def _expires_at(tokens: OAuthToken) -> datetime | None:
    if tokens.expires_in is None:
        return None
    return datetime.now(UTC) + timedelta(seconds=int(tokens.expires_in))


class _Provider(OAuthClientProvider):
    """The SDK's provider, told when stored tokens expire.

    The SDK learns a token's lifetime only from a token response; tokens loaded from
    storage would count as valid until the server refuses them (then it asks for a new
    sign-in instead of refreshing). We set the expiry it would have computed."""

    def __init__(self, *args: Any, expires_at: datetime | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stored_expiry = expires_at
        self.grant_id: int | None = None

    async def _initialize(self) -> None:
        await super()._initialize()
        if self.context.current_tokens is not None and self._stored_expiry is not None:
            self.context.token_expiry_time = (
                self._stored_expiry.timestamp() - REFRESH_MARGIN_SECONDS
            )

    step_up: bool = False  # the request at hand was answered 403 insufficient_scope
    sign_in_anyway: bool = False  # connecting: a request the server answered is no reason to stop
    answered_without_sign_in: bool = False

    async def _auth_flow(self, request: httpx2.Request):  # type: ignore[override]
        """The SDK's flow, watched: was the request refused for want of scope (a step-up),
        and, when connecting to a server whose plain requests are answered (only some
        tools are protected), its answer taken as the 401 that starts a sign-in (the SDK
        then finds how to sign in from the server's protected resource metadata)."""
        flow = super()._auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                if outgoing is request:
                    self.step_up = response.status_code == 403 and (
                        extract_field_from_www_auth(response, "error") == "insufficient_scope"
                    )
                    if (
                        self.sign_in_anyway
                        and not self.answered_without_sign_in
                        and response.status_code not in (401, 403)
                    ):
                        self.answered_without_sign_in = True
                        await response.aread()
                        response = httpx2.Response(401, request=request)
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()

    def refresh_early(self, lifetime: int | None) -> None:
        """Count fresh tokens as due a little before they expire (at most half their
        lifetime early, so a short-lived token is still used for the request at hand)."""
        expiry = self.context.token_expiry_time
        if expiry is not None and lifetime:
            self.context.token_expiry_time = expiry - min(REFRESH_MARGIN_SECONDS, lifetime / 2)


# ----------------------------------------------------------------------- calls


class _GrantStorage:
    """``TokenStorage`` of one stored grant (the SDK reads it once per connection)."""

    def __init__(self, grant: OAuthGrant, server: McpServer) -> None:
        self.grant_id = grant.pk
        self._tokens = unseal(grant.sealed_tokens)
        self._client = unseal(grant.sealed_client)
        preregistered = preregistered_client(server)
        if preregistered is not None:  # the superuser's current entry (a changed secret)
            self._client = preregistered.model_dump(mode="json", exclude_none=True)
        self.provider: _Provider | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return OAuthToken.model_validate(self._tokens) if self._tokens else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._tokens = tokens.model_dump(mode="json", exclude_none=True)
        if self.provider is not None:
            self.provider.refresh_early(tokens.expires_in)
        await _db(grant_tokens_refreshed)(
            grant_id=self.grant_id, tokens=self._tokens, expires_at=_expires_at(tokens)
        )

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return OAuthClientInformationFull.model_validate(self._client) if self._client else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        # Only a changed authorization server re-registers mid-call; the sign-in that
        # follows is refused below, and the grant forgotten.
        self._client = client_info.model_dump(mode="json", exclude_none=True)


def spec_with_grant(server: McpServer, grant: OAuthGrant) -> ServerSpec:
    """The server's connection spec signed in with ``grant`` (one connection per grant)."""
    base = spec_for(server)
    storage = _GrantStorage(grant, server)
    shared = grant.user_id is None

    async def no_interactive_sign_in(url: str) -> None:
        if provider.step_up:
            # More scope for this request: the grant stays (it still serves the rest), the
            # person is asked to grant the union the SDK computed.
            wanted = (parse_qs(urlparse(url).query).get("scope") or [""])[0]
            _step_ups[grant.pk] = wanted
            await _db(grant_scope_step_up)(grant_id=grant.pk, wanted_scope=wanted)
            raise AuthorizationRequired(
                server.name, slug=server.slug, shared=shared, reason="insufficient_scope"
            )
        _lost_grants.add(grant.pk)
        reason = (
            "the server refused the refreshed token"
            if grant_refreshed(provider)
            else "the server refused the stored token and it could not be refreshed"
        )
        await _db(grant_lapsed)(grant_id=grant.pk, reason=reason)
        raise AuthorizationRequired(server.name, slug=server.slug, shared=shared)

    async def no_callback() -> AuthorizationCodeResult:  # never reached: the redirect raises
        raise AuthorizationRequired(server.name, slug=server.slug, shared=shared)

    provider = _Provider(
        server_url=server.url,
        client_metadata=client_metadata(),
        storage=storage,
        redirect_handler=no_interactive_sign_in,
        callback_handler=no_callback,
        expires_at=grant.expires_at,
    )
    storage.provider = provider
    provider.grant_id = grant.pk
    _, _, config_hash = base.key.partition(":")
    return dataclasses.replace(base, key=f"{server.slug}~g{grant.pk}:{config_hash}", auth=provider)


# Grants a server refused (and that were forgotten): a request that failed on one of them
# failed for want of a sign-in. The connection's provider may be another spec's than the
# caller's (one connection per grant), hence by grant id.
_lost_grants: set[int] = set()


def lost_authorization(spec: ServerSpec) -> bool:
    """Whether a failed request failed because the server refused the spec's grant."""
    return isinstance(spec.auth, _Provider) and spec.auth.grant_id in _lost_grants


# Grants a server found too narrow for a request (403 insufficient_scope): the scope the
# next sign-in asks for, read once by the caller whose request failed.
_step_ups: dict[int, str] = {}


def step_up_scope(spec: ServerSpec) -> str | None:
    """The scope a failed request needs when it failed for want of scope (else None)."""
    if not isinstance(spec.auth, _Provider) or spec.auth.grant_id is None:
        return None
    return _step_ups.pop(spec.auth.grant_id, None)


def grant_refreshed(provider: _Provider) -> bool:
    return bool(provider.context.current_tokens and provider.context.can_refresh_token())


# ----------------------------------------------------------------------- machine to machine


class _MachineStorage:
    """Tokens of a machine-to-machine server, in this process only (fetched again with the
    server's credentials whenever needed: nothing a person granted is lost)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        return None


_machine_storage: dict[tuple[int, str], _MachineStorage] = {}


class _MachineFailure:
    """Audits a refused client-credentials token request (its true reason), then lets the
    SDK raise as it does."""

    server: McpServer

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        if response.status_code not in (200, 201):
            body = (await response.aread())[:2000]
            try:
                error = str(httpx2.Response(200, content=body).json().get("error") or "")
            except ValueError:
                error = ""
            await _db(machine_token_failed)(
                server=self.server,
                reason=f"token endpoint answered {response.status_code}"
                + (f" ({error[:80]})" if error else ""),
            )
        await super()._handle_token_response(response)  # type: ignore[misc]


class _ClientSecretProvider(_MachineFailure, ClientCredentialsOAuthProvider):
    pass


class _PrivateKeyProvider(_MachineFailure, PrivateKeyJWTOAuthProvider):
    pass


def machine_spec(server: McpServer) -> ServerSpec:
    """``server``'s spec signed in with its own client credentials (``client_credentials``
    grant, a client secret or a private-key JWT; the SDK's providers)."""
    base = spec_for(server)
    entered = server.oauth_client or {}
    client_id = str(entered.get("client_id") or "")
    if not client_id:
        raise AuthorizationRequired(
            server.name, slug=server.slug, shared=True, reason="no_client_credentials"
        )
    _, _, config_hash = base.key.partition(":")
    storage = _machine_storage.setdefault((server.pk, config_hash), _MachineStorage())
    issuer = server.oauth_issuer or None
    scope = server.oauth_scope or None
    provider: OAuthClientProvider
    with warnings.catch_warnings():
        # Without an issuer the SDK warns (required in its 3.0): the server's discovery
        # decides, inside the egress guard.
        warnings.simplefilter("ignore")
        if entered.get("private_key"):
            assertion = SignedJWTParameters(
                issuer=client_id,
                subject=client_id,
                signing_key=str(entered["private_key"]),
                signing_algorithm=str(entered.get("signing_algorithm") or "RS256"),
            ).create_assertion_provider()
            provider = _PrivateKeyProvider(
                server_url=server.url,
                storage=storage,
                client_id=client_id,
                assertion_provider=assertion,
                scope=scope,
                issuer=issuer,
            )
        else:
            method = server.oauth_token_auth
            provider = _ClientSecretProvider(
                server_url=server.url,
                storage=storage,
                client_id=client_id,
                client_secret=str(entered.get("client_secret") or ""),
                token_endpoint_auth_method="client_secret_post"
                if method == TokenAuthMethod.POST
                else "client_secret_basic",
                scope=scope,
                issuer=issuer,
            )
    provider.server = server  # type: ignore[attr-defined]
    return dataclasses.replace(base, key=f"{server.slug}~m:{config_hash}", auth=provider)


# ----------------------------------------------------------------------- no grant yet


class _Unsigned(httpx2.Auth):
    """Requests to an OAuth server nobody signed in to yet, sent without credentials (a
    server may list its tools, and answer some, to anyone). A 401 is remembered: the
    request failed for want of a sign-in (sign-in on demand)."""

    def __init__(self, key: str) -> None:
        self.key = key  # the connection's (one connection per key: its first spec's auth)

    async def async_auth_flow(self, request: httpx2.Request):  # type: ignore[override]
        response = yield request
        if response.status_code == 401:
            _challenged.add(self.key)


_challenged: set[str] = set()


def unsigned_spec(server: McpServer) -> ServerSpec:
    """``server``'s spec without a grant (its own connection, never a grant's)."""
    base = spec_for(server)
    _, _, config_hash = base.key.partition(":")
    key = f"{server.slug}~anon:{config_hash}"
    return dataclasses.replace(base, key=key, auth=_Unsigned(key))


def asked_for_sign_in(spec: ServerSpec) -> bool:
    """Whether a request without a grant failed because the server answered 401 (read
    once by the caller whose request failed)."""
    if not isinstance(spec.auth, _Unsigned) or spec.key not in _challenged:
        return False
    _challenged.discard(spec.key)
    return True


# ----------------------------------------------------------------------- connecting


class ConnectFailed(Exception):
    """A sign-in could not start or finish; ``str()`` is for the person (no secrets)."""


class _PendingStorage:
    """Holds the registration and tokens of a sign-in in memory; both are stored together
    once the tokens arrive."""

    def __init__(self, server: McpServer, user: Any, shared: bool) -> None:
        self.server, self.user, self.shared = server, user, shared
        self.client: dict[str, Any] | None = None
        self.grant: OAuthGrant | None = None
        self.provider: _Provider | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        if self.client is None:
            raise OAuthFlowError("tokens arrived before a client registration")
        metadata = self.provider.context.oauth_metadata if self.provider else None
        revocation = metadata.revocation_endpoint if metadata is not None else None
        self.grant = await _db(grant_connect)(
            server=self.server,
            user=self.user,
            shared=self.shared,
            client_info=self.client,
            tokens=tokens.model_dump(mode="json", exclude_none=True),
            expires_at=_expires_at(tokens),
            revocation_endpoint=str(revocation or ""),
        )

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return OAuthClientInformationFull.model_validate(self.client) if self.client else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info.model_dump(mode="json", exclude_none=True)


def _explain(
    exc: BaseException, server: McpServer, provider: _Provider | None = None
) -> tuple[str, str]:
    """(audit reason, message for the person) of a failed sign-in. Never the raw response
    body of a token endpoint: it may echo what we sent."""
    name = server.name
    context = provider.context if provider is not None else None
    if isinstance(exc, EgressRefused):
        return "private_address", (
            f"{name}'s sign-in sends Atrium to {exc.origin}, a private or local network "
            "address. Atrium does not connect there unless an administrator allows that "
            "origin (ATRIUM_OAUTH_ALLOWED_PRIVATE_ORIGINS)."
        )
    nothing_found = (
        context is not None
        and context.protected_resource_metadata is None
        and context.oauth_metadata is None
    )
    if isinstance(exc, _NoSignIn) or (
        nothing_found and provider is not None and provider.answered_without_sign_in
    ):
        return "no_oauth", f"{name} did not ask for a sign-in and publishes no way to sign in."
    if isinstance(exc, OAuthFlowError) and not isinstance(
        exc, OAuthRegistrationError | OAuthTokenError
    ):
        text = str(exc)
        if "does not match" in text:
            return "wrong_resource", f"{name} offers sign-in for another resource than its URL."
        if "State parameter mismatch" in text:
            return "state_mismatch", "The sign-in answer did not match this sign-in."
        if "issuer" in text.lower():
            return "wrong_issuer", f"{name}'s authorization server names another issuer."
        if "metadata request failed" in text:
            return "metadata_unavailable", f"{name}'s sign-in information could not be read."
    if nothing_found and isinstance(exc, OAuthFlowError):
        # Neither protected resource nor authorization server metadata: the SDK's guessed
        # default endpoints (/register, /token) failed.
        return "no_metadata", f"{name} asks for a sign-in but does not publish how to sign in."
    if isinstance(exc, OAuthRegistrationError):
        return "registration_refused", f"{name} refused to register Atrium as a client."
    if isinstance(exc, OAuthTokenError):
        return "token_refused", f"{name} did not accept the sign-in (the code was refused)."
    if isinstance(exc, OAuthFlowError):
        return "flow_error", f"Signing in to {name} failed."
    if isinstance(exc, _Denied):
        return "denied", f"The sign-in to {name} was cancelled or denied."
    if isinstance(exc, httpx2.HTTPError | OSError):
        return "unreachable", f"Could not reach {name} to sign in."
    if isinstance(exc, TimeoutError):
        return "timeout", f"The sign-in to {name} was not finished in time."
    return "flow_error", f"Signing in to {name} failed."


class _NoSignIn(Exception):
    pass


class _Denied(Exception):
    pass


async def start_connect(*, server: McpServer, user: Any, shared: bool) -> str:
    """Start a sign-in; returns the authorization URL the person's browser opens.

    Raises ``ConnectFailed`` (audited) when discovery or registration fails first."""
    return await on_flow_loop(_start_connect(server=server, user=user, shared=shared))


async def _start_connect(*, server: McpServer, user: Any, shared: bool) -> str:
    if server.auth_mode not in OAUTH_MODES:
        raise ConnectFailed(f"{server.name} does not use OAuth sign-in.")
    layer = get_channel_layer()
    listener = await layer.new_channel("oauth.")
    loop = asyncio.get_running_loop()
    authorize_url: asyncio.Future[str] = loop.create_future()
    storage = _PendingStorage(server, user, shared)
    wanted = await _db(_step_up_of)(server=server, user=user, shared=shared, storage=storage)

    async def redirect_handler(url: str) -> None:
        if wanted:
            # A step-up: ask for what the grant has plus what the server asked for.
            url = _with_scope(url, wanted)
            provider.context.client_metadata.scope = wanted
        state = (parse_qs(urlparse(url).query).get("state") or [""])[0]
        await _db(authorization_begin)(
            server=server, user=user, shared=shared, state=state, listener=listener
        )
        authorize_url.set_result(url)

    async def callback_handler() -> AuthorizationCodeResult:
        message = await layer.receive(listener)
        flow.reply_to = message.get("reply") or ""
        if message.get("error"):
            raise _Denied(message["error"])
        return AuthorizationCodeResult(
            code=message.get("code") or "", state=message.get("state"), iss=message.get("iss")
        )

    provider = _Provider(
        server_url=server.url,
        client_metadata=client_metadata(),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
        # Where the authorization server supports them, Atrium's client ID metadata
        # document; else dynamic registration (a pre-registered client needs neither).
        client_metadata_url=client_metadata_url(),
    )
    provider.sign_in_anyway = True
    storage.provider = provider
    flow = _Flow(server=server, user=user, provider=provider, storage=storage)
    task = loop.create_task(flow.run(), name=f"oauth:{server.slug}", context=contextvars.Context())
    _flows.add(task)
    task.add_done_callback(_flows.discard)
    await asyncio.wait([authorize_url, task], return_when=asyncio.FIRST_COMPLETED)
    if authorize_url.done():
        return authorize_url.result()
    raise ConnectFailed(flow.message or f"Signing in to {server.name} failed.")


def _step_up_of(*, server: McpServer, user: Any, shared: bool, storage: _PendingStorage) -> str:
    """Seed a sign-in with the client it uses (a pre-registered one; on a step-up, the
    grant's own registration) and return the scope a step-up asked for ("" otherwise)."""
    preregistered = preregistered_client(server)
    if preregistered is not None:
        storage.client = preregistered.model_dump(mode="json", exclude_none=True)
    owner = None if shared else user
    grant = OAuthGrant.objects.filter(server=server, user=owner).first()
    if grant is None or not grant.wanted_scope:
        return ""
    if storage.client is None:
        storage.client = unseal(grant.sealed_client)
    return union_scopes(grant.scope or None, grant.wanted_scope) or ""


def _with_scope(url: str, scope: str) -> str:
    """``url`` (an authorization request) asking for ``scope`` joined to what it asks."""
    parsed = urlparse(url)
    query = parse_qs(parsed.query, keep_blank_values=True)
    joined = union_scopes((query.get("scope") or [None])[0], scope) or scope
    query["scope"] = [joined]
    return parsed._replace(query=urlencode(query, doseq=True)).geturl()


@dataclasses.dataclass
class _Flow:
    server: McpServer
    user: Any
    provider: _Provider
    storage: _PendingStorage
    reply_to: str = ""
    message: str = ""

    async def run(self) -> None:
        ok = False
        try:
            async with asyncio.timeout(FLOW_TIMEOUT_SECONDS):
                await self._request()
            if self.storage.grant is None:
                raise _NoSignIn()
            ok = True
            self.message = f"{self.server.name} is connected."
        except Exception as exc:  # every failure is explained, audited and answered
            reason, self.message = _explain(exc, self.server, self.provider)
            log.info("sign-in to %s failed: %s (%s)", self.server.slug, reason, type(exc).__name__)
            await _db(grant_connect_failed)(
                server=self.server,
                user=self.user,
                reason=reason,
                message=self.message,
                refused=isinstance(exc, EgressRefused),
            )
        if self.reply_to:
            await get_channel_layer().send(
                self.reply_to, {"type": "oauth.outcome", "ok": ok, "message": self.message}
            )

    async def _request(self) -> None:
        """One request to the MCP endpoint: its 401 starts the SDK's sign-in, whose result
        (tokens) is all we want; the answer itself does not matter. Every request of the
        sign-in, and every redirect hop, goes to a public address, the server's own origin
        or an origin an administrator allowed (``mcp_bridge.egress``)."""
        body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        transport = GuardedTransport([self.server.url])
        async with httpx2.AsyncClient(
            auth=self.provider, timeout=30.0, transport=transport
        ) as http:
            await http.post(
                self.server.url,
                json=body,
                headers={"Accept": "application/json, text/event-stream"},
            )


async def deliver_callback(*, state: str, user: Any, query: dict[str, str]) -> tuple[bool, str]:
    """The callback view's half: check the state (once), hand the answer to the waiting
    flow, wait for its outcome. Returns (connected, message)."""
    return await on_flow_loop(_deliver_callback(state=state, user=user, query=query))


async def _deliver_callback(*, state: str, user: Any, query: dict[str, str]) -> tuple[bool, str]:
    try:
        pending = await _db(authorization_claim)(state=state, user=user)
    except OAuthRefused as exc:
        return False, str(exc)
    layer = get_channel_layer()
    reply = await layer.new_channel("oauth-reply.")
    await layer.send(
        pending.listener,
        {
            "type": "oauth.callback",
            "code": query.get("code", ""),
            "state": state,
            "iss": query.get("iss") or None,
            "error": query.get("error", ""),
            "reply": reply,
        },
    )
    started = time.monotonic()
    try:
        async with asyncio.timeout(CALLBACK_WAIT_SECONDS):
            outcome = await layer.receive(reply)
    except TimeoutError:
        log.warning(
            "sign-in flow for %s did not answer in %.0fs",
            pending.server.slug,
            time.monotonic() - started,
        )
        return False, "The sign-in could not be finished here. Start again with Connect."
    return bool(outcome.get("ok")), str(outcome.get("message") or "")
