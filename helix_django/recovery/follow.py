"""Follow a durable provider operation that outlived its process, and end its run from what it produced.

000, "Background operations are easier to recover than ephemeral streams": when the
relaunch scan finds a run whose provider operation is still ``in_progress``, the generation
is not over. The run goes to ``recovering`` (its stream stays fenced: a reader is told a
retryable drop, ``run_recovering``, and comes back from its cursor) and this process asks the
provider again every :data:`POLL_SECONDS`, renewing the scan's lease, for at most
``HELIX["OPERATION_WAIT_SECONDS"]``:

- ``completed`` without tool calls: the run completes from the operation's output, as the
  same run, on the same stream (:func:`~helix_django.recovery.outcomes.acomplete_from_provider`:
  a ``data-stream-resync`` tells readers to reload the snapshot, then the clean finish);
- anything else, or still running at the deadline: the run is ended ``interrupted`` with its
  partial output kept (cause ``provider_<status>``), and an operation still running is
  cancelled, so nothing generates unseen.

A person's decision meanwhile (a Stop, staff's Cancel) wins: the follower stops as soon as
the run is no longer its ``recovering`` run. If this process dies too, the run is
``recovering`` under a lease of a process that is gone, and the next scan takes it.
"""

from __future__ import annotations

import asyncio
import logging

from helix_django import store
from helix_django.conf import helix_settings
from helix_django.errors import RunSupersededError
from helix_django.models import Run, RunStatus
from helix_django.recovery.outcomes import acomplete_from_provider, ainterrupt
from helix_django.recovery.partial import arebuild_partial
from helix_django.recovery.provider import StatusQuery, acancel_operation, aquery_operation

logger = logging.getLogger(__name__)

#: Seconds between two questions to the provider about a followed operation.
POLL_SECONDS = 1.0


async def aend_from_operation(run: Run, query: StatusQuery, *, stage: str, cancel_running: bool = False) -> str:
    """End the live ``run`` from what the provider said of its operation; return the outcome.

    ``completed`` (from the operation's output) when it completed without tool calls, else
    the interrupted cause (``provider_<status>``, or the query's reason when the provider
    could not be asked). ``cancel_running``: an operation still running is cancelled (the
    wait for it is over); otherwise it is left for a later Check status. Raises
    RunSupersededError when the run changed meanwhile.
    """
    result = query.result
    if result is not None and result.status == "completed" and not result.tool_calls:
        await acomplete_from_provider(run, result)
        return "completed"
    partial = await arebuild_partial(run)
    cause = query.reason if result is None else f"provider_{result.status}"
    invalidate = result is not None and result.status == "unknown"
    await ainterrupt(run, partial, stage=stage, cause=cause[:40], invalidate=invalidate)
    if cancel_running and result is not None and result.status == "in_progress":
        await acancel_operation(run)
    return cause


async def afollow_operation(run_id: str, owner: str) -> str:
    """Follow the ``recovering`` run's operation until it ends or the wait is spent (module docstring).

    ``owner`` is the lease owner the scan took the run with. Returns the outcome
    (``completed``, an interrupted cause, or ``changed_meanwhile``); raises nothing.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + float(helix_settings.OPERATION_WAIT_SECONDS)
    try:
        while True:
            run = await Run.objects.filter(pk=run_id).afirst()
            if run is None or run.status != RunStatus.RECOVERING or run.lease_owner != owner:
                return "changed_meanwhile"
            query = await aquery_operation(run)
            still_running = query.result is not None and query.result.status == "in_progress"
            if not still_running or loop.time() >= deadline:
                return await aend_from_operation(run, query, stage="recovering", cancel_running=True)
            await store.arenew_lease(run_id, owner, helix_settings.LEASE_SECONDS)
            await asyncio.sleep(POLL_SECONDS)
    except RunSupersededError:
        return "changed_meanwhile"
    except Exception:  # noqa: BLE001 - a follower's failure must not reach the scan; the lease lapses
        logger.exception("following the provider operation of run %s failed", run_id)
        return "failed"
