from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0003_fleet"),
    ]

    operations = [
        migrations.AddField(
            model_name="threadevent",
            name="origin",
            field=models.CharField(blank=True, default="", max_length=32),
        ),
    ]
