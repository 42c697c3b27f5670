"""URLs of the app host."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("audit/", include("audit.urls")),
    path("oauth/", include("mcp_bridge.urls")),
    path("", include("chat.urls")),
]
