"""Which tools each open app view provides, per browser socket (``chat.view_tools``).

A row exists while the view is mounted in that socket's page: the browser registers the
view's ``tools/list`` answer (again on ``notifications/tools/list_changed``) and withdraws
it when the view unmounts; the socket's disconnect withdraws all of its rows. Its app is
chat (``chat.models`` imports this module); relations name chat's models by label.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class OpenViewTools(models.Model):
    view = models.ForeignKey("chat.ToolCall", on_delete=models.CASCADE, related_name="+")
    thread = models.ForeignKey("chat.Thread", on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # The socket whose page shows the view: host→view calls are sent to it.
    channel_name = models.CharField(max_length=200)
    # The view's tools as sanitised here (name, title, description, inputSchema, annotations).
    tools = models.JSONField(default=list, blank=True)
    # The protocol version the view asked for: a v2 draft gets ui/call-view-tool.
    protocol = models.CharField(max_length=40, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["view", "channel_name"], name="open_view_tools_once")
        ]
        indexes = [models.Index(fields=["thread", "user"])]

    def __str__(self) -> str:
        return f"tools of view {self.view_id} in {self.channel_name}"
