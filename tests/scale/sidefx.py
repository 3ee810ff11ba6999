"""A side-effecting tool for multi-process tests: each execution appends its tool call id to a file.

The file is ``HELIX_TEST_EFFECTS_PATH`` (shared by every process of one test), so a test
counts how often each call's side effect ran, whichever process ran it.
"""

from __future__ import annotations

import os

from helix_django.runtime.tools import ToolContext, tool


@tool(effect="side_effect")
def record_effect(note: str, ctx: ToolContext) -> dict:
    """Record one side effect (appends ``<tool call id>`` to the effects file)."""
    with open(os.environ["HELIX_TEST_EFFECTS_PATH"], "a") as handle:
        handle.write(f"{ctx.tool_call_id}\n")
    return {"recorded": note}
