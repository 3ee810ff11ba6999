"""The PostgreSQL test databases of this suite (``test_helix_<pid>``, tests/settings.py): never left behind.

A test database outlived its pytest process in two ways: a connection still open at the
end (a server process or thread of a test) made Django's ``DROP DATABASE`` fail with a
teardown warning ("is being accessed by other users"), and a process killed before its
teardown (a timeout, ``kill -9``) never dropped it. :func:`end_other_connections` runs
right before the drop; :func:`drop_stale_databases` at the start of every PostgreSQL run.
"""

from __future__ import annotations

import os
import re
from typing import Any

#: The test database names of tests/settings.py.
NAME = re.compile(r"^test_helix_(\d+)$")


def _is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def end_other_connections(cursor: Any, name: str) -> int:
    """Terminate every other session on database ``name``; return how many.

    ``cursor`` is on another database of the server (Django's ``_nodb_cursor()``).
    """
    cursor.execute(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
        [name],
    )
    return cursor.fetchone()[0]


def drop_stale_databases(cursor: Any) -> list[str]:
    """Drop the ``test_helix_<pid>`` databases whose process is gone and that nobody is connected to.

    ``cursor`` is on another database of the server (Django's ``_nodb_cursor()``, in
    autocommit). Returns the names dropped. A database of a live process (any user's), or
    with a session on it, is left alone.
    """
    cursor.execute(
        "SELECT d.datname FROM pg_database d WHERE d.datname LIKE %s "
        "AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)",
        ["test\\_helix\\_%"],
    )
    dropped = []
    for (name,) in cursor.fetchall():
        match = NAME.match(name)
        if match is None or int(match.group(1)) == os.getpid() or _is_alive(int(match.group(1))):
            continue
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
        dropped.append(name)
    return dropped
