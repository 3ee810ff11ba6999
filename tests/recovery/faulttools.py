"""Tools with real, cross-process side effects for the fault tests: an 'issue tracker' in a file.

``HELIX_TEST_TRACKER`` names a JSON-lines file; each line is one created issue
``{"key": idempotency key, "issue": "I-<n>"}``. ``HELIX_TEST_DIE_IN_TOOL=after_effect`` makes the
tool SIGKILL its own process right after the side effect, before any result is persisted.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from helix_django.runtime.tools import ToolContext, tool


def tracker() -> Path:
    return Path(os.environ["HELIX_TEST_TRACKER"])


def issues() -> list[dict]:
    """Every issue the tracker holds (the side effects that really happened)."""
    path = tracker()
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _create(key: str) -> dict:
    existing = next((i for i in issues() if i["key"] == key), None)
    if existing is not None:
        # The external system deduplicates by idempotency key (000, "Reconcile before retrying").
        return {"issue": existing["issue"], "duplicate": True}
    issue = {"key": key, "issue": f"I-{len(issues()) + 1}"}
    with tracker().open("a") as fh:
        fh.write(json.dumps(issue) + "\n")
    if os.environ.get("HELIX_TEST_DIE_IN_TOOL") == "after_effect":
        os.kill(os.getpid(), signal.SIGKILL)
    return {"issue": issue["issue"], "duplicate": False}


@tool(effect="side_effect", idempotency_key=lambda args, ctx: f"issue:{args['title']}")
def create_issue(title: str, ctx: ToolContext) -> dict:
    """Create an issue in the tracker (a side effect, deduplicated by the tracker on its key)."""
    return _create(f"issue:{title}")
