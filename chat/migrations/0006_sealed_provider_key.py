"""Seal workspaces' provider API keys (security issue 23, F13).

The column becomes text, each key is sealed with ``mcp_bridge.sealing`` (the OAuth grants'
keys), then the field becomes ``SealedTextField`` (same column type). Reversible.
"""

from django.db import migrations, models

import mcp_bridge.sealed_fields
from mcp_bridge.sealing import seal, unseal


def _rewrite(apps, convert):
    workspace_model = apps.get_model("chat", "Workspace")
    for pk, key in workspace_model.objects.values_list("pk", "provider_api_key"):
        workspace_model.objects.filter(pk=pk).update(provider_api_key=convert(key))


def _sealed(key):
    if not key or unseal(key) is not None:  # empty, or sealed already
        return key or ""
    return seal({"text": key})


def _plain(key):
    opened = unseal(key) if key else None
    text = opened.get("text") if opened else None
    return text[:300] if isinstance(text, str) else ""


def seal_keys(apps, schema_editor):
    _rewrite(apps, _sealed)


def unseal_keys(apps, schema_editor):
    _rewrite(apps, _plain)


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0005_fleet_calls"),
    ]

    operations = [
        migrations.AlterField(
            model_name="workspace",
            name="provider_api_key",
            field=models.TextField(blank=True),
        ),
        migrations.RunPython(seal_keys, unseal_keys),
        migrations.AlterField(
            model_name="workspace",
            name="provider_api_key",
            field=mcp_bridge.sealed_fields.SealedTextField(blank=True),
        ),
    ]
