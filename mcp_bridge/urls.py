from django.urls import path

from . import views

urlpatterns = [
    # connect/<slug>/ is routed in config.urls, through its rate limit (chat.views).
    path("callback/", views.callback, name="oauth-callback"),
    path("client-metadata.json", views.client_metadata, name="oauth-client-metadata"),
]
