from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"
    verbose_name = "Chat"

    def ready(self) -> None:
        from bindings import ratelimit

        from . import receivers
        from .actions.view_methods import RATE_LIMITS
        from .media import receivers as media_receivers
        from .server_requests import receivers as server_request_receivers

        receivers.connect()
        media_receivers.connect()  # a message's attached files go with it (issue 26)
        server_request_receivers.connect()  # notifications/elicitation/complete
        # The view bridge's buckets have their defaults in its table; every process that
        # loads Django knows them (settings.ATRIUM_RATE_LIMITS overrides them).
        ratelimit.limits_declare(RATE_LIMITS)
