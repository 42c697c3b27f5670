from django.apps import AppConfig


class McpBridgeConfig(AppConfig):
    name = "mcp_bridge"
    verbose_name = "MCP servers"

    def ready(self) -> None:
        from . import receivers  # noqa: F401  (connects the server log's receiver)
