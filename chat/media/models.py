"""Tool media: one row per file a tool returned, staged then persisted (DESIGN §4).

Its app is chat (chat.models imports this module); relations name chat's models by label,
so this module imports nothing of chat.
"""

from __future__ import annotations

from django.db import models


class MediaStatus(models.TextChoices):
    STAGED = "staged", "staged"
    READY = "ready", "ready"
    REJECTED = "rejected", "rejected"


class MediaAsset(models.Model):
    thread = models.ForeignKey("chat.Thread", on_delete=models.CASCADE, related_name="media")
    tool_call = models.ForeignKey(
        "chat.ToolCall", null=True, blank=True, on_delete=models.CASCADE, related_name="media"
    )
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
