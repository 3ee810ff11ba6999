"""The relaunch scan as a Django Tasks task, for sites whose runs execute on task workers.

A worker host runs the scan periodically with ``manage.py helix_recover --every SECONDS``
(next to ``db_worker``), or any process enqueues :data:`relaunch_scan` (for example from a
scheduler) and a worker runs it. Both run the same bounded scan: nothing is restarted.

The task has no executor (recovery never imports the runtime, and a worker's runs execute
on task workers, not in the scan's loop): a run whose durable operation still runs is
followed to its end (``recovering``), not re-attached; ``helix_recover`` and
:class:`~helix_django.recovery.startup.RecoveryOnStartup` re-attach.
"""

from __future__ import annotations

from django_tasks import task

from helix_django.recovery.scan import arecover


@task()
async def relaunch_scan(limit: int | None = None) -> dict[str, int]:
    """Run the relaunch scan over expired in-flight runs; return its counts ``{scanned, <outcome>: n}``."""
    return (await arecover(limit=limit)).counts
