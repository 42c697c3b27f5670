"""URLs of the sandbox host: sandbox pages and nothing else."""

from django.urls import path

from chat import sandbox_views

urlpatterns = [
    path("sandbox/<str:token>/", sandbox_views.sandbox_proxy, name="sandbox-proxy"),
]
