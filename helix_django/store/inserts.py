"""One-row INSERTs and UPDATEs of helix's models with the statement built once per model and database.

``Model.save(force_insert=True)`` builds its INSERT (the compiler's ``as_sql``) on every
call; on a send's path that cost more than the statement (a new session's run-start
commit inserts four rows; docs/performance.md). :func:`insert` builds it once per
(model, alias) with Django's own compiler, then does for each new row what ``save()``
does: related fields checked, each field's ``pre_save`` (``auto_now_add``, ``auto_now``)
and ``get_db_prep_save`` (JSON, datetimes), the auto primary key read back, the
``pre_save``/``post_save`` signals sent when something listens. :func:`update` does the
same for ``QuerySet.filter(...).update(...)`` (equality filters only).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django.core.exceptions import FieldError
from django.db import connections, router
from django.db.models import Field, Model
from django.db.models.signals import post_save, pre_save
from django.db.models.sql.subqueries import InsertQuery


@dataclasses.dataclass(frozen=True)
class _Statement:
    sql: str
    fields: tuple[Field, ...]
    """The fields whose values are the statement's parameters, in order."""
    auto_field: Field | None
    """The auto primary key the database assigns (None: the model sets its own)."""
    returns_pk: bool
    """The statement ends in ``RETURNING`` the auto primary key (else ``last_insert_id``)."""


_statements: dict[tuple[type[Model], str], _Statement] = {}


def _statement(model: type[Model], using: str) -> _Statement:
    meta = model._meta
    auto_field = meta.auto_field
    fields = tuple(field for field in meta.local_concrete_fields if field is not auto_field)
    query = InsertQuery(model)
    query.insert_values(fields, [model()], raw=False)
    compiler = query.get_compiler(using=using)
    compiler.returning_fields = [auto_field] if auto_field is not None else None
    [(sql, _params)] = compiler.as_sql()
    returns_pk = auto_field is not None and connections[using].features.can_return_columns_from_insert
    return _Statement(sql, fields, auto_field, returns_pk)


def insert(instance: Model) -> None:
    """INSERT ``instance`` as a new row, as ``instance.save(force_insert=True)`` would.

    Sets the auto primary key and ``_state`` (``adding=False``, ``db``). A value that is a
    query expression (``F()``, ``Now()``) changes the statement: such a row is saved by
    ``save()``. Raises what the database raises (``IntegrityError`` for a duplicate key).
    """
    model = type(instance)
    using = router.db_for_write(model, instance=instance)
    statement = _statements.get((model, using))
    if statement is None:
        statement = _statements[(model, using)] = _statement(model, using)
    if any(hasattr(getattr(instance, field.attname), "resolve_expression") for field in statement.fields):
        instance.save(force_insert=True, using=using)
        return
    # Django's private step of save() (related objects saved, cached ids copied), on purpose; not in the stubs.
    instance._prepare_related_fields_for_save(operation_name="save")  # type: ignore[attr-defined]
    if pre_save.has_listeners(model):
        pre_save.send(sender=model, instance=instance, raw=False, using=using, update_fields=None)
    connection = connections[using]
    params: list[Any] = [
        field.get_db_prep_save(field.pre_save(instance, True), connection=connection) for field in statement.fields
    ]
    with connection.cursor() as cursor:
        cursor.execute(statement.sql, params)
        auto_field = statement.auto_field
        if statement.returns_pk:
            assert auto_field is not None  # _statement sets returns_pk only for an auto primary key
            setattr(instance, auto_field.attname, cursor.fetchone()[0])
        elif auto_field is not None:
            assert auto_field.column is not None  # a concrete field always has a column
            pk = connection.ops.last_insert_id(cursor, model._meta.db_table, auto_field.column)
            setattr(instance, auto_field.attname, pk)
    instance._state.adding = False
    instance._state.db = using
    if post_save.has_listeners(model):
        post_save.send(sender=model, instance=instance, created=True, update_fields=None, raw=False, using=using)


_updates: dict[
    tuple[type[Model], str, tuple[str, ...], tuple[str, ...]], tuple[str, tuple[Field, ...], tuple[Field, ...]]
] = {}


def _update_statement(
    model: type[Model], using: str, names: tuple[str, ...], keys: tuple[str, ...]
) -> tuple[str, tuple[Field, ...], tuple[Field, ...]]:
    meta, quote = model._meta, connections[using].ops.quote_name
    fields, columns = _concrete_fields(model, names)
    where, key_columns = _concrete_fields(model, keys)
    assignments = ", ".join(f"{quote(column)} = %s" for column in columns)
    conditions = " AND ".join(f"{quote(column)} = %s" for column in key_columns)
    return f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {conditions}", fields, where  # noqa: S608


def _concrete_fields(model: type[Model], names: tuple[str, ...]) -> tuple[tuple[Field, ...], tuple[str, ...]]:
    """Return the fields of ``model`` named ``names`` (names or attnames) and their columns, in order.

    Raises FieldDoesNotExist for an unknown name, FieldError for one without a column (a
    reverse relation).
    """
    fields: list[Field] = []
    columns: list[str] = []
    for name in names:
        field = model._meta.get_field(name)
        if not isinstance(field, Field) or field.column is None:
            raise FieldError(f"{model._meta.label}.{name} is not a concrete field")
        fields.append(field)
        columns.append(field.column)
    return tuple(fields), tuple(columns)


def _db_value(field: Field, value: Any) -> Any:
    if isinstance(value, Model):  # a related row: its key, as QuerySet.update() takes it
        value = getattr(value, field.target_field.attname)  # type: ignore[attr-defined]
    return value


def update(model: type[Model], where: dict[str, Any], values: dict[str, Any]) -> int:
    """UPDATE the rows of ``model`` matching ``where`` with ``values``: ``filter(**where).update(**values)``.

    ``where`` and ``values`` map concrete field names or attnames (a foreign key takes a
    row or its key) to plain values: equality only, no lookups or expressions (use the ORM for those).
    The statement is built once per model, alias and field names; values go through each
    field's ``get_db_prep_save`` (JSON, datetimes) as the ORM's update does. Like
    ``QuerySet.update()``, no signal is sent and ``auto_now`` is not applied. Returns the
    number of rows matched. Raises what the database raises.
    """
    using = router.db_for_write(model)
    key = (model, using, tuple(values), tuple(where))
    statement = _updates.get(key)
    if statement is None:
        statement = _updates[key] = _update_statement(model, using, key[2], key[3])
    sql, fields, keys = statement
    connection = connections[using]
    params = [
        field.get_db_prep_save(_db_value(field, value), connection=connection)
        for field, value in zip(fields, values.values(), strict=True)
    ]
    params += [
        field.get_db_prep_value(_db_value(field, value), connection=connection)
        for field, value in zip(keys, where.values(), strict=True)
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount
