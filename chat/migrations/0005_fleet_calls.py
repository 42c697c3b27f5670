from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0004_events"),
    ]

    operations = [
        migrations.AddField(
            model_name="toolcall",
            name="runner",
            field=models.CharField(blank=True, default="", max_length=120),
        ),
        migrations.AddField(
            model_name="toolcall",
            name="runner_seen_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
