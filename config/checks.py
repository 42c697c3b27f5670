"""Deploy checks: `manage.py check --deploy` fails loudly on an unsafe production setup."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import Error, Tags, register

from mcp_bridge import public_suffix


@register(Tags.security, deploy=True)
def atrium_deploy_checks(app_configs=None, **kwargs) -> list[Error]:
    errors: list[Error] = []
    if settings.DEBUG:
        errors.append(Error("DEBUG is on.", hint="Unset DEBUG in production.", id="atrium.E001"))
    if not settings.SECRET_KEY_FROM_ENV or len(settings.SECRET_KEY) < 40:
        errors.append(
            Error(
                "SECRET_KEY is the embedded default (or too short).",
                hint="Set SECRET_KEY to a random value of at least 40 characters.",
                id="atrium.E002",
            )
        )
    layer = settings.CHANNEL_LAYERS["default"]["BACKEND"]
    if layer.endswith("InMemoryChannelLayer") and (
        settings.ATRIUM_ASGI_PROCESSES > 1 or settings.ATRIUM_PROFILE == "production"
    ):
        errors.append(
            Error(
                "The in-memory channel layer cannot serve several processes.",
                hint="Set REDIS_URL so every web process shares one Redis channel layer.",
                id="atrium.E003",
            )
        )
    broker = settings.CELERY_BROKER_URL
    if not broker or broker.startswith(("filesystem://", "memory://")):
        errors.append(
            Error(
                f"No production Celery broker (CELERY_BROKER_URL={broker or 'unset'}).",
                hint="Set CELERY_BROKER_URL, e.g. redis://127.0.0.1:6379/1.",
                id="atrium.E004",
            )
        )
    if settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        errors.append(
            Error(
                "SQLite is the embedded database.",
                hint="Set DATABASE_URL to PostgreSQL.",
                id="atrium.E005",
            )
        )
    app = urlsplit(settings.ATRIUM_APP_ORIGIN)
    sandbox = urlsplit(settings.ATRIUM_SANDBOX_ORIGIN)  # its scheme; the host is "*.<domain>"
    errors.extend(_sandbox_site_checks(app.hostname or "", settings.SANDBOX_DOMAIN))
    errors.extend(
        media_accel_checks(
            settings.ATRIUM_MEDIA_ACCEL_REDIRECT, settings.STORAGES["default"]["BACKEND"]
        )
    )
    if app.scheme != "https" or sandbox.scheme != "https":
        errors.append(
            Error(
                "App and sandbox origins must use https in production.",
                id="atrium.E007",
            )
        )
    if "*" in settings.ALLOWED_HOSTS:
        errors.append(Error("ALLOWED_HOSTS contains '*'.", id="atrium.E008"))
    return errors


def media_accel_checks(prefix: str, storage_backend: str) -> list[Error]:
    """X-Accel-Redirect names a path below an nginx location that serves MEDIA_ROOT: it
    needs a location prefix, and files on this machine's disk."""
    if not prefix:
        return []
    if not (prefix.startswith("/") and prefix.endswith("/")):
        return [
            Error(
                f"ATRIUM_MEDIA_ACCEL_REDIRECT={prefix!r} is not a location prefix.",
                hint="Use the internal nginx location that serves MEDIA_ROOT, e.g. "
                "/_media_files/ (deploy/nginx/fleet.conf).",
                id="atrium.E011",
            )
        ]
    if storage_backend != "django.core.files.storage.FileSystemStorage":
        return [
            Error(
                "ATRIUM_MEDIA_ACCEL_REDIRECT needs media on the local file system.",
                hint=f"The default storage is {storage_backend}: unset "
                "ATRIUM_MEDIA_ACCEL_REDIRECT, and the web server streams media itself.",
                id="atrium.E011",
            )
        ]
    return []


def _sandbox_site_checks(app_host: str, sandbox_domain: str) -> list[Error]:
    """Every server's sandbox host must be another *site* than the app (docs/sandbox.md)."""
    suffixes = public_suffix.load()
    if suffixes is None:
        return [
            Error(
                f"No Public Suffix List at {public_suffix.list_path()}.",
                hint="Install the 'publicsuffix' package or set ATRIUM_PUBLIC_SUFFIX_LIST.",
                id="atrium.E009",
            )
        ]
    sandbox_site = suffixes.site_of(f"x.{sandbox_domain}")
    if not sandbox_domain or not app_host or suffixes.site_of(app_host) == sandbox_site:
        return [
            Error(
                "The sandbox hosts must be a different site from the app "
                f"(app {app_host!r}, sandbox *.{sandbox_domain!r}).",
                hint="Set ATRIUM_SANDBOX_ORIGIN to https://*.<a domain of its own, on the "
                "Public Suffix List>, e.g. https://*.example-usercontent.net.",
                id="atrium.E006",
            )
        ]
    if not suffixes.is_public_suffix(sandbox_domain):
        # Each (server, workspace) is its own origin, so localStorage and IndexedDB are
        # apart; cookies are not: any view may set one with Domain=<its registrable
        # domain>, and browsers send it to every sibling sandbox host.
        return [
            Error(
                f"{sandbox_domain!r} is not a public suffix: every sandbox host under it is "
                f"one site ({sandbox_site!r}), so a cookie one server's view sets for that "
                "site reaches every other server's and workspace's views.",
                hint="Use a sandbox domain on the Public Suffix List (its private section, "
                "as github.io is), or register it there; ATRIUM_PUBLIC_SUFFIX_LIST may name "
                "a newer copy of the list once browsers ship the entry (docs/sandbox.md).",
                id="atrium.E010",
            )
        ]
    return []
