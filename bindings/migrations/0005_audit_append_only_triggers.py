"""The database itself refuses to change audit rows, not just the ORM (DESIGN §8).

PostgreSQL refuses UPDATE and DELETE. SQLite (the embedded profile) refuses UPDATE only:
Django empties SQLite tables with DELETE (tests' flush), which a DELETE trigger would
break; the ORM's refusal and the single writer still cover it there.
"""

from django.db import migrations

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
    dependencies = [("bindings", "0004_approval_cancelled")]

    operations = [migrations.RunPython(install, uninstall)]
