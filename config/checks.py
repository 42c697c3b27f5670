"""Deploy checks: `manage.py check --deploy` fails loudly on an unsafe production setup."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import Error, Tags, register


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
                hint="Set REDIS_URL so every daphne process shares one Redis channel layer.",
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
    sandbox = urlsplit(settings.ATRIUM_SANDBOX_ORIGIN.replace("*.", "x.", 1))
    if (app.hostname or "") == (sandbox.hostname or "") or not sandbox.hostname:
        errors.append(
            Error(
                "The sandbox origin must be a different host from the app origin.",
                hint="Set ATRIUM_SANDBOX_ORIGIN to a separate (ideally separate-site) host.",
                id="atrium.E006",
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
