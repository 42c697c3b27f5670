"""Tool media: one row per file a tool returned, staged then persisted (DESIGN §4).

Its app is chat (chat.models imports this module); relations name chat's models by label,
so this module imports nothing of chat.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class MediaStatus(models.TextChoices):
    STAGED = "staged", "staged"
    READY = "ready", "ready"
    REJECTED = "rejected", "rejected"


class MediaOrigin(models.TextChoices):
    TOOL_RESULT = "tool_result", "tool result"
    ATTACHMENT = "attachment", "member's attachment"
    APP_UPLOAD = "app_upload", "app view's upload"


class MediaAsset(models.Model):
    thread = models.ForeignKey("chat.Thread", on_delete=models.CASCADE, related_name="media")
    tool_call = models.ForeignKey(
        "chat.ToolCall", null=True, blank=True, on_delete=models.CASCADE, related_name="media"
    )
    # Where the file came from; attachments (chat.media.attachments) name their uploader and,
    # once the message that carries them is posted, that message.
    origin = models.CharField(
        max_length=12, choices=MediaOrigin.choices, default=MediaOrigin.TOOL_RESULT
    )
    message = models.ForeignKey(
        "chat.Message",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="attachments",
    )
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # The app view that uploaded (Apps SDK uploadFile) or saved (ui/download-file) this file:
    # origin ``app_upload`` (chat.media.view_files); its app is the view's server.
    app_view = models.ForeignKey(
        "chat.ToolCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Text the model reads (PDFs, text files), cut to the extraction budget; in storage.
    text_path = models.CharField(max_length=500, blank=True)
    text_truncated = models.BooleanField(default=False)
    pages = models.PositiveIntegerField(null=True, blank=True)
    kind = models.CharField(max_length=10)  # image | audio | video | binary
    mime_type = models.CharField(max_length=200)
    filename = models.CharField(max_length=255, blank=True)
    size = models.PositiveBigIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True, db_index=True)
    staging_path = models.CharField(max_length=500, blank=True)
    storage_path = models.CharField(max_length=500, blank=True)
    thumbnail_path = models.CharField(max_length=500, blank=True)
    poster_path = models.CharField(max_length=500, blank=True)
    width = models.PositiveIntegerField(null=True, blank=True)
    height = models.PositiveIntegerField(null=True, blank=True)
    duration = models.FloatField(null=True, blank=True)
    status = models.CharField(
        max_length=10, choices=MediaStatus.choices, default=MediaStatus.STAGED
    )
    reason = models.CharField(max_length=300, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    ready_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.mime_type} ({self.status})"


class WorkspaceFileSettings(models.Model):
    """A workspace's limits for the files members attach, and how long they are kept.

    No row: the defaults (``ATRIUM_ATTACH_*`` settings, docs/files.md)."""

    workspace = models.OneToOneField(
        "chat.Workspace", on_delete=models.CASCADE, related_name="file_settings"
    )
    max_file_bytes = models.PositiveBigIntegerField(
        help_text="Largest file a member may attach, in bytes."
    )
    max_total_bytes = models.PositiveBigIntegerField(
        help_text="All attached files of the workspace together, in bytes."
    )
    retention_days = models.PositiveIntegerField(
        default=0, help_text="Attached files are deleted this many days after upload; 0 keeps them."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "workspace file settings"
        verbose_name_plural = "workspace file settings"

    def __str__(self) -> str:
        return f"file settings of workspace {self.workspace_id}"


class AttachedFile(MediaAsset):
    """Files members attached, as the admin lists them per workspace (a proxy: same rows)."""

    class Meta:
        proxy = True
        verbose_name = "attached file"
        verbose_name_plural = "attached files"
