"""The example site's settings for a daphne server started by a browser test.

Everything of ``example_project.settings`` (the embedded default the README's demo runs),
on the live test database (``HELIX_SQLITE_PATH`` or ``HELIX_TEST_DATABASE_URL``, set by
tests/live.py), with the HELIX
overrides a test passes as ``HELIX_TEST_OVERRIDES`` (JSON, merged per agent for AGENTS).
"""

import json
import os

from example_project.settings import *  # noqa: F403
from example_project.settings import HELIX

if os.environ.get("HELIX_TEST_DATABASE_URL"):  # the PostgreSQL test run (tests/live.py points it at the test DB)
    import dj_database_url

    DATABASES = {"default": dj_database_url.parse(os.environ["HELIX_TEST_DATABASE_URL"])}

DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

_overrides = json.loads(os.environ.get("HELIX_TEST_OVERRIDES") or "{}")
_agents = {**HELIX["AGENTS"]}
for _name, _agent in (_overrides.pop("AGENTS", None) or {}).items():
    _agents[_name] = {**_agents.get(_name, {}), **_agent}
HELIX = {**HELIX, **_overrides, "AGENTS": _agents}

# A test's own static folders (HELIX_TEST_STATIC_DIRS="prefix=path;..."), e.g. a bundled React app.
STATICFILES_DIRS = [
    tuple(entry.split("=", 1)) for entry in (os.environ.get("HELIX_TEST_STATIC_DIRS") or "").split(";") if entry
]
