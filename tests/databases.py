"""A second connection to the test database under another alias, and a router, for database-router tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.utils import load_backend


@contextlib.contextmanager
def second_connection(alias: str) -> Iterator[BaseDatabaseWrapper]:
    """Register ``alias`` as a new connection to the database ``default`` uses; remove it after."""
    settings_dict = {**connections["default"].settings_dict}
    connection = load_backend(settings_dict["ENGINE"]).DatabaseWrapper(settings_dict, alias=alias)
    connections[alias] = connection
    try:
        yield connection
    finally:
        connection.close()
        del connections[alias]


class AliasRouter:
    """Route every read to the alias ``read`` and every write to ``write``."""

    def __init__(self, *, read: str, write: str) -> None:
        self.read, self.write = read, write

    def db_for_read(self, model, **hints):
        return self.read

    def db_for_write(self, model, **hints):
        return self.write

    def allow_relation(self, obj1, obj2, **hints):
        return True
