"""The relaunch scan as a Django Tasks task, for sites whose runs execute on task workers.

A worker host runs the scan periodically with ``manage.py helix_recover --every SECONDS``
(next to ``db_worker``), or any process enqueues :data:`relaunch_scan` (for example from a
scheduler) and a worker runs it. Both run the same bounded scan: nothing is restarted.
"""

from __future__ import annotations

from django_tasks import task

from helix_django.recovery.scan import arecover


@task()
async def relaunch_scan(limit: int | None = None) -> dict[str, int]:
    """Run the relaunch scan over expired in-flight runs; return its counts ``{scanned, <outcome>: n}``."""
    return (await arecover(limit=limit)).counts
