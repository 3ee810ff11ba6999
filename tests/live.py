"""The test suite's live server: helix_django.testing's, under this suite's settings conventions.

Servers run ``tests.asgi:application`` with ``tests.settings`` from the repository root by
default, and, as every process this suite starts, they find their database and ``HELIX``
overrides in the environment the settings read (tests/settings.py):

- ``HELIX_SQLITE_PATH`` = the live test database file (``connection.settings_dict["NAME"]``),
  or, on PostgreSQL, ``HELIX_TEST_DATABASE_URL`` rewritten to the test database's name;
- ``HELIX_TEST_OVERRIDES`` = JSON of ``helix`` over the run's own ``HELIX_TEST_OVERRIDES``, so a
  run switched to another stream manager keeps it in its servers.

The fixtures ``daphne_server_factory`` and ``daphne_server`` (tests/conftest.py) are the kit's
``helix_server_factory`` and ``helix_server`` building this class; they start the
``HELIX_TEST_SERVER`` server (daphne unless set).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from helix_django import testing

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ASGI_APP = "tests.asgi:application"
SERVERS = testing.SERVERS
LiveServerError = testing.LiveServerError


def database_env() -> dict[str, str]:
    """Return the env pointing a process of this suite at the live test database of this process."""
    from django.db import connection

    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return {"HELIX_SQLITE_PATH": str(settings["NAME"])}
    url = os.environ.get("HELIX_TEST_DATABASE_URL", "")
    if url:
        parts = urlsplit(url)
        return {"HELIX_TEST_DATABASE_URL": urlunsplit(parts._replace(path="/" + str(settings["NAME"])))}
    return {}


class LiveServer(testing.LiveServer):
    """A kit :class:`~helix_django.testing.LiveServer` serving this suite's app with its env conventions."""

    wrap_app = False

    def __init__(
        self,
        *,
        asgi_app: str = DEFAULT_ASGI_APP,
        settings_module: str = "tests.settings",
        cwd: str | Path = REPO_ROOT,
        **kwargs: Any,
    ) -> None:
        super().__init__(asgi_app=asgi_app, settings_module=settings_module, cwd=cwd, **kwargs)

    def database_env(self) -> dict[str, str]:
        """Return :func:`database_env` (read by tests/settings.py)."""
        return database_env()

    def helix_env(self) -> dict[str, str]:
        """Return ``HELIX_TEST_OVERRIDES``: ``helix`` over the run's own overrides (empty without ``helix``)."""
        if not self.helix:
            return {}
        inherited = json.loads(os.environ.get("HELIX_TEST_OVERRIDES") or "{}")
        return {"HELIX_TEST_OVERRIDES": json.dumps({**inherited, **self.helix})}
