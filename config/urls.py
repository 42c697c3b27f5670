"""URLs of the app host."""

from django.contrib import admin
from django.urls import include, path

from chat import views as chat_views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("audit/", include("audit_review.urls")),
    # Starting a sign-in is rate limited per person (chat.views.oauth_connect).
    path("oauth/connect/<slug:slug>/", chat_views.oauth_connect, name="oauth-connect"),
    path("oauth/", include("mcp_bridge.urls")),
    path("", include("chat.urls")),
]
