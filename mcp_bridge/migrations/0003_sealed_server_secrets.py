"""Seal the literal ``env`` and ``headers`` of MCP servers (security issue 23, F13).

The columns become text (JSON text as it was), each row's object is sealed with
``mcp_bridge.sealing`` (the OAuth grants' keys), then the fields become ``SealedJSONField``
(same column type, no schema change). Reversible: unsealing writes the JSON text back.
"""

import json

from django.db import migrations, models

import mcp_bridge.sealed_fields
from mcp_bridge.sealing import seal, unseal

SECRET_FIELDS = ("env", "headers")


def _sealed(text):
    if not text or unseal(text) is not None:  # empty, or sealed already
        return text or ""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    return seal(value) if isinstance(value, dict) and value else ""


def _plain(text):
    value = unseal(text) if text else None
    return json.dumps(value if isinstance(value, dict) else {})


def _rewrite(apps, convert):
    server_model = apps.get_model("mcp_bridge", "McpServer")
    for row in server_model.objects.values("pk", *SECRET_FIELDS):
        changes = {name: convert(row[name]) for name in SECRET_FIELDS}
        server_model.objects.filter(pk=row["pk"]).update(**changes)


def seal_rows(apps, schema_editor):
    _rewrite(apps, _sealed)


def unseal_rows(apps, schema_editor):
    _rewrite(apps, _plain)


class Migration(migrations.Migration):
    dependencies = [
        ("mcp_bridge", "0002_oauth"),
    ]

    operations = [
        *[
            migrations.AlterField(
                model_name="mcpserver",
                name=name,
                field=models.TextField(blank=True, default=""),
            )
            for name in SECRET_FIELDS
        ],
        migrations.RunPython(seal_rows, unseal_rows),
        *[
            migrations.AlterField(
                model_name="mcpserver",
                name=name,
                field=mcp_bridge.sealed_fields.SealedJSONField(blank=True, default=dict),
            )
            for name in SECRET_FIELDS
        ],
    ]
