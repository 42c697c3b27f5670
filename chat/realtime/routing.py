from django.urls import path

from .consumers import ThreadConsumer

websocket_urlpatterns = [
    path("ws/threads/<int:thread_id>/", ThreadConsumer.as_asgi()),
]
