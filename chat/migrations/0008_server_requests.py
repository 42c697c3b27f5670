# Server requests to a person (issue 25 part 1): elicitation and sampling consent cards.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0007_thread_layout'),  # the lead linearises: main's latest is 0007
        ('mcp_bridge', '0004_tool_schema_bounds'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ServerRequest',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('elicitation_form', 'question (form)'), ('elicitation_url', 'question (web page)'), ('sampling', 'sampling request')], max_length=20)),
                ('workspace_id', models.BigIntegerField(db_index=True, verbose_name='workspace')),
                ('status', models.CharField(choices=[('pending', 'pending'), ('accepted', 'accepted'), ('declined', 'declined'), ('cancelled', 'cancelled'), ('expired', 'expired'), ('failed', 'failed')], default='pending', max_length=12)),
                ('params', models.JSONField(blank=True, default=dict)),
                ('elicitation_id', models.CharField(blank=True, db_index=True, max_length=200)),
                ('wait_key', models.CharField(blank=True, max_length=64)),
                ('retries_call', models.BooleanField(default=False)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('expires_at', models.DateTimeField()),
                ('decided_at', models.DateTimeField(blank=True, null=True)),
                ('completed_at', models.DateTimeField(blank=True, null=True)),
                ('outcome', models.JSONField(blank=True, default=dict)),
                ('decided_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('for_user', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('server', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='mcp_bridge.mcpserver')),
                ('thread', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='server_requests', to='chat.thread')),
                ('tool_call', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='server_requests', to='chat.toolcall')),
            ],
            options={
                'ordering': ['id'],
                'indexes': [models.Index(fields=['thread', 'status'], name='chat_server_thread__5efab0_idx')],
            },
        ),
        migrations.CreateModel(
            name='SamplingAllowance',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('revoked_at', models.DateTimeField(blank=True, null=True)),
                ('granted_by', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('server', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='mcp_bridge.mcpserver')),
                ('server_request', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='chat.serverrequest')),
                ('thread', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='sampling_allowances', to='chat.thread')),
            ],
            options={
                'indexes': [models.Index(fields=['thread', 'server'], name='chat_sampli_thread__2decc6_idx')],
            },
        ),
    ]
