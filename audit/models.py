"""The append-only audit log: the bottom layer, which imports no other project app.

The workspace, thread, binding and server an event names are plain indexed id columns, not
foreign keys: the log outlives the rows it names (deleting a workspace or a server never
rewrites its history), and the audit app depends on no other app, in code or migrations.
The review screens (``audit_review``) look the names up.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class AuditQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise PermissionError("Audit events are append-only: they cannot be changed.")

    def delete(self):
        raise PermissionError("Audit events are append-only: they cannot be deleted.")


class AuditEvent(models.Model):
    """Append-only. Written only by audit.writer.record(), inside the change it records.

    Its one foreign key (the acting user) does not cascade and has no DB constraint:
    deleting a user must never rewrite or remove their history.
    """

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    event_type = models.PositiveIntegerField(db_index=True)
    actor_kind = models.CharField(max_length=20)  # user | model | app_view | system
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    actor_label = models.CharField(max_length=200, blank=True)
    # Ids by value (see the module docstring); the column names are the old foreign keys'.
    workspace_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    thread_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    binding_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    server_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    tool_name = models.CharField(max_length=200, blank=True)
    action = models.CharField(max_length=40, blank=True, db_index=True)
    decision = models.CharField(max_length=10, db_index=True)
    reason = models.CharField(max_length=200, blank=True)
    argument_digest = models.CharField(max_length=64, blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    extra = models.JSONField(default=dict, blank=True)

    objects = AuditQuerySet.as_manager()

    class Meta:
        # The table keeps the name it had when the model lived in ``bindings``.
        db_table = "bindings_auditevent"
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["workspace_id", "created_at"]),
            models.Index(fields=["decision", "created_at"]),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.event_type} {self.decision}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:
            raise PermissionError("Audit events are append-only: they cannot be changed.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise PermissionError("Audit events are append-only: they cannot be deleted.")
