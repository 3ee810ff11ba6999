"""The ASGI app a :class:`~helix_django.testing.LiveServer` serves: the host's app, on the test databases.

Before it imports the host's app (``HELIX_TESTING_APP``, ``module:attribute``) it

- points each database alias at the test database named in ``HELIX_TESTING_DATABASES``
  (JSON ``{alias: {"ENGINE", "HOST", "PORT", "NAME"}}``) when the server's alias has the same
  engine, host and port (a test that points its server at another database server keeps it);
- merges ``HELIX_TESTING_HELIX`` (JSON) over ``settings.HELIX``, key by key.

``application`` is the host's app object itself, so lifespan and routing are the host's; it is
loaded when the server first reads it, so importing this module has no effect.
"""

from __future__ import annotations

import json
import os
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string


def point_at_test_databases(databases: Any, names: dict[str, dict[str, str]]) -> None:
    """Set ``NAME`` of each alias of ``databases`` (``settings.DATABASES``) matching ``names`` in engine, host, port."""
    for alias, target in names.items():
        conf = databases.get(alias)
        if conf is None:
            continue
        same = all(str(conf.get(key) or "") == target[key] for key in ("ENGINE", "HOST", "PORT"))
        if same:
            conf["NAME"] = target["NAME"]


def load_application() -> Any:
    """Apply the environment's databases and HELIX overrides to the settings, then import the host's app."""
    names = json.loads(os.environ.get("HELIX_TESTING_DATABASES") or "{}")
    point_at_test_databases(settings.DATABASES, names)
    overrides = json.loads(os.environ.get("HELIX_TESTING_HELIX") or "{}")
    if overrides:
        settings.HELIX = {**getattr(settings, "HELIX", {}), **overrides}
    target = os.environ.get("HELIX_TESTING_APP", "")
    if ":" not in target:
        raise RuntimeError(f"HELIX_TESTING_APP={target!r}: expected 'module:attribute'")
    module, attribute = target.split(":", 1)
    return import_string(f"{module}.{attribute}")


def __getattr__(name: str) -> Any:
    """Load ``application`` when the server asks for it (importing this module alone changes nothing)."""
    if name == "application":
        app = load_application()
        globals()["application"] = app
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
