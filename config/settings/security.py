"""Secrets, hosts, origins, cookies and the host pages' Content-Security-Policy."""

import secrets
from urllib.parse import urlsplit

from csp.constants import NONCE, NONE, SELF

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

# Fernet keys sealing OAuth grants at rest (comma-separated, newest first: MultiFernet
# decrypts with any, encrypts with the first). Empty: one key derived from SECRET_KEY
# (see docs/oauth.md, "Keys and rotation").
ATRIUM_OAUTH_KEYS = env_list("ATRIUM_OAUTH_KEYS", [])

ATRIUM_APP_ORIGIN = env_str("ATRIUM_APP_ORIGIN", "http://localhost:8000").rstrip("/")
# May contain a leading "*." label: each server then gets its own sandbox origin.
ATRIUM_SANDBOX_ORIGIN = env_str("ATRIUM_SANDBOX_ORIGIN", "http://127.0.0.1:8000").rstrip("/")


def _host_of(origin: str) -> str:
    return (urlsplit(origin.replace("*.", "wildcard.", 1)).hostname or "").replace(
        "wildcard.", "*.", 1
    )


APP_HOST = _host_of(ATRIUM_APP_ORIGIN)
SANDBOX_HOST = _host_of(ATRIUM_SANDBOX_ORIGIN)
# Optional per-server sandbox subdomains in development (Chromium resolves *.localhost).
SANDBOX_SUBDOMAIN_SUFFIX = env_str("ATRIUM_SANDBOX_SUBDOMAIN_SUFFIX", "")

_default_hosts = [APP_HOST, SANDBOX_HOST.replace("*.", ".")]
if SANDBOX_SUBDOMAIN_SUFFIX:
    _default_hosts.append("." + SANDBOX_SUBDOMAIN_SUFFIX.lstrip("."))
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
if SANDBOX_SUBDOMAIN_SUFFIX:
    _scheme = urlsplit(ATRIUM_SANDBOX_ORIGIN).scheme
    _port = urlsplit(ATRIUM_SANDBOX_ORIGIN).port
    _sandbox_frames.append(
        f"{_scheme}://*.{SANDBOX_SUBDOMAIN_SUFFIX}" + (f":{_port}" if _port else "")
    )

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
