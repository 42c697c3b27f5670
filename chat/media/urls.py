"""Media URLs; chat/urls.py includes them with ``path("media/", include("chat.media.urls"))``."""

from django.urls import path

from . import uploads, views

urlpatterns = [
    path("<int:asset_id>/", views.media_asset, name="media-asset"),
    path("<int:asset_id>/thumbnail/", views.media_thumbnail, name="media-thumbnail"),
    path("<int:asset_id>/poster/", views.media_poster, name="media-poster"),
    path("<int:asset_id>/link/<str:token>/", views.media_file_link, name="media-file-link"),
    path("uploads/<int:thread_id>/", views.upload_begin, name="media-upload-begin"),
    # Answered by chat.media.uploads.UploadBodyApp in front of Django; this view is its
    # stand-in where that wrapper is not installed.
    path("uploads/body/<str:token>/", uploads.upload_body, name="media-upload-body"),
]
