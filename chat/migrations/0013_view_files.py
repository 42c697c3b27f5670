# Issue 26 part 4: the app view that uploaded or saved a file (chat.media.view_files).

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0012_view_tools"),
    ]

    operations = [
        migrations.AddField(
            model_name="mediaasset",
            name="app_view",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="chat.toolcall",
            ),
        ),
    ]
