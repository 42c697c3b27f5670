"""Host routing and deploy checks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

from config.checks import media_accel_checks

ROOT = Path(__file__).resolve().parents[2]
SANDBOX_HOST = "board.localhost:8000"


@pytest.mark.django_db
@pytest.mark.parametrize("host", [SANDBOX_HOST, "BOARD.LocalHost.:8000", "board.localhost."])
def test_sandbox_host_serves_no_app_pages(personas, host):
    client = Client(HTTP_HOST=host)
    client.force_login(personas.owner)
    paths = (
        "/",
        "/login/",
        "/admin/",
        f"/w/{personas.workspace.slug}/",
        "/static/chat/app_views/index.js",
    )
    for path in paths:
        response = client.get(path)
        assert response.status_code == 404, path
        assert "Set-Cookie" not in response.headers
        assert not response.cookies


@pytest.mark.django_db
def test_unknown_hosts_are_refused(personas):
    for host in ("evil.example", "127.0.0.1:8000", "localhost.evil.example"):
        assert Client(HTTP_HOST=host).get("/login/").status_code == 400, host


@pytest.mark.parametrize(
    "host, key",
    [
        ("github.sandbox.example.net", "github"),
        ("GitHub.Sandbox.Example.NET.:443", "github"),
        ("a-1.sandbox.example.net:8443", "a-1"),
        ("sandbox.example.net", None),  # the wildcard's bare parent
        ("sandbox.example.net.", None),
        ("a.b.sandbox.example.net", None),  # deeper than one label
        ("-a.sandbox.example.net", None),
        ("chat.example.com", None),
        ("xsandbox.example.net", None),
    ],
)
def test_sandbox_hosts_are_normalized_before_routing(settings, host, key):
    from chat.sandbox_hosts import is_sandbox_host, sandbox_label_of

    settings.APP_HOST = "chat.example.com"
    settings.SANDBOX_DOMAIN = "sandbox.example.net"
    assert sandbox_label_of(host) == key
    under = host.lower().split(":")[0].rstrip(".").endswith("sandbox.example.net")
    assert is_sandbox_host(host) == (under and not host.lower().startswith("xsandbox"))


def test_every_server_gets_its_own_sandbox_origin():
    from chat.sandbox_hosts import server_key_for

    keys = {server_key_for(slug) for slug in ("board", "Board", "my_server", "my-server")}
    assert len(keys) == 4
    assert all(k == k.lower() and "_" not in k for k in keys)


def test_each_server_and_workspace_gets_its_own_stable_sandbox_label(settings):
    """One origin per (server, workspace): storage is per origin (docs/sandbox.md)."""
    from chat.sandbox_hosts import (
        DNS_LABEL_RE,
        sandbox_label_for,
        sandbox_label_of,
        sandbox_origin_for,
    )

    slugs = ("board", "Board", "my_server", "x" * 63, "xn--board", "b")
    labels = {(slug, ws): sandbox_label_for(slug, ws) for slug in slugs for ws in (1, 2, 12, 21)}
    # Distinct per server and per workspace, each one valid lower-case DNS label.
    assert len(set(labels.values())) == len(labels)
    for label in labels.values():
        assert DNS_LABEL_RE.match(label) and len(label) <= 63 and label == label.lower(), label
        assert label[2:4] != "--"  # not an IDNA-reserved form ("xn--")
    # Stable (the same in every process with this SECRET_KEY), with the readable server key.
    label = sandbox_label_for("board", 7)
    assert label == sandbox_label_for("board", 7) and label.startswith("board-")
    origin = sandbox_origin_for("board", 7)
    assert origin == f"http://{label}.localhost:8000"
    # The router reads back exactly the label that was built.
    assert sandbox_label_of(origin.removeprefix("http://")) == label
    # The digest is keyed by SECRET_KEY: nobody derives another workspace's label.
    settings.SECRET_KEY = "another-" + "k" * 50
    assert sandbox_label_for("board", 7) != label


def test_public_suffix_list_tells_sites_apart():
    from mcp_bridge import public_suffix

    suffixes = public_suffix.load()
    assert suffixes is not None
    assert suffixes.public_suffix("a.b.co.uk") == "co.uk"
    assert suffixes.site_of("chat.example.co.uk") == "example.co.uk"
    assert suffixes.is_public_suffix("github.io") and not suffixes.is_public_suffix("example.com")
    # "localhost" is on no list: the implicit "*" rule makes it a suffix, so every
    # "<key>.localhost" is a site of its own (and "<key>.sandbox.localhost" would not be).
    assert suffixes.site_of("board.localhost") == "board.localhost"
    assert suffixes.site_of("a.sandbox.localhost") == suffixes.site_of("b.sandbox.localhost")


@pytest.mark.django_db
def test_app_host_serves_no_sandbox_pages():
    response = Client().get("/sandbox/anything/")
    assert response.status_code == 404


@pytest.mark.django_db
def test_host_pages_carry_a_strict_nonce_csp():
    response = Client().get("/login/")
    policy = response.headers["Content-Security-Policy"]
    directives = dict(
        (part.split()[0], part.split()[1:]) for part in policy.split(";") if part.strip()
    )
    assert "'unsafe-inline'" not in directives["script-src"]
    # Only 'self' and (when a page has an inline script) that response's nonce.
    assert all(
        source == "'self'" or source.startswith("'nonce-") for source in directives["script-src"]
    )
    assert directives["object-src"] == ["'none'"]
    assert directives["frame-ancestors"] == ["'none'"]


def _check_deploy(env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            ("DATABASE_URL", "REDIS_URL", "CELERY_", "SECRET_KEY", "DEBUG", "ATRIUM_")
        )
    }
    clean.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "ERROR"],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


SAFE_PRODUCTION = {
    "SECRET_KEY": "k" * 24 + "-production-secret-0123456789",
    "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/atrium",
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/1",
    "ATRIUM_APP_ORIGIN": "https://chat.example.com",
    "ATRIUM_SANDBOX_ORIGIN": "https://*.example-usercontent.net",
    "SECURE_SSL_REDIRECT": "1",
}


def _listed_sandbox_domain(tmp_path: Path) -> dict[str, str]:
    """The system Public Suffix List plus the sandbox domain in its private section, as it
    would be once registered (example-usercontent.net is not, and cannot be)."""
    from mcp_bridge import public_suffix

    listed = tmp_path / "public_suffix_list.dat"
    listed.write_text(
        public_suffix.SYSTEM_LIST.read_text(encoding="utf-8")
        + "\n// ===BEGIN PRIVATE DOMAINS===\nexample-usercontent.net\n"
    )
    return {"ATRIUM_PUBLIC_SUFFIX_LIST": str(listed)}


def test_deploy_check_passes_a_safe_production_env(tmp_path):
    env = {**SAFE_PRODUCTION, **_listed_sandbox_domain(tmp_path), "ATRIUM_VAR_DIR": str(tmp_path)}
    result = _check_deploy(env)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "change, error_id",
    [
        ({"DEBUG": "1"}, "atrium.E001"),
        ({"SECRET_KEY": ""}, "atrium.E002"),
        ({"REDIS_URL": ""}, "atrium.E003"),
        ({"CELERY_BROKER_URL": ""}, "atrium.E004"),
        ({"DATABASE_URL": ""}, "atrium.E005"),
        ({"ATRIUM_SANDBOX_ORIGIN": "https://*.sandbox.example.com"}, "atrium.E006"),
        ({"ATRIUM_PUBLIC_SUFFIX_LIST": "/nonexistent/list.dat"}, "atrium.E009"),
        # Not a public suffix: every sandbox host is one site, cookies cross servers.
        ({"ATRIUM_SANDBOX_ORIGIN": "https://*.sandbox.example-usercontent.net"}, "atrium.E010"),
        ({"ATRIUM_PUBLIC_SUFFIX_LIST": ""}, "atrium.E010"),  # the system list: not listed
        ({"ATRIUM_APP_ORIGIN": "http://chat.example.com"}, "atrium.E007"),
        ({"ALLOWED_HOSTS": "*"}, "atrium.E008"),
        ({"ATRIUM_MEDIA_ACCEL_REDIRECT": "_media_files"}, "atrium.E011"),
    ],
)
def test_deploy_check_fails_loudly_on_unsafe_production_env(tmp_path, change, error_id):
    env = {**SAFE_PRODUCTION, **_listed_sandbox_domain(tmp_path)}
    env.update({"ATRIUM_PROFILE": "production", "ATRIUM_VAR_DIR": str(tmp_path)})
    env.update(change)
    env = {k: v for k, v in env.items() if v != ""}
    result = _check_deploy(env)
    assert result.returncode != 0
    assert error_id in result.stdout + result.stderr


def test_media_accel_redirect_needs_a_location_and_local_files():
    local = "django.core.files.storage.FileSystemStorage"
    assert media_accel_checks("", "storages.backends.s3.S3Storage") == []
    assert media_accel_checks("/_media_files/", local) == []
    for prefix, backend in (
        ("_media_files/", local),
        ("/_media_files", local),
        ("/_media_files/", "storages.backends.s3.S3Storage"),
    ):
        assert [e.id for e in media_accel_checks(prefix, backend)] == ["atrium.E011"]


def test_a_views_policy_never_names_the_app_or_a_sandbox(settings):
    """effective_csp passes the configured app host and sandbox domain to the CSP builder."""
    from types import SimpleNamespace

    from chat.app_view_bridge import effective_csp

    settings.APP_HOST = "chat.example.com"
    settings.SANDBOX_DOMAIN = "sandbox.example.net"
    declared = [
        "https://chat.example.com",
        "wss://chat.example.com",
        "https://board.sandbox.example.net",
        "http://localhost:8000",
        "http://127.0.0.1:8000",
        "http://10.1.2.3",
        "http://169.254.169.254",
        "https://api.example.org",
    ]
    resource = SimpleNamespace(meta={"csp": {"connectDomains": declared}}, flavor="mcp-app")
    # no admin list, mode "declared": every valid declared domain is kept
    unrestricted = SimpleNamespace(allowed_domains=None, csp_domain_mode="declared")
    csp = effective_csp(resource, unrestricted)
    assert csp.directives["connect-src"] == ["https://api.example.org"]
    assert len(csp.dropped) == len(declared) - 1
