from django.contrib.auth import views as auth_views
from django.urls import include, path

from . import views

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("w/<slug:slug>/", views.workspace_detail, name="workspace"),
    path("w/<slug:slug>/threads/new/", views.thread_create, name="thread-create"),
    path("w/<slug:slug>/t/<int:thread_id>/", views.thread_detail, name="thread"),
    path("views/doc/<str:content_hash>/", views.view_document, name="view-document"),
    path("media/", include("chat.media.urls")),
]
