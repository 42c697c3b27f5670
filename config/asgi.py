"""ASGI entry point: HTTP (routed by host in middleware) and the thread websockets."""

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Must run before anything imports models (consumers do).
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from chat.media.uploads import UploadBodyApp  # noqa: E402
from chat.realtime.guard import WebsocketGuard  # noqa: E402
from chat.realtime.routing import websocket_urlpatterns  # noqa: E402
from chat.sandbox_hosts import is_sandbox_host  # noqa: E402


class AppHostStatic:
    """Static files for the app host only: the sandbox host serves sandbox pages alone."""

    def __init__(self, app) -> None:
        self.app = app
        self.with_static = ASGIStaticFilesHandler(app)

    async def __call__(self, scope, receive, send) -> None:
        host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin1")
        target = self.app if is_sandbox_host(host) else self.with_static
        await target(scope, receive, send)


application = ProtocolTypeRouter(
    {
        # Upload bodies stream to staging before Django would buffer them (issue 26).
        "http": UploadBodyApp(AppHostStatic(django_asgi_app)),
        "websocket": WebsocketGuard(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)

# Everything imported so far (Django, the apps, the MCP SDK, pydantic models...) lives as
# long as the process: move it out of the collector's reach. Otherwise every gen-2
# collection walks those objects again (~110 ms pauses that stalled every socket on this
# project's machines; ~25 ms after freezing: bench/README.md).
gc.collect()
gc.freeze()
