"""Secrets, hosts, origins, cookies and the host pages' Content-Security-Policy."""

import secrets
from urllib.parse import urlsplit

from csp.constants import NONCE, NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from .env import VAR_DIR, env_bool, env_list, env_str

# Embedded profile: a random key kept under var/ so sessions survive restarts. The deploy
# check refuses it: production must pass SECRET_KEY explicitly.
SECRET_KEY_FROM_ENV = bool(env_str("SECRET_KEY"))
if SECRET_KEY_FROM_ENV:
    SECRET_KEY = env_str("SECRET_KEY")
else:
    _key_file = VAR_DIR / "secret_key"
    try:
        SECRET_KEY = _key_file.read_text().strip()
    except FileNotFoundError:
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        SECRET_KEY = secrets.token_urlsafe(50)
        _key_file.write_text(SECRET_KEY)

ATRIUM_APP_ORIGIN = env_str("ATRIUM_APP_ORIGIN", "http://localhost:8000").rstrip("/")


def _host_of(origin: str) -> str:
    return (urlsplit(origin.replace("*.", "wildcard.", 1)).hostname or "").replace(
        "wildcard.", "*.", 1
    )


APP_HOST = _host_of(ATRIUM_APP_ORIGIN)

# One sandbox origin per MCP server: "<scheme>://*.<domain>[:port]", a server's views run on
# "<server-key>.<domain>" (docs/sandbox.md). ATRIUM_SANDBOX_DOMAIN alone is enough: the
# scheme and port are then the app's. Embedded default "*.localhost": Chromium resolves it
# to loopback without DNS and treats every "<key>.localhost" as a site of its own.
_app = urlsplit(ATRIUM_APP_ORIGIN)
ATRIUM_SANDBOX_DOMAIN = env_str("ATRIUM_SANDBOX_DOMAIN", "localhost").strip(".").lower()
ATRIUM_SANDBOX_ORIGIN = env_str(
    "ATRIUM_SANDBOX_ORIGIN",
    f"{_app.scheme}://*.{ATRIUM_SANDBOX_DOMAIN}" + (f":{_app.port}" if _app.port else ""),
).rstrip("/")
if not urlsplit(ATRIUM_SANDBOX_ORIGIN).netloc.startswith("*."):
    raise ImproperlyConfigured(
        "ATRIUM_SANDBOX_ORIGIN must name one origin per server with a leading '*.' label, "
        f"e.g. https://*.sandbox.example-usercontent.net (got {ATRIUM_SANDBOX_ORIGIN!r})."
    )
SANDBOX_HOST = _host_of(ATRIUM_SANDBOX_ORIGIN)
# The parent name of every server's sandbox host ("localhost", "sandbox.example.net").
SANDBOX_DOMAIN = SANDBOX_HOST.removeprefix("*.").rstrip(".").lower()
ATRIUM_SANDBOX_DOMAIN = SANDBOX_DOMAIN

_default_hosts = [APP_HOST, "." + SANDBOX_DOMAIN]
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", _default_hosts)
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [ATRIUM_APP_ORIGIN])

_https = ATRIUM_APP_ORIGIN.startswith("https://")
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", _https)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", _https)
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_HSTS_SECONDS = int(env_str("SECURE_HSTS_SECONDS", "31536000" if _https else "0"))
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if _https else None
X_FRAME_OPTIONS = "DENY"


def _ws_origin(origin: str) -> str:
    return origin.replace("https://", "wss://", 1).replace("http://", "ws://", 1)


_sandbox_frames = [ATRIUM_SANDBOX_ORIGIN]

# The host's own pages: strict, nonce-based. Views live only in sandbox-origin frames.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF],
        "img-src": [SELF, "data:", "blob:"],
        "media-src": [SELF, "blob:"],
        "font-src": [SELF],
        "connect-src": [SELF, _ws_origin(ATRIUM_APP_ORIGIN)],
        "frame-src": _sandbox_frames,
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}
