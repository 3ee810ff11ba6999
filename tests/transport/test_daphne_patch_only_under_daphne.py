"""The daphne form-parsing patch applies in a daphne process only; under uvicorn no Twisted is loaded (issue 23).

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
from helix_django.transport.daphne_forms import disable_twisted_form_parsing
report = {{"twisted_loaded": "twisted" in sys.modules, "daphne_loaded": "daphne.http_protocol" in sys.modules}}
if report["daphne_loaded"]:
    from daphne.http_protocol import WebRequest
    report["patched"] = getattr(WebRequest, "helix_skips_form_parsing", False)
    report["drops_head_bodies"] = getattr(WebRequest, "helix_drops_forbidden_bodies", False)
print(json.dumps(report))
"""


def probe(before: str, tmp_path) -> dict:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
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
