"""docs/production.md's settings of shapes 2 and 3 run as pasted after README's install snippet.

A host that appends README's settings snippet to a fresh project's settings.py, then shape 2's
lines (PostgreSQL, Redis) and shape 3's (Celery), gets a site on PostgreSQL with the Redis
stream manager, the Celery launcher and README's real model still in place, and helix's
checks report no error for it. Pasted as printed, an earlier text stopped at
``NameError: name 'dj_database_url' is not defined`` and replaced README's ``HELIX`` with
placeholders (``{...}``).
"""

from __future__ import annotations

import re
from pathlib import Path

from django.test import override_settings

from helix_django.checks import check_settings

ROOT = Path(__file__).resolve().parents[2]


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", path.read_text(), flags=re.S | re.M)


def block_starting(path: Path, first_line: str) -> str:
    (block,) = [b for b in python_blocks(path) if b.startswith(first_line)]
    return block


def test_shape_2_and_3_run_after_readmes_snippet_and_pass_helix_checks(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://helix:secret@db.example:5432/mysite")
    monkeypatch.setenv("REDIS_URL", "redis://cache.example:6379/0")
    production = ROOT / "docs" / "production.md"
    namespace: dict = {
        "INSTALLED_APPS": ["django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes"],
        "DATABASES": {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}},
    }
    for source, block in (
        ("README.md", block_starting(ROOT / "README.md", "# settings.py")),
        ("docs/production.md", block_starting(production, "# settings.py, after README's install snippet")),
        ("docs/production.md", block_starting(production, "# settings.py, after shape 2's lines")),
    ):
        exec(compile(block, source, "exec"), namespace)  # noqa: S102 - the docs' own words

    helix = namespace["HELIX"]
    assert namespace["DATABASES"]["default"]["ENGINE"] == "django.db.backends.postgresql"
    assert helix["STREAM_MANAGERS"]["default"]["BACKEND"] == "helix_django.streams.redis.RedisStreamManager"
    assert helix["LAUNCHER"]["BACKEND"] == "helix_django.runtime.launchers.celery.CeleryLauncher"
    assert helix["AGENTS"]["default"]["PROVIDER"]["BACKEND"].endswith("OpenAIProvider")
    assert namespace["CHANNEL_LAYERS"]["default"]["BACKEND"] == "channels_redis.core.RedisChannelLayer"
    with override_settings(HELIX=helix, CACHES=namespace["CACHES"], CHANNEL_LAYERS=namespace["CHANNEL_LAYERS"]):
        assert [m.id for m in check_settings() if m.id.startswith("helix_django.E")] == []
