from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"
    verbose_name = "Chat"

    def ready(self) -> None:
        from bindings import ratelimit

        from . import receivers
        from .actions.view_methods import RATE_LIMITS

        receivers.connect()
        # The view bridge's buckets have their defaults in its table; every process that
        # loads Django knows them (settings.ATRIUM_RATE_LIMITS overrides them).
        ratelimit.limits_declare(RATE_LIMITS)
