"""The kill campaign in CI, at a small count: ten SIGKILLed runs and ten finish races end truthfully (issue 17).

The full campaign (``python -m tests.recovery.kill_campaign --runs 100``) runs by hand; this
runs one cycle of it (ten killed runs, one of them by its own side-effecting tool, a
cancelled and a failed run) and ten reconcile-vs-finish races, and asserts every figure is 0.
"""

from __future__ import annotations

import pytest

from tests.recovery.kill_campaign import campaign

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.timeout(300)]


def test_killed_cancelled_failed_and_raced_runs_end_truthfully_on_every_wire(tmp_path):
    figures = campaign(runs=10, races=10, tracker=tmp_path / "tracker.jsonl")
    assert (figures.killed, figures.interrupted, figures.tool_unknown, figures.races) == (10, 10, 1, 10), (
        figures.report()
    )
    assert figures.redo_attempts == 9
    assert figures.is_clean, figures.report()
