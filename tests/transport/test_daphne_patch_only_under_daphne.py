"""The daphne patches apply in a daphne process only, and only where the site opted in; under uvicorn no Twisted is loaded.

Each case imports the test suite's ASGI application in a fresh interpreter, as a server
process does: daphne's CLI imports ``daphne.server`` before it loads the application,
uvicorn imports nothing of daphne.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.live import REPO_ROOT

PROBE = """
import json, sys
{before}
import tests.asgi
from helix_django.contrib.daphne import disable_twisted_form_parsing
report = {{"twisted_loaded": "twisted" in sys.modules, "daphne_loaded": "daphne.http_protocol" in sys.modules}}
if report["daphne_loaded"]:
    from daphne.http_protocol import WebRequest
    report["patched"] = getattr(WebRequest, "helix_skips_form_parsing", False)
    report["drops_head_bodies"] = getattr(WebRequest, "helix_drops_forbidden_bodies", False)
print(json.dumps(report))
"""


def probe(before: str, tmp_path, settings_module: str = "tests.settings") -> dict:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": settings_module,
        "HELIX_SQLITE_PATH": str(tmp_path / "probe.sqlite3"),
        "PYTHONPATH": str(REPO_ROOT),
    }
    done = subprocess.run(  # noqa: S603 - fixed argv
        [sys.executable, "-c", PROBE.format(before=before)], env=env, cwd=REPO_ROOT, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


def test_a_process_that_does_not_run_daphne_loads_no_twisted(tmp_path):
    assert probe("import uvicorn.main", tmp_path) == {"twisted_loaded": False, "daphne_loaded": False}


def test_a_daphne_process_gets_the_patch(tmp_path):
    assert probe("import daphne.server", tmp_path) == {
        "twisted_loaded": True,
        "daphne_loaded": True,
        "patched": True,
        "drops_head_bodies": True,
    }


def test_installing_helix_django_alone_leaves_daphne_unpatched(tmp_path):
    """A daphne process whose site has not installed helix_django.contrib.daphne: nothing is patched."""
    assert probe("import daphne.server", tmp_path, "tests.transport.settings_without_daphne_patches") == {
        "twisted_loaded": True,
        "daphne_loaded": True,
        "patched": False,
        "drops_head_bodies": False,
    }


CHECK_PROBE = """
import json
{before}
import tests.asgi
from helix_django.deploy_checks import check_daphne_patches
print(json.dumps([[m.id, m.hint] for m in check_daphne_patches()]))
"""


def check_probe(before: str, tmp_path, settings_module: str) -> list:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": settings_module,
        "HELIX_SQLITE_PATH": str(tmp_path / "probe.sqlite3"),
        "PYTHONPATH": str(REPO_ROOT),
    }
    done = subprocess.run(  # noqa: S603 - fixed argv
        [sys.executable, "-c", CHECK_PROBE.format(before=before)],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


def test_a_daphne_served_site_without_the_patches_is_warned(tmp_path):
    hint = "Add 'helix_django.contrib.daphne' to INSTALLED_APPS (docs/deploy.md, 'Serving with daphne')."
    without = "tests.transport.settings_without_daphne_patches"
    assert check_probe("import daphne.server", tmp_path, without) == [["helix_django.W031", hint]]
    assert check_probe("import daphne.server", tmp_path, "tests.settings") == []
    assert check_probe("import uvicorn.main", tmp_path, without) == []
