# Tool calls run as MCP tasks (chat.calls.tasks). Depends on the latest chat migration on
# main when written (0007); the lead linearises the 0008/0009 siblings.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0008_server_requests'),
    ]

    operations = [
        migrations.AddField(
            model_name='toolcall',
            name='task_id',
            field=models.CharField(blank=True, default='', max_length=255),
        ),
        migrations.AddField(
            model_name='toolcall',
            name='task_status',
            field=models.CharField(blank=True, default='', max_length=20),
        ),
        migrations.AddField(
            model_name='toolcall',
            name='task_status_message',
            field=models.CharField(blank=True, default='', max_length=500),
        ),
        migrations.AddField(
            model_name='toolcall',
            name='task_poll_interval_ms',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='toolcall',
            name='task_ttl_ms',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='toolcall',
            name='task_polled_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
