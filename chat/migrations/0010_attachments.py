"""Files members attach (issue 26): MediaAsset's origin, message, uploader and extracted
text; a workspace's file limits and retention (chat.media.models)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0009_tool_call_tasks"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="mediaasset",
            name="origin",
            field=models.CharField(
                choices=[
                    ("tool_result", "tool result"),
                    ("attachment", "member's attachment"),
                    ("app_upload", "app view's upload"),
                ],
                default="tool_result",
                max_length=12,
            ),
        ),
        migrations.AddField(
            model_name="mediaasset",
            name="message",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="attachments",
                to="chat.message",
            ),
        ),
        migrations.AddField(
            model_name="mediaasset",
            name="uploaded_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="mediaasset",
            name="text_path",
            field=models.CharField(blank=True, max_length=500),
        ),
        migrations.AddField(
            model_name="mediaasset",
            name="text_truncated",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="mediaasset",
            name="pages",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name="WorkspaceFileSettings",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "max_file_bytes",
                    models.PositiveBigIntegerField(
                        help_text="Largest file a member may attach, in bytes."
                    ),
                ),
                (
                    "max_total_bytes",
                    models.PositiveBigIntegerField(
                        help_text="All attached files of the workspace together, in bytes."
                    ),
                ),
                (
                    "retention_days",
                    models.PositiveIntegerField(
                        default=0,
                        help_text="Attached files are deleted this many days after upload; "
                        "0 keeps them.",
                    ),
                ),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "workspace",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="file_settings",
                        to="chat.workspace",
                    ),
                ),
            ],
            options={
                "verbose_name": "workspace file settings",
                "verbose_name_plural": "workspace file settings",
            },
        ),
        migrations.CreateModel(
            name="AttachedFile",
            fields=[],
            options={
                "verbose_name": "attached file",
                "verbose_name_plural": "attached files",
                "proxy": True,
                "indexes": [],
                "constraints": [],
            },
            bases=("chat.mediaasset",),
        ),
    ]
