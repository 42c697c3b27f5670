"""Media URLs; chat/urls.py includes them with ``path("media/", include("chat.media.urls"))``."""

from django.urls import path

from . import views

urlpatterns = [
    path("<int:asset_id>/", views.media_asset, name="media-asset"),
    path("<int:asset_id>/thumbnail/", views.media_thumbnail, name="media-thumbnail"),
    path("<int:asset_id>/poster/", views.media_poster, name="media-poster"),
]
