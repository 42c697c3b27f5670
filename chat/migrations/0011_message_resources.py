# Issue 25 part 4: server resources attached to messages (chat/server_context/models.py).

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0010_attachments'),  # the lead linearises (other helpers add chat migrations too)
        ('mcp_bridge', '0004_tool_schema_bounds'),
    ]

    operations = [
        migrations.CreateModel(
            name='MessageResource',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('origin', models.CharField(choices=[('attached', 'attached by a member'), ('prompt', 'embedded in a prompt')], max_length=10)),
                ('uri', models.CharField(max_length=2000)),
                ('name', models.CharField(blank=True, max_length=300)),
                ('mime_type', models.CharField(blank=True, max_length=200)),
                ('text', models.TextField(blank=True)),
                ('text_chars', models.PositiveIntegerField(default=0)),
                ('binary_size', models.PositiveIntegerField(blank=True, null=True)),
                ('subscribed', models.BooleanField(default=False)),
                ('fetched_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(blank=True, null=True)),
                ('update_count', models.PositiveIntegerField(default=0)),
                ('message', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='server_resources', to='chat.message')),
                ('server', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='mcp_bridge.mcpserver')),
                ('thread', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chat.thread')),
            ],
            options={
                'indexes': [models.Index(fields=['server', 'uri'], name='message_resource_uri')],
            },
        ),
    ]
