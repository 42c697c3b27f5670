"""Atrium's MCP client under the official conformance suite (``@modelcontextprotocol/conformance``).

The suite starts a mock server per scenario and runs this script as the client under test:
the server URL is the last argument, ``MCP_CONFORMANCE_SCENARIO`` names the scenario and
``MCP_CONFORMANCE_CONTEXT`` (JSON) carries what a scenario hands the client (a pre-registered
client, a private key). Runs from the repository root (``tests/conformance`` runs it for
every scenario; docs/mcp-client.md).

It drives Atrium's real client code, as the web app does: a server row in a throwaway SQLite
database (``ATRIUM_VAR_DIR``, a copy of ``ATRIUM_CONFORMANCE_DB`` when given, else migrated
here), ``mcp_bridge.gateway`` to read the catalogue and call a tool (the connection manager,
the SDK's OAuth providers on Django storage), and ``mcp_bridge.oauth`` to sign in when the
gateway raises ``AuthorizationRequired``: the sign-in the Connect card starts, whose consent
page the mock authorization server answers at once with a redirect to the callback.

Two things differ from a deployment, both only here: the suite's servers listen on loopback,
which the egress guard of sign-ins refuses unless allowed (allowed here for loopback only),
and the client ID metadata document URL is the one the suite expects.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

ROOT = Path(__file__).resolve().parents[1]
# The suite's auth/basic-cimd authorization server accepts only this client id.
CIMD_URL = "https://conformance-test.local/client-metadata.json"
MAX_SIGN_INS = 3  # auth/scope-retry-limit: a client must give up on an endless step-up

log = logging.getLogger("atrium.conformance")


def _prepare_environment() -> Path:
    var = Path(tempfile.mkdtemp(prefix="atrium-conformance-"))
    os.environ["ATRIUM_VAR_DIR"] = str(var)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ["ATRIUM_OAUTH_CLIENT_METADATA_URL"] = CIMD_URL
    for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"):
        os.environ.pop(name, None)  # one process, its own SQLite file, in-memory layers
    template = os.environ.get("ATRIUM_CONFORMANCE_DB")
    if template:
        shutil.copyfile(template, var / "atrium.sqlite3")
    sys.path.insert(0, str(ROOT))
    return var


def _create_schema() -> None:
    """Tables straight from the models (as pytest-django's --nomigrations does): a
    throwaway database needs no data migrations, and this works while migrations of
    parallel work wait to be put in order."""
    from django.apps import apps
    from django.conf import settings
    from django.core.management import call_command

    settings.MIGRATION_MODULES = {app.label: None for app in apps.get_app_configs()}
    call_command("migrate", run_syncdb=True, verbosity=0)


def _allow_loopback() -> None:
    """The suite's servers (MCP and authorization) all listen on loopback ports."""
    from mcp_bridge import egress

    public = egress.address_is_public

    def loopback_or_public(address: str) -> bool:
        try:
            if ipaddress.ip_address(address.split("%", 1)[0]).is_loopback:
                return True
        except ValueError:
            pass
        return public(address)

    egress.address_is_public = loopback_or_public


def _server_row(url: str, scenario: str, context: dict[str, Any]):
    from mcp_bridge.models import AuthMode, McpServer

    fields: dict[str, Any] = {"auth_mode": AuthMode.NONE}
    if scenario in ("auth/client-credentials-basic", "auth/client-credentials-jwt"):
        client: dict[str, Any] = {"client_id": context.get("client_id", "")}
        if context.get("client_secret"):
            client["client_secret"] = context["client_secret"]
        if context.get("private_key_pem"):
            client["private_key"] = context["private_key_pem"]
            client["signing_algorithm"] = context.get("signing_algorithm") or "ES256"
        fields = {"auth_mode": AuthMode.OAUTH_MACHINE, "oauth_client": client}
    elif scenario.startswith("auth/"):
        fields = {"auth_mode": AuthMode.OAUTH_MEMBER}
        if context.get("client_id"):  # auth/pre-registration: entered by a superuser
            client = {"client_id": context["client_id"]}
            if context.get("client_secret"):
                client["client_secret"] = context["client_secret"]
            fields["oauth_client"] = client
    return McpServer.objects.create(
        name="Conformance", slug="conformance", transport="streamable_http", url=url, **fields
    )


async def _consent(authorize_url: str) -> dict[str, str]:
    """The mock authorization server's consent page answers at once with a redirect to
    Atrium's callback: its query is what the browser would bring back."""
    import httpx

    async with httpx.AsyncClient(timeout=10.0) as http:
        response = await http.get(authorize_url, follow_redirects=False)
    location = response.headers.get("location")
    if response.status_code not in (301, 302, 303, 307, 308) or not location:
        raise RuntimeError(f"authorization answered {response.status_code}, not a redirect")
    query = parse_qs(urlparse(location).query)
    return {key: (query.get(key) or [""])[0] for key in ("code", "state", "iss", "error")}


async def _sign_in(server, user) -> None:
    """What a person's Connect does: start, consent, callback."""
    from mcp_bridge import oauth

    url = await oauth.start_connect(server=server, user=user, shared=False)
    query = await _consent(url)
    ok, message = await oauth.deliver_callback(state=query["state"], user=user, query=query)
    log.info("sign-in: %s (%s)", "connected" if ok else "failed", message)
    if not ok:
        raise RuntimeError(message)


async def _with_sign_in(server, user, action):
    """Run ``action``; each ``AuthorizationRequired`` leads to a sign-in and one more try."""
    from mcp_bridge.errors import AuthorizationRequired

    for attempt in range(MAX_SIGN_INS + 1):
        try:
            return await action()
        except AuthorizationRequired as exc:
            if attempt == MAX_SIGN_INS:
                raise
            log.info("authorization required (%s): signing in", exc.details.get("reason"))
            await _sign_in(server, user)
    raise AssertionError("unreachable")


async def _person_accepts(request):
    """A person who opens the form card and presses Accept without typing: what Atrium sends
    is what its own server-side form check makes of an empty answer (defaults, SEP-1034)."""
    from chat.server_requests.schema import answer_check, form_fields
    from mcp_bridge.server_requests import InboundRequestRefused

    if request.kind != "elicitation" or request.params.get("mode") == "url":
        raise InboundRequestRefused("This conformance client answers form questions only.")
    content, problems = answer_check(form_fields(request.params.get("requestedSchema")), {})
    if problems:
        return {"action": "decline"}
    return {"action": "accept", "content": content}


def _tool_to_call(scenario: str, names: list[str]) -> tuple[str | None, dict[str, Any]]:
    if scenario == "tools_call":
        return "add_numbers", {"a": 5, "b": 3}
    if scenario == "sse-retry":
        return "test_reconnection", {}
    if scenario == "elicitation-sep1034-client-defaults":
        return "test_client_elicitation_defaults", {}
    if scenario == "initialize":
        return None, {}
    return (names[0] if names else None), {}


async def _run(url: str, scenario: str, context: dict[str, Any]) -> None:
    from asgiref.sync import sync_to_async
    from django.contrib.auth import get_user_model

    from mcp_bridge import gateway
    from mcp_bridge.errors import BridgeError
    from mcp_bridge.models import Tool

    server = await sync_to_async(_server_row)(url, scenario, context)
    user = await sync_to_async(get_user_model().objects.create_user)("conformance")
    try:
        await _with_sign_in(server, user, lambda: gateway.refresh_catalogue(server))
        names = await sync_to_async(
            lambda: list(Tool.objects.filter(server=server, present=True).values_list("name"))
        )()
        tool_name, arguments = _tool_to_call(scenario, [name for (name,) in names])
        if tool_name is None:
            return
        tool = await gateway.tool_for(server, tool_name)

        async def call():
            return await gateway.call_tool(
                server, tool, arguments, on_behalf_of=user.pk, on_server_request=_person_accepts
            )

        try:
            raw, _ = await _with_sign_in(server, user, call)
            log.info("%s answered: %s", tool_name, json.dumps(raw)[:300])
        except BridgeError as exc:  # the suite judges the exchange, not the tool's answer
            log.info("%s failed: %s %s", tool_name, exc.code, exc.details.get("reason"))
    finally:
        await gateway.close_all()


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    if len(sys.argv) < 2:
        print("usage: conformance_client.py <server-url>", file=sys.stderr)
        return 2
    if sys.argv[1] == "--make-db":  # the template database the test runner copies
        os.environ["ATRIUM_VAR_DIR"] = str(Path(sys.argv[2]).parent)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        _create_schema()
        return 0
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    var = _prepare_environment()
    try:
        import django

        django.setup()
        if not os.environ.get("ATRIUM_CONFORMANCE_DB"):
            _create_schema()
        _allow_loopback()
        asyncio.run(_run(url, scenario, context))
    finally:
        shutil.rmtree(var, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
