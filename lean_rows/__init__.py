"""Lean row statements for the hot path of an app view's ``tools/call`` (field names in,
model instances out; no SQL in callers).

Only for the statements the round-trip benchmark runs on every call (bench/README.md,
"Lean rows"): compiling an ORM statement costs ~0.5 ms for a one-table filter and ~1.7 ms
with an ``Exists()``, the prepared statements here ~0.05 ms; a call runs three of them on
PostgreSQL (one ``select_together`` read, two ``write_together`` writes). Everything else
uses the ORM.

What they bypass, on purpose: ``Model.save()`` overrides and the ``pre_save``/``post_save``
signals (``insert_row``/``update_row``) — so use them only for models whose ``save()`` adds
nothing and that no receiver listens to (``ToolCall``, ``ThreadEvent``, ``AuditEvent``).
What they keep: every field's ``pre_save()`` (``auto_now``/``auto_now_add``) and
``get_db_prep_save()``, the database router, and the ORM's value converters on reads, so
an instance is what the ORM would have loaded or stored (tests/bindings/test_lean_rows_perf.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model

_M = TypeVar("_M", bound=Model)


@dataclass(frozen=True)
class OrNull:
    """A condition value: the field equals ``value`` or is NULL (a thread's own row or
    the workspace-wide one)."""

    value: Any


@dataclass(frozen=True)
class Above:
    """A condition value: the field is greater than ``value`` (an unexpired session)."""

    value: Any


@dataclass(frozen=True)
class Same:
    """A condition value in ``select_together``: the field equals column ``name`` of an
    earlier part's ``model`` (the view's server: ``McpServer`` ``id=Same(ToolCall,
    "server_id")``)."""

    model: type[Model]
    name: str


class RowExists:
    """A condition on another table: a row of ``model`` matches ``where`` (``EXISTS``)."""

    def __init__(self, model: type[Model], **where: Any) -> None:
        self.model = model
        self.where = where


# ------------------------------------------------------------------------------ conditions


def _field(model: type[Model], name: str) -> Field[Any, Any]:
    """A concrete field by name or attname (``thread`` or ``thread_id``)."""
    field = model._meta.get_field(name)
    if not isinstance(field, Field) or not field.concrete:
        raise TypeError(f"{model.__name__}.{name} is not a column")
    return field


def _column(field: Field[Any, Any]) -> str:
    if field.column is None:  # only non-concrete fields have none
        raise TypeError(f"{field} is not a column")
    return field.column


def _shape(value: Any) -> Any:
    if value is None:
        return "null"
    if isinstance(value, OrNull):
        return "or_null"
    if isinstance(value, Above):
        return "above"
    if isinstance(value, Same):
        return ("same", value.model, value.name)
    return "equal"


def _is_parameter(value: Any) -> bool:
    return value is not None and not isinstance(value, Same)


# (model, alias, condition shapes) -> (SQL, the field of each parameter), built once.
_CONDITIONS: dict[tuple[Any, ...], tuple[str, list[Field[Any, Any]]]] = {}


def _condition_sql(
    model: type[Model],
    shapes: tuple[tuple[str, Any], ...],
    exists: tuple[tuple[type[Model], tuple[tuple[str, Any], ...]], ...],
    connection: BaseDatabaseWrapper,
) -> tuple[str, list[Field[Any, Any]]]:
    key = (model, connection.alias, shapes, exists)
    found = _CONDITIONS.get(key)
    if found is not None:
        return found
    qn = connection.ops.quote_name
    table = qn(model._meta.db_table)
    clauses: list[str] = []
    fields: list[Field[Any, Any]] = []
    for name, shape in shapes:
        field = _field(model, name)
        column = f"{table}.{qn(_column(field))}"
        if shape == "null":
            clauses.append(f"{column} IS NULL")
            continue
        if isinstance(shape, tuple):  # Same: another part's column
            _, other, other_name = shape
            other_column = _column(_field(other, other_name))
            clauses.append(f"{column} = {qn(other._meta.db_table)}.{qn(other_column)}")
            continue
        clauses.append(
            {
                "or_null": f"({column} = %s OR {column} IS NULL)",
                "above": f"{column} > %s",
                "equal": f"{column} = %s",
            }[shape]
        )
        fields.append(field)
    for other_model, other_shapes in exists:
        condition, other_fields = _condition_sql(other_model, other_shapes, (), connection)
        other_table = qn(other_model._meta.db_table)
        clauses.append(f"EXISTS (SELECT 1 FROM {other_table} WHERE {condition})")
        fields.extend(other_fields)
    found = _CONDITIONS[key] = (" AND ".join(clauses) or "1 = 1", fields)
    return found


def _conditions(
    model: type[Model],
    where: Mapping[str, Any],
    connection: BaseDatabaseWrapper,
    exists: Iterable[RowExists] = (),
) -> tuple[str, list[Any]]:
    """``field = %s`` per condition, ANDed; ``None`` is ``IS NULL``, ``OrNull(v)`` is
    ``(field = %s OR field IS NULL)``, ``Above(v)`` is ``field > %s``, ``Same(model, name)``
    compares with another table's column (``select_together``); each ``RowExists``
    adds an ``EXISTS`` on its table. Values are prepared as the ORM prepares them."""
    exists = tuple(exists)
    sql, fields = _condition_sql(
        model,
        tuple((name, _shape(value)) for name, value in where.items()),
        tuple(
            (other.model, tuple((name, _shape(v)) for name, v in other.where.items()))
            for other in exists
        ),
        connection,
    )
    values = [v for v in where.values() if _is_parameter(v)]
    for other in exists:
        values.extend(v for v in other.where.values() if _is_parameter(v))
    params = [
        field.get_db_prep_value(v.value if isinstance(v, OrNull | Above) else v, connection)
        for field, v in zip(fields, values, strict=True)
    ]
    return sql, params


# ----------------------------------------------------------------------------------- reads

_SELECTS: dict[tuple[type[Model], str, tuple[str, ...]], tuple[str, list[Any], list[Any]]] = {}


def _select_statement(
    model: type[Model], alias: str, names: tuple[str, ...]
) -> tuple[str, list[Any], list[Any]]:
    """(the columns, comma-separated; the fields; their converters), built once."""
    key = (model, alias, names)
    found = _SELECTS.get(key)
    if found is None:
        connection = connections[alias]
        meta = model._meta
        table = meta.db_table
        # In the model's field order: from_db() fills the others in as deferred.
        # The primary key always, as `.only()` keeps it.
        fields = [f for f in meta.concrete_fields if not names or f.name in names or f.primary_key]
        qn = connection.ops.quote_name
        columns = ", ".join(f"{qn(table)}.{qn(_column(f))}" for f in fields)
        # Connections are per thread; these converters only depend on the backend and the
        # settings (each gets the calling thread's connection as an argument).
        converters = []
        for field in fields:
            col = field.get_col(table)
            converters.append(
                (connection.ops.get_db_converters(col) + col.get_db_converters(connection), col)
            )
        found = _SELECTS[key] = (columns, fields, converters)
    return found


def _instance(
    model: type[_M],
    alias: str,
    fields: list[Any],
    converters: list[Any],
    row: Any,
    connection: BaseDatabaseWrapper,
) -> _M:
    values = []
    for value, (funcs, col) in zip(row, converters, strict=True):
        for func in funcs:
            value = func(value, col, connection)
        values.append(value)
    return model.from_db(alias, [f.attname for f in fields], values)


def select_rows(
    model: type[_M], *exists: RowExists, only: Iterable[str] = (), **where: Any
) -> list[_M]:
    """The rows whose fields match ``where`` and for which every ``exists`` holds (see
    ``_conditions``), as model instances converted exactly as the ORM converts them.
    ``only``: load just these fields (the others load on access, like ``.only()``)."""
    alias = router.db_for_read(model)
    connection = connections[alias]
    columns, fields, converters = _select_statement(model, alias, tuple(only))
    condition, params = _conditions(model, where, connection, exists)
    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {columns} FROM {table} WHERE {condition}", params)
        rows = cursor.fetchall()
    return [_instance(model, alias, fields, converters, row, connection) for row in rows]


class Part:
    """One table's read in ``select_together``: as ``select_rows``' arguments."""

    def __init__(
        self, model: type[Model], *exists: RowExists, only: Iterable[str] = (), **where: Any
    ) -> None:
        self.model = model
        self.exists = exists
        self.only = tuple(only)
        self.where = where


def select_together(*parts: Part) -> list[list[Any]]:
    """Each part's rows (as ``select_rows`` would return them), read in one statement: one
    round trip instead of one per table, for the few-row reads the hot path makes in a row
    (a view's request: the membership, the view and its server; a call's authority: the
    binding, its policy and the tool). A part's condition may name an earlier part's
    column (``Same``); a part with no match adds no row and does not hide the others.

    Built as ``LEFT JOIN``s on one row, so the statement returns the product of the parts'
    rows (deduplicated here by primary key): for reads of one or two rows a part, each
    table at most once."""
    if len(parts) == 1:  # a plain read
        (part,) = parts
        return [select_rows(part.model, *part.exists, only=part.only, **part.where)]
    tables = [part.model._meta.db_table for part in parts]
    if len(set(tables)) != len(tables):
        raise ValueError("select_together reads each table at most once")
    alias = router.db_for_read(parts[0].model)
    connection = connections[alias]
    qn = connection.ops.quote_name
    selected: list[str] = []
    joins: list[str] = []
    params: list[Any] = []
    shapes = []
    for part in parts:
        columns, fields, converters = _select_statement(part.model, alias, part.only)
        condition, values = _conditions(part.model, part.where, connection, part.exists)
        selected.append(columns)
        joins.append(f"LEFT JOIN {qn(part.model._meta.db_table)} ON {condition}")
        params.extend(values)
        pk_at = next(i for i, f in enumerate(fields) if f.primary_key)
        shapes.append((part.model, fields, converters, pk_at))
    sql = "SELECT {} FROM (SELECT 1) AS {} {}".format(
        ", ".join(selected), qn("one"), " ".join(joins)
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    found: list[list[Any]] = [[] for _ in parts]
    seen: list[set[Any]] = [set() for _ in parts]
    for row in rows:
        start = 0
        for k, (model, fields, converters, pk_at) in enumerate(shapes):
            values = row[start : start + len(fields)]
            start += len(fields)
            pk = values[pk_at]
            if pk is None or pk in seen[k]:
                continue  # no row of this part (LEFT JOIN), or one already taken
            seen[k].add(pk)
            found[k].append(_instance(model, alias, fields, converters, values, connection))
    return found


# ---------------------------------------------------------------------------------- writes

_INSERTS: dict[tuple[type[Model], str], tuple[str, list[Any], list[Any], Any]] = {}


def _insert_statement(model: type[Model], alias: str) -> tuple[str, list[Any], list[Any], Any]:
    key = (model, alias)
    found = _INSERTS.get(key)
    if found is None:
        connection = connections[alias]
        meta = model._meta
        fields = _insert_fields(model)
        qn = connection.ops.quote_name
        sql = "INSERT INTO {} ({}) VALUES ({})".format(
            qn(meta.db_table),
            ", ".join(qn(_column(f)) for f in fields),
            ", ".join(["%s"] * len(fields)),
        )
        returning = list(meta.db_returning_fields)
        returning_params: Any = None
        if connection.features.can_return_columns_from_insert:
            # Defined by every backend that can return columns (not on the base class).
            ops = connection.ops
            suffix, returning_params = ops.return_insert_columns(returning)  # type: ignore[attr-defined]
            sql = f"{sql} {suffix}"
        found = _INSERTS[key] = (sql, fields, returning, returning_params)
    return found


def insert_row(instance: _M) -> _M:
    """INSERT a new instance (like ``save()`` of a new row) and set its primary key."""
    model = type(instance)
    alias = router.db_for_write(model, instance=instance)
    connection = connections[alias]
    sql, fields, returning, returning_params = _insert_statement(model, alias)
    params = [f.get_db_prep_save(f.pre_save(instance, True), connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        if returning_params is not None:
            # As above: only on the backends that return columns.
            ops = connection.ops
            values = ops.fetch_returned_insert_columns(cursor, returning_params)  # type: ignore[attr-defined]
        else:
            meta = model._meta
            values = [connection.ops.last_insert_id(cursor, meta.db_table, _column(meta.pk))]
    _returned(instance, list(values), connection, alias)
    return instance


def update_row(
    instance: Model, fields: Iterable[str], *, only_if: Mapping[str, Any] | None = None
) -> int:
    """UPDATE these fields of a stored instance (like ``save(update_fields=...)``), only
    while its row also matches ``only_if`` (field conditions, as for ``select_rows``).
    Returns the rows changed (0 or 1)."""
    model = type(instance)
    alias = router.db_for_write(model, instance=instance)
    connection = connections[alias]
    meta = model._meta
    qn = connection.ops.quote_name
    targets = [_field(model, name) for name in fields]
    sql = "UPDATE {} SET {} WHERE {} = %s".format(
        qn(meta.db_table),
        ", ".join(f"{qn(_column(f))} = %s" for f in targets),
        qn(_column(meta.pk)),
    )
    values = [f.get_db_prep_save(f.pre_save(instance, False), connection) for f in targets]
    values.append(instance.pk)
    if only_if:
        condition, params = _conditions(model, only_if, connection)
        sql = f"{sql} AND {condition}"
        values.extend(params)
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        return cursor.rowcount


# ------------------------------------------------------------------- writes in one statement


@dataclass(frozen=True)
class Guard:
    """The UPDATE a ``write_together`` starts with: these fields of a stored instance, only
    while its row matches ``only_if`` (as ``update_row``). Nothing else is written unless it
    changed the row."""

    instance: Model
    fields: tuple[str, ...]
    only_if: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Numbered:
    """An inserted instance's ``field`` takes the next value of a counter column of another
    row (``model`` row ``pk``, column ``column``), incremented by the same write: the
    UPDATE takes that row's lock, so its numbers are handed out and committed in order."""

    instance: Model
    field: str
    model: type[Model]
    pk: Any
    column: str


def write_together(
    *, inserts: Iterable[Model], guard: Guard | None = None, numbered: Numbered | None = None
) -> bool:
    """The guard's UPDATE (if any), then every INSERT in order, the numbered one taking its
    counter's next value — all or nothing. Returns False, having written nothing, when the
    guard changed no row. Primary keys (and the numbered field) are set as ``insert_row``
    sets them.

    PostgreSQL: one statement (data-modifying ``WITH``: one round trip and, outside a
    transaction, one commit — bench/README.md, issue 28); elsewhere the same statements one
    after the other in a transaction."""
    rows = list(inserts)
    if numbered is not None and not any(row is numbered.instance for row in rows):
        raise ValueError("the numbered instance must be one of the inserts")
    model = type(guard.instance) if guard is not None else type(rows[0])
    alias = router.db_for_write(model)
    connection = connections[alias]
    if connection.vendor != "postgresql":
        return _write_one_by_one(rows, guard, numbered, connection)
    sql, params = _together_statement(rows, guard, numbered, connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchone()
    if guard is not None and not found[-1]:
        return False  # the guard changed nothing, so nothing was written
    if numbered is not None:
        value = found[len(rows)]
        if value is None:
            raise _missing(numbered)(f"{numbered.model.__name__} {numbered.pk} does not exist")
        setattr(numbered.instance, numbered.field, value)
    for row, pk in zip(rows, found, strict=False):
        _returned(row, [pk], connection, alias)
    return True


def _write_one_by_one(
    rows: list[Model],
    guard: Guard | None,
    numbered: Numbered | None,
    connection: BaseDatabaseWrapper,
) -> bool:
    from django.db import transaction

    with transaction.atomic(using=connection.alias, savepoint=False):
        if guard is not None and not update_row(
            guard.instance, guard.fields, only_if=guard.only_if
        ):
            return False  # the guard comes first: nothing was written
        for row in rows:
            if numbered is not None and row is numbered.instance:
                setattr(row, numbered.field, _next_count(numbered, connection))
            insert_row(row)
    return True


def _missing(numbered: Numbered) -> type[Exception]:
    """The counter row's model's ``DoesNotExist`` (a counter of no row numbers nothing)."""
    missing: type[Exception] = getattr(numbered.model, "DoesNotExist")  # noqa: B009
    return missing


def _next_count(numbered: Numbered, connection: BaseDatabaseWrapper) -> int:
    qn = connection.ops.quote_name
    column = qn(numbered.column)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {qn(numbered.model._meta.db_table)} SET {column} = {column} + 1"
            f" WHERE {qn(_column(numbered.model._meta.pk))} = %s RETURNING {column}",
            [numbered.pk],
        )
        found = cursor.fetchone()
    if found is None:
        raise _missing(numbered)(f"{numbered.model.__name__} {numbered.pk} does not exist")
    return int(found[0])


def _returned(
    instance: Model, values: list[Any], connection: BaseDatabaseWrapper, alias: str
) -> None:
    """Set an inserted instance's returned columns (its primary key), as ``insert_row`` does."""
    for field, value in zip(instance._meta.db_returning_fields, values, strict=False):
        for converter in field.get_db_converters(connection):
            value = converter(value, field, connection)
        setattr(instance, field.attname, value)
    instance._state.adding = False
    instance._state.db = alias


_TOGETHER: dict[tuple[Any, ...], str] = {}


def _cast_type(field: Field[Any, Any], connection: BaseDatabaseWrapper) -> str:
    """The column's type for an explicit cast of its parameter (``INSERT … SELECT`` infers no
    types from the target), without a length: a too-long value is refused on assignment,
    as a plain INSERT refuses it, not cut by the cast."""
    db_type = field.rel_db_type(connection) if field.is_relation else field.db_type(connection)
    if db_type is None:
        raise TypeError(f"{field} has no database type")
    return db_type.split("(", 1)[0]


def _insert_fields(model: type[Model]) -> list[Field[Any, Any]]:
    meta = model._meta
    return [f for f in meta.local_concrete_fields if f is not meta.auto_field]


def _together_statement(
    rows: list[Model],
    guard: Guard | None,
    numbered: Numbered | None,
    connection: BaseDatabaseWrapper,
) -> tuple[str, list[Any]]:
    """The statement (built once per shape) and its parameters, in placeholder order: the
    guard's SET values, key and conditions, the counter row's key, each insert's values."""
    only_if = (guard.only_if or {}) if guard is not None else {}
    numbered_at = next(
        (k for k, row in enumerate(rows) if numbered is not None and row is numbered.instance),
        None,
    )
    params: list[Any] = []
    if guard is not None:
        targets = [_field(type(guard.instance), name) for name in guard.fields]
        params += [
            f.get_db_prep_save(f.pre_save(guard.instance, False), connection) for f in targets
        ]
        params.append(guard.instance.pk)
        if only_if:
            params += _conditions(type(guard.instance), only_if, connection)[1]
    if numbered is not None:
        params.append(numbered.pk)
    for k, row in enumerate(rows):
        for f in _insert_fields(type(row)):
            if k == numbered_at and numbered is not None and f.name == numbered.field:
                continue  # the counter's value, in the statement
            params.append(f.get_db_prep_save(f.pre_save(row, True), connection))
    key = (
        connection.alias,
        (type(guard.instance), guard.fields, tuple((n, _shape(v)) for n, v in only_if.items()))
        if guard is not None
        else None,
        tuple(type(row) for row in rows),
        (numbered_at, numbered.field, numbered.model, numbered.column) if numbered else None,
    )
    sql = _TOGETHER.get(key)
    if sql is None:
        sql = _TOGETHER[key] = _together_sql(rows, guard, numbered, numbered_at, connection)
    return sql, params


def _together_sql(
    rows: list[Model],
    guard: Guard | None,
    numbered: Numbered | None,
    numbered_at: int | None,
    connection: BaseDatabaseWrapper,
) -> str:
    qn = connection.ops.quote_name
    parts: list[str] = []
    if guard is not None:
        model = type(guard.instance)
        meta = model._meta
        sets = ", ".join(f"{qn(_column(_field(model, name)))} = %s" for name in guard.fields)
        condition = ""
        if guard.only_if:
            condition = " AND " + _conditions(model, guard.only_if, connection)[0]
        parts.append(
            f"u AS (UPDATE {qn(meta.db_table)} SET {sets}"
            f" WHERE {qn(_column(meta.pk))} = %s{condition} RETURNING 1)"
        )
    if numbered is not None:
        column = qn(numbered.column)
        only_when_guarded = " AND EXISTS (SELECT 1 FROM u)" if guard is not None else ""
        parts.append(
            f"c AS (UPDATE {qn(numbered.model._meta.db_table)} SET {column} = {column} + 1"
            f" WHERE {qn(_column(numbered.model._meta.pk))} = %s{only_when_guarded}"
            f" RETURNING {column})"
        )
    selects: list[str] = []
    for k, row in enumerate(rows):
        meta = row._meta
        fields = _insert_fields(type(row))
        counted = k == numbered_at and numbered is not None
        values = [
            f"c.{qn(numbered.column)}"
            if counted and numbered is not None and f.name == numbered.field
            else f"CAST(%s AS {_cast_type(f, connection)})"
            for f in fields
        ]
        source = " FROM c" if counted else (" FROM u" if guard is not None else "")
        pk = qn(_column(meta.pk))
        parts.append(
            f"i{k} AS (INSERT INTO {qn(meta.db_table)} ({', '.join(qn(_column(f)) for f in fields)})"
            f" SELECT {', '.join(values)}{source} RETURNING {pk})"
        )
        selects.append(f"(SELECT {pk} FROM i{k})")
    if numbered is not None:
        selects.append(f"(SELECT {qn(numbered.column)} FROM c)")
    if guard is not None:
        selects.append("(SELECT count(*) FROM u)")
    return "WITH " + ", ".join(parts) + " SELECT " + ", ".join(selects)
