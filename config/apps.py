from django.apps import AppConfig


class ProjectConfig(AppConfig):
    """The project's wiring as an app of its own, so that what only the top layer may import
    (the deploy checks read every app's settings) is registered from the top layer."""

    name = "config"
    verbose_name = "Project configuration"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the deploy checks)
