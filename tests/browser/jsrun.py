"""Run a snippet of JavaScript against the shipped ES modules with Node (no browser needed)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

STATIC = Path(__file__).resolve().parents[2] / "helix_django" / "static" / "helix_django"


def node_binary() -> str:
    """Return the path of ``node``; fail (not skip) when it is missing, as CI installs it."""
    path = shutil.which("node")
    assert path, "node is required for the JS client tests (apt-get install nodejs)"
    return path


def run_module(body: str, payload: Any) -> Any:
    """Run ``body`` as an ES module with ``STATIC`` (the static dir URL) and ``INPUT`` bound; return its JSON output.

    The snippet prints its result with ``console.log(JSON.stringify(...))`` as its last line.
    """
    prelude = f"const STATIC = {json.dumps(STATIC.as_uri())};\nconst INPUT = JSON.parse(process.argv[1]);\n"
    result = subprocess.run(  # noqa: S603 - fixed argv
        [
            node_binary(),
            "--experimental-detect-module",
            "--no-warnings",
            "--input-type=module",
            "-e",
            prelude + body,
            json.dumps(payload),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])
