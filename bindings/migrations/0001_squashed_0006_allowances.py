"""Bindings' history in one migration, with no dependency on chat (issue 14).

It replaces 0001–0006: a database that applied them keeps its tables; a new one gets the
same tables from here. Workspaces, threads and tool calls are plain id columns (same
names as the old foreign keys' columns; 0002 drops the old constraints). The audit table
(``bindings_auditevent``) is created here in the database only: the ``AuditEvent`` model
belongs to the ``audit`` app (audit.0001 adds it to the state), and the database refuses
to change its rows (PostgreSQL: UPDATE and DELETE; SQLite: UPDATE — Django empties SQLite
tables with DELETE in tests, which a DELETE trigger would break; the ORM's refusal and the
single writer still cover it there).
"""

import bindings.models
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

PG_FUNCTION = """
CREATE OR REPLACE FUNCTION atrium_audit_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit events are append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
"""
PG_TRIGGER = """
CREATE TRIGGER bindings_auditevent_append_only
BEFORE UPDATE OR DELETE ON bindings_auditevent
FOR EACH ROW EXECUTE FUNCTION atrium_audit_append_only();
"""
PG_DROP = """
DROP TRIGGER IF EXISTS bindings_auditevent_append_only ON bindings_auditevent;
DROP FUNCTION IF EXISTS atrium_audit_append_only();
"""
SQLITE_TRIGGER = """
CREATE TRIGGER IF NOT EXISTS bindings_auditevent_no_update
BEFORE UPDATE ON bindings_auditevent
BEGIN
    SELECT RAISE(ABORT, 'audit events are append-only: UPDATE refused');
END;
"""
SQLITE_DROP = "DROP TRIGGER IF EXISTS bindings_auditevent_no_update;"


def install(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(PG_FUNCTION, params=None)
        schema_editor.execute(PG_TRIGGER, params=None)
    elif vendor == "sqlite":
        schema_editor.execute(SQLITE_TRIGGER)


def uninstall(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(PG_DROP, params=None)
    elif vendor == "sqlite":
        schema_editor.execute(SQLITE_DROP)




class Migration(migrations.Migration):

    initial = True

    replaces = [
        ('bindings', '0001_initial'),
        ('bindings', '0002_initial'),
        ('bindings', '0003_binding_scope_unique'),
        ('bindings', '0004_approval_cancelled'),
        ('bindings', '0005_audit_append_only_triggers'),
        ('bindings', '0006_allowances'),
    ]

    dependencies = [
        ('mcp_bridge', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='AppBinding',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('workspace_id', models.BigIntegerField(db_index=True, verbose_name='workspace')),
                ('thread_id', models.BigIntegerField(blank=True, db_index=True, help_text='Leave empty to bind to the whole workspace.', null=True, verbose_name='thread')),
                ('enabled', models.BooleanField(default=True)),
                ('enabled_tools', models.JSONField(blank=True, help_text='Tool names this binding enables; empty means all.', null=True)),
                ('allowed_domains', models.JSONField(blank=True, help_text='CSP domains an admin allows (list, or {connectDomains, resourceDomains, frameDomains, baseUriDomains}); empty allows what the server declares.', null=True)),
                ('granted_permissions', models.JSONField(blank=True, default=list)),
                ('allowed_link_schemes', models.JSONField(blank=True, default=bindings.models.default_link_schemes)),
                ('deep_link_protocol', models.CharField(blank=True, max_length=40)),
                ('ui_message_rate_limit', models.PositiveIntegerField(default=6, help_text='ui/message requests per view per minute.')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
                ('server', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='bindings', to='mcp_bridge.mcpserver')),
            ],
            options={
                'ordering': ['workspace_id', 'server'],
            },
        ),
        migrations.CreateModel(
            name='ApprovalRequest',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('thread_id', models.BigIntegerField(db_index=True, verbose_name='thread')),
                ('tool_call_id', models.BigIntegerField(blank=True, null=True, unique=True, verbose_name='tool call')),
                ('tool_name', models.CharField(max_length=200)),
                ('arguments', models.JSONField(default=dict)),
                ('arguments_digest', models.CharField(max_length=64)),
                ('risk', models.CharField(choices=[('read', 'read'), ('write', 'write'), ('destructive', 'destructive')], max_length=20)),
                ('requested_by_kind', models.CharField(max_length=20)),
                ('status', models.CharField(choices=[('pending', 'pending'), ('approved', 'approved'), ('rejected', 'rejected'), ('expired', 'expired'), ('cancelled', 'cancelled')], default='pending', max_length=10)),
                ('decided_at', models.DateTimeField(blank=True, null=True)),
                ('reason', models.TextField(blank=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('expires_at', models.DateTimeField()),
                ('binding', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='approvals', to='bindings.appbinding')),
                ('decided_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('requested_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('server', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to='mcp_bridge.mcpserver')),
            ],
            options={
                'ordering': ['-created_at'],
            },
        ),
        migrations.CreateModel(
            name='Allowance',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('workspace_id', models.BigIntegerField(db_index=True, verbose_name='workspace')),
                ('thread_id', models.BigIntegerField(blank=True, db_index=True, null=True, verbose_name='thread')),
                ('tool_name', models.CharField(max_length=200)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('revoked_at', models.DateTimeField(blank=True, null=True)),
                ('granted_by', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('revoked_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('binding', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='allowances', to='bindings.appbinding')),
                ('approval', models.ForeignKey(blank=True, help_text='The approval request this allowance was granted on.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='allowances', to='bindings.approvalrequest')),
            ],
            options={
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='ToolPolicy',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('tool_name', models.CharField(max_length=200)),
                ('risk', models.CharField(blank=True, choices=[('read', 'read'), ('write', 'write'), ('destructive', 'destructive')], help_text='Empty: from annotations.', max_length=20)),
                ('approval', models.CharField(blank=True, choices=[('auto', 'run without asking'), ('ask', 'ask a member first'), ('deny', 'never run')], help_text='Empty: from risk.', max_length=10)),
                ('visibility_override', models.JSONField(blank=True, help_text='Can only narrow, e.g. ["app"].', null=True)),
                ('binding', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='policies', to='bindings.appbinding')),
            ],
            options={
                'verbose_name_plural': 'tool policies',
            },
        ),
        migrations.AddConstraint(
            model_name='appbinding',
            constraint=models.UniqueConstraint(condition=models.Q(('thread_id__isnull', True)), fields=('server', 'workspace_id'), name='one_workspace_binding_per_server'),
        ),
        migrations.AddConstraint(
            model_name='appbinding',
            constraint=models.UniqueConstraint(condition=models.Q(('thread_id__isnull', False)), fields=('server', 'thread_id'), name='one_thread_binding_per_server'),
        ),
        migrations.AddIndex(
            model_name='approvalrequest',
            index=models.Index(fields=['status', 'expires_at'], name='bindings_ap_status_e707bc_idx'),
        ),
        migrations.AddIndex(
            model_name='allowance',
            index=models.Index(fields=['binding', 'tool_name', 'revoked_at'], name='bindings_al_binding_0dba93_idx'),
        ),
        migrations.AddIndex(
            model_name='allowance',
            index=models.Index(fields=['thread_id', 'revoked_at'], name='bindings_al_thread__1a3863_idx'),
        ),
        migrations.AddConstraint(
            model_name='toolpolicy',
            constraint=models.UniqueConstraint(fields=('binding', 'tool_name'), name='unique_policy_per_tool'),
        ),
        # The audit table, in the database only (its model is audit.AuditEvent).
        migrations.SeparateDatabaseAndState(
            database_operations=[
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
                        # Foreign keys to chat without a constraint, as plain indexed columns.
                        ('thread_id', models.BigIntegerField(blank=True, db_index=True, null=True)),
                        ('workspace_id', models.BigIntegerField(blank=True, db_index=True, null=True)),
                    ],
                    options={
                        'db_table': 'bindings_auditevent',
                        'ordering': ['-created_at', '-id'],
                        'indexes': [
                            models.Index(fields=['workspace_id', 'created_at'], name='bindings_au_workspa_a10ac3_idx'),
                            models.Index(fields=['decision', 'created_at'], name='bindings_au_decisio_f97efa_idx'),
                        ],
                    },
                ),
                migrations.RunPython(install, uninstall),
            ],
        ),
    ]
