"""The side pane of a thread, per member (docs/side-pane.md).

Its app is chat (chat.models imports this module); relations name chat's models by label,
so this module imports nothing of chat.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

DEFAULT_PANE_WIDTH = 480
MIN_PANE_WIDTH = 320
MAX_PANE_WIDTH = 1600


class ThreadLayout(models.Model):
    """One member's layout of one thread: the app view they pinned beside the conversation
    (none: no pane) and the pane's width. Only that member's own pages read it."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    thread = models.ForeignKey("chat.Thread", on_delete=models.CASCADE, related_name="layouts")
    pinned_call = models.ForeignKey(
        "chat.ToolCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    pane_width = models.PositiveIntegerField(default=DEFAULT_PANE_WIDTH)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "chat"
        constraints = [
            models.UniqueConstraint(fields=["user", "thread"], name="unique_thread_layout")
        ]

    def __str__(self) -> str:
        return f"layout of thread {self.thread_id} for user {self.user_id}"
