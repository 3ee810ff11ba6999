"""A site database (a private PostgreSQL of tests/scale/services.py, or a SQLite file): migrated, with a user and token."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.live import REPO_ROOT

PREPARE = textwrap.dedent(
    """
    import django
    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    call_command("migrate", verbosity=0, interactive=False)
    user = get_user_model().objects.create_user(username="scale", password="pw-not-secret")
    print(Token.objects.create(user=user).key)
    """
)


def prepare_site(server, settings_module: str, env: dict[str, str], database: str = "helix") -> str:
    """Create ``database`` on ``server``, migrate it with ``settings_module`` and ``env``; return a user's DRF token.

    With ``server`` None the database is the one ``env`` names (a SQLite file: ``HELIX_SQLITE_PATH``).
    """
    if server is not None:
        server.execute(f'CREATE DATABASE "{database}"')
    done = subprocess.run(
        [sys.executable, "-c", PREPARE],
        cwd=REPO_ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": settings_module, "PYTHONPATH": str(REPO_ROOT), **env},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]
