"""Media URLs; chat/urls.py includes them with ``path("media/", include("chat.media_urls"))``."""

from django.urls import path

from . import media_views

urlpatterns = [
    path("<int:asset_id>/", media_views.media_asset, name="media-asset"),
    path("<int:asset_id>/thumbnail/", media_views.media_thumbnail, name="media-thumbnail"),
    path("<int:asset_id>/poster/", media_views.media_poster, name="media-poster"),
]
