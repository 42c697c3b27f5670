from django.urls import path

from . import views

urlpatterns = [
    path("connect/<slug:slug>/", views.connect, name="oauth-connect"),
    path("callback/", views.callback, name="oauth-callback"),
]
