"""Retiring a live run nobody executes any more, when a send, a regenerate or a continue meets it.

A run whose process died stays live in the database until the relaunch scan ends it. A
request that finds such a run in its way ends it here as the scan would (000, "Recovery
on app relaunch"), so a crashed process's run does not block the session until then.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from django.utils import timezone

from helix_django.models import Run, RunStatus
from helix_django.recovery.scan import arecover_run

if TYPE_CHECKING:
    from helix_django.runtime.starts import RunStarts

logger = logging.getLogger("helix_django.runtime.executor")


async def aretire_if_dead(run: Run, starts: RunStarts) -> bool:
    """End a live run nobody executes any more as the relaunch scan would; False if it is still executing.

    ``starts``: this process's runs, launcher and lease owner id. Dead: the run's lease
    expired, or this process owns it but has no task for it (and the launcher does not hold
    it queued for a worker). The ending is the
    scan's decision (:func:`~helix_django.recovery.scan.arecover_run`, forced, without asking
    the provider, so a request waits on no network call): ``completed`` when the run wrote
    its ``finish``, ``cancelled`` when a Stop was recorded, else ``interrupted`` with its
    partial output; a client is never told an ending that contradicts one it saw
    (docs/transport.md, "Endings"). True also when a concurrent request retired or replaced
    it first: it no longer holds the session, and the caller's compare-and-set start decides
    who wins.
    """
    if starts.runs.is_local(run.id) or run.status == RunStatus.SUSPENDED_CLIENT_TOOL:
        return False
    if starts.launcher.is_queued(run, starts.owner):
        return False
    expired = run.lease_expires_at is None or run.lease_expires_at < timezone.now()
    if not expired and run.lease_owner != starts.owner:
        return False
    # Recovery's own decision and ending: the writer fenced, partial output rebuilt from the
    # stream, unknown tool outcomes marked.
    decision = await arecover_run(run.id, force=True, query_provider=False)
    if decision.outcome == "skipped":
        logger.info("run %s was retired by a concurrent request (%s)", run.id, decision.reason)
    return True
