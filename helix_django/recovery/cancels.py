"""Cancels whose provider answer was unclear: asked again, bounded, until the provider's word is known.

000, "Cancel and stop are not the same" and "Recovery should have bounded automation": a
run ended ``cancelled`` stays cancelled, but its provider operation may still be generating
when the provider's answer to the cancel was unclear (the call failed, the provider did not
know the operation, or nobody asked although an operation id exists). Such a run is revisited:

- by Check status (:func:`arecheck_cancel`, a person asking: allowed while the answer is unclear);
- by the periodic relaunch scan (:func:`arevisit_unclear_cancels`): at most
  :data:`MAX_CANCEL_CHECKS` tries per run, spaced by :data:`CANCEL_CHECK_BACKOFF_SECONDS`
  doubling each time, for runs created within :data:`CANCEL_CHECK_WINDOW_SECONDS`.

Each try asks the provider about the operation (:func:`~helix_django.recovery.provider.aquery_operation`,
itself bounded); an operation still running is cancelled again. Only the recorded
provider outcome (``Run.provider_cancel_result``, the try count and time) changes; the
run's usage stays as its cancel recorded it (:mod:`helix_django.usage`).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.utils import timezone

from helix_django import store, telemetry
from helix_django.deadlines import within
from helix_django.models import Run, RunStatus
from helix_django.orm import sync_to_async
from helix_django.recovery.provider import STATUS_QUERY_TIMEOUT_SECONDS, aquery_operation, provider_for

logger = logging.getLogger(__name__)

#: Recorded provider answers to a cancel that leave the operation's fate unclear
#: (``not_requested``/empty: a cancelled run whose operation the provider was never asked to stop).
UNCLEAR_CANCEL_RESULTS = frozenset({"", "failed", "unknown", "not_requested"})
#: Tries after which the periodic scan stops asking (a person's Check status counts as a try, and
#: stays allowed after the last).
MAX_CANCEL_CHECKS = 5
#: Seconds before the scan's first try after the previous one; doubled after each try (60, 120, 240...).
CANCEL_CHECK_BACKOFF_SECONDS = 60
#: Runs created longer ago than this are left alone (their operations are long over or gone).
CANCEL_CHECK_WINDOW_SECONDS = 86_400
#: Runs revisited by one scan at most.
CANCEL_CHECKS_PER_SCAN = 20


def is_cancel_unclear(run: Run) -> bool:
    """Whether ``run`` is cancelled with a provider operation whose cancel answer is unclear."""
    return (
        run.status == RunStatus.CANCELLED
        and bool(run.provider_operation_id)
        and run.provider_cancel_result in UNCLEAR_CANCEL_RESULTS
    )


def _answer_of(status: str) -> str:
    """Map an operation status the provider reports to the cancel answer recorded for it."""
    return {"cancelled": "cancelled", "completed": "already_finished", "failed": "already_finished"}.get(
        status, "unknown"
    )


async def arecheck_cancel(run: Run) -> str:
    """Ask the provider again about the unclear cancel of ``run``'s operation; record and return the answer.

    Still running -> cancelled again (the provider's answer: ``cancelled``,
    ``already_finished``, ``unknown``; ``failed`` when that call failed); ended ->
    ``cancelled`` or ``already_finished``; no such operation -> ``unknown``; the provider
    could not be asked -> ``failed``. Records the answer in ``provider_cancel_result`` and
    counts the try (``provider_cancel_checks``, ``provider_cancel_checked_at``). Returns
    ``""`` without asking when the run's cancel is clear or another process counted this
    try first. The run's status never changes. Raises nothing for a provider failure.
    """
    if not is_cancel_unclear(run) or not await store.aclaim_cancel_check(run.id, run.provider_cancel_checks):
        return ""
    provider = provider_for(run)
    query = await aquery_operation(run, provider)
    if query.result is None:
        answer = "failed" if query.reason != "not_supported" else run.provider_cancel_result
    elif query.result.status != "in_progress":
        answer = _answer_of(query.result.status)
    elif provider is None or not getattr(provider, "supports_cancel", False):
        answer = run.provider_cancel_result
    else:
        try:
            answer = str(await within(provider.cancel(run.provider_operation_id), STATUS_QUERY_TIMEOUT_SECONDS))[:64]
        except Exception as exc:  # noqa: BLE001 - the outcome stays uncertain: recorded as such
            logger.warning("run %s: cancelling its provider operation again failed (%s)", run.id, type(exc).__name__)
            answer = "failed"
    await store.arecord_recovery(run.id, provider_cancel_result=answer)
    telemetry.emit(
        "recovery.outcome", **telemetry.run_fields(run), action="recheck_cancel", outcome=answer or "not_supported"
    )
    return answer


def due_unclear_cancels(now: datetime, limit: int = CANCEL_CHECKS_PER_SCAN) -> list[str]:
    """Return ids of cancelled runs whose unclear cancel the scan should ask about now, oldest first.

    Within :data:`CANCEL_CHECK_WINDOW_SECONDS` of ``now``, fewer than
    :data:`MAX_CANCEL_CHECKS` tries, the last one at least the backoff ago. At most ``limit``.
    """
    candidates = (
        Run.objects.filter(
            status=RunStatus.CANCELLED,
            provider_cancel_result__in=UNCLEAR_CANCEL_RESULTS,
            provider_cancel_checks__lt=MAX_CANCEL_CHECKS,
            created_at__gte=now - timedelta(seconds=CANCEL_CHECK_WINDOW_SECONDS),
        )
        .exclude(provider_operation_id="")
        .order_by("created_at")
        .values_list("id", "provider_cancel_checks", "provider_cancel_checked_at")
    )
    due = []
    for run_id, checks, checked_at in candidates[: limit * 4]:
        wait = timedelta(seconds=CANCEL_CHECK_BACKOFF_SECONDS * 2 ** max(0, checks - 1))
        if checked_at is None or checked_at + wait <= now:
            due.append(run_id)
    return due[:limit]


async def arevisit_unclear_cancels(now: datetime | None = None) -> int:
    """Ask again about every due unclear cancel (:func:`due_unclear_cancels`); return how many were asked.

    Called by the relaunch scan. A run that fails to be read is skipped (logged); raises nothing.
    """
    asked = 0
    for run_id in await sync_to_async(due_unclear_cancels)(now or timezone.now()):
        try:
            run = await Run.objects.aget(pk=run_id)
            asked += bool(await arecheck_cancel(run))
        except Exception:  # noqa: BLE001 - one bad run must not stop the scan
            logger.exception("asking again about the cancel of run %s failed", run_id)
    return asked
