"""The workspace, thread, binding and server of an audit event become plain id columns, in
the state only: the audit app depends on no other app from here on (0001 keeps the history
of the move out of ``bindings``).

The database already has what the new fields describe: the same ``bigint`` columns
(``workspace_id`` …), each indexed under the name Django gives a field's index, and no
foreign-key constraint (the old keys had ``db_constraint=False``; bindings.0001 created
``thread_id`` and ``workspace_id`` as plain columns already). Nothing is rebuilt, so
SQLite keeps the table's append-only trigger.
"""

from django.db import migrations, models

ID_FIELDS = ("workspace", "thread", "binding", "server")


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name='auditevent', name='bindings_au_workspa_a10ac3_idx'),
                *[migrations.RemoveField(model_name='auditevent', name=name) for name in ID_FIELDS],
                *[
                    migrations.AddField(
                        model_name='auditevent',
                        name=f'{name}_id',
                        field=models.BigIntegerField(blank=True, db_index=True, null=True),
                    )
                    for name in ID_FIELDS
                ],
                migrations.AddIndex(
                    model_name='auditevent',
                    index=models.Index(fields=['workspace_id', 'created_at'], name='bindings_au_workspa_a10ac3_idx'),
                ),
            ],
        ),
    ]
