"""The audit log moves from ``bindings`` to the ``audit`` app: in the state only.

Its table (``bindings_auditevent``, name kept) and append-only triggers come from
bindings.0001 (or the old bindings migrations it replaces), so data and triggers stay.
The content type follows the model, so the permissions granted on it stay too.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def move_content_type(apps, schema_editor) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    if not content_type.objects.using(db).filter(app_label="audit", model="auditevent").exists():
        content_type.objects.using(db).filter(app_label="bindings", model="auditevent").update(
            app_label="audit"
        )


def restore_content_type(apps, schema_editor) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    content_type.objects.using(schema_editor.connection.alias).filter(
        app_label="audit", model="auditevent"
    ).update(app_label="bindings")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('bindings', '0001_squashed_0006_allowances'),
        ('chat', '0001_initial'),
        ('contenttypes', '0002_remove_content_type_name'),
        ('mcp_bridge', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='AuditEvent',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                        ('event_type', models.PositiveIntegerField(db_index=True)),
                        ('actor_kind', models.CharField(max_length=20)),
                        ('actor_label', models.CharField(blank=True, max_length=200)),
                        ('tool_name', models.CharField(blank=True, max_length=200)),
                        ('action', models.CharField(blank=True, db_index=True, max_length=40)),
                        ('decision', models.CharField(db_index=True, max_length=10)),
                        ('reason', models.CharField(blank=True, max_length=200)),
                        ('argument_digest', models.CharField(blank=True, max_length=64)),
                        ('latency_ms', models.FloatField(blank=True, null=True)),
                        ('extra', models.JSONField(blank=True, default=dict)),
                        ('actor_user', models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('binding', models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='bindings.appbinding')),
                        ('server', models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='mcp_bridge.mcpserver')),
                        ('thread', models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='chat.thread')),
                        ('workspace', models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='chat.workspace')),
                    ],
                    options={
                        'db_table': 'bindings_auditevent',
                        'ordering': ['-created_at', '-id'],
                        'indexes': [models.Index(fields=['workspace', 'created_at'], name='bindings_au_workspa_a10ac3_idx'), models.Index(fields=['decision', 'created_at'], name='bindings_au_decisio_f97efa_idx')],
                    },
                ),
            ],
        ),
        migrations.RunPython(move_content_type, restore_content_type),
    ]
