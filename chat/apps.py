from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"
    verbose_name = "Chat"

    def ready(self) -> None:
        from config import checks  # noqa: F401  (registers the deploy checks)

        from . import receivers

        receivers.connect()
