"""Drop the foreign-key constraints from bindings' tables to chat's (databases that applied
the old 0001–0006): bindings keeps workspaces, threads and tool calls as plain ids, so a
chat row can be deleted before or after the bindings rows that name it (chat's receivers
delete those through bindings.services in the same transaction). A new database has no
such constraint and this changes nothing.

PostgreSQL drops each constraint; SQLite cannot drop one, so the table is rebuilt from
the current state (same columns, indexes and constraints, no REFERENCES to chat).
"""

from django.db import migrations

TABLES = {
    "AppBinding": ("workspace_id", "thread_id"),
    "ApprovalRequest": ("thread_id", "tool_call_id"),
    "Allowance": ("workspace_id", "thread_id"),
}


def _chat_foreign_keys(connection, table: str, columns: tuple[str, ...]) -> list[str]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return [
        name
        for name, info in constraints.items()
        if info.get("foreign_key")
        and info["foreign_key"][0].startswith("chat_")
        and set(info["columns"]) & set(columns)
    ]


def drop(apps, schema_editor) -> None:
    connection = schema_editor.connection
    for model_name, columns in TABLES.items():
        model = apps.get_model("bindings", model_name)
        table = model._meta.db_table
        names = _chat_foreign_keys(connection, table, columns)
        if not names:
            continue
        if connection.vendor == "sqlite":
            schema_editor._remake_table(model)
        else:
            for name in names:
                schema_editor.execute(
                    schema_editor._delete_constraint_sql(schema_editor.sql_delete_fk, model, name)
                )


class Migration(migrations.Migration):
    dependencies = [("bindings", "0001_squashed_0006_allowances")]

    operations = [migrations.RunPython(drop, migrations.RunPython.noop)]
