"""A server resource attached to a message (by a member, or embedded in a prompt).

Its app is chat (chat.models imports this module); relations name chat's models by label.
The copy is what the model reads: text (bounded), or for binary content its size only.
"""

from __future__ import annotations

from django.db import models


class ResourceOrigin(models.TextChoices):
    ATTACHED = "attached", "attached by a member"
    PROMPT = "prompt", "embedded in a prompt"


class MessageResource(models.Model):
    message = models.ForeignKey(
        "chat.Message", on_delete=models.CASCADE, related_name="server_resources"
    )
    thread = models.ForeignKey("chat.Thread", on_delete=models.CASCADE, related_name="+")
    server = models.ForeignKey("mcp_bridge.McpServer", on_delete=models.CASCADE, related_name="+")
    origin = models.CharField(max_length=10, choices=ResourceOrigin.choices)
    uri = models.CharField(max_length=2000)
    name = models.CharField(max_length=300, blank=True)
    mime_type = models.CharField(max_length=200, blank=True)
    text = models.TextField(blank=True)  # the text content, cut to MAX_RESOURCE_TEXT
    text_chars = models.PositiveIntegerField(default=0)  # before the cut
    binary_size = models.PositiveIntegerField(null=True, blank=True)  # blob bytes, not kept
    subscribed = models.BooleanField(default=False)
    fetched_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(null=True, blank=True)  # last refresh after an update
    update_count = models.PositiveIntegerField(default=0)

    class Meta:
        app_label = "chat"
        indexes = [models.Index(fields=["server", "uri"], name="message_resource_uri")]

    def __str__(self) -> str:
        return f"{self.uri} on message {self.message_id}"
