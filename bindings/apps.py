from django.apps import AppConfig


class BindingsConfig(AppConfig):
    name = "bindings"
    verbose_name = "Bindings"
