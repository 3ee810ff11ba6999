"""The database-fault script (tests/scale/faults.py), one injection of each fault at a random point of a live run.

``python -m tests.scale.faults`` runs 10 of each (the figures in the closing note of issue
21); CI runs one of each, the PostgreSQL faults in the suite's PostgreSQL pass and the
SQLite ones in its SQLite pass (each site is private, so one pass is enough). Targets
per fault: no committed chunk lost, none doubled, no untyped 5xx, no run left
non-terminal, no server needing a restart.

``pg_stop_20s`` is the script's only: a stop longer than ``DATABASE_RETRY_SECONDS`` ends
the run, and the ending its readers get is issue 17's (truthful endings) to make.
"""

from __future__ import annotations

import os
import random

import pytest

from tests.scale.faults import SQLITE_FAULTS, Site, misses, run_fault

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

PASS_KIND = "pg" if os.environ.get("HELIX_TEST_DATABASE_URL") else "sqlite"
FAULTS = {"pg": ("pg_restart", "pg_terminate"), "sqlite": SQLITE_FAULTS}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", [PASS_KIND])
def test_database_faults_lose_nothing_and_need_no_restart(kind):
    faults = FAULTS[kind]
    site = Site(kind)
    rng = random.Random(21)
    try:
        reports = [run_fault(site, fault, 1, rng) for fault in faults]
    finally:
        site.close()
    assert [(report["fault"], misses(report)) for report in reports] == [(fault, []) for fault in faults], reports
