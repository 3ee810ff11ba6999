"""The relaunch scan: find runs left in flight by a dead process and decide their state.

000, "Recovery on app relaunch": for each run in ``starting``, ``streaming``, ``tooling``
or ``recovering`` whose lease expired, or whose holder is certainly gone (its process on
this host no longer exists: :mod:`helix_django.processes`):

1. did the process exit normally? (the run wrote its ``finish`` and ``helix-run-end``
   chunks but died before the terminal commit -> complete it from those chunks);
2. is there a provider operation id? 3. which tool executions are persisted? (started
   without a result -> ``unknown``, never re-run);
4. query the provider's durable state where it can be queried (bounded retries) ->
   ``completed`` from the provider's output; still running (or completed asking for tools)
   with an executor that can go on with it -> ``reattached``: the same run goes on in this
   process from the operation's position (:mod:`helix_django.recovery.handover`); still
   running otherwise -> ``recovering``, followed until it ends
   (:mod:`helix_django.recovery.follow`), then completed from its output;
5. otherwise mark the run ``interrupted``, partial output kept, its stream failed with a
   typed, retryable ``run_interrupted`` error;
6. the fitting actions are then offered by :func:`~helix_django.recovery.inventory.available_actions`.

It never restarts a generation and never re-runs a tool. A cancel request recorded
before the process died ends the run ``cancelled``: a cancelled run stays cancelled.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from collections import Counter
from datetime import datetime

from django.utils import timezone

from helix_django import store, telemetry
from helix_django.conf import helix_settings
from helix_django.errors import RunNotFoundError, RunSupersededError, as_helix_error
from helix_django.models import Run, RunStatus
from helix_django.models.run import SCANNED_STATUSES
from helix_django.orm import sync_to_async
from helix_django.processes import is_certainly_gone, lease_owner_id
from helix_django.recovery.cancels import arevisit_unclear_cancels
from helix_django.recovery.fences import fence_writer, release_fence
from helix_django.recovery.follow import afollow_operation
from helix_django.recovery.handover import Reattacher, ahand_over, amove_to_recovering, reattach_reason
from helix_django.recovery.outcomes import acancel_ended, aclose_stream, acomplete_from_provider, ainterrupt
from helix_django.recovery.partial import arebuild_partial
from helix_django.recovery.provider import acancel_operation, aquery_operation
from helix_django.store.leases import lease_expired_q


def SCAN_OWNER() -> str:  # noqa: N802 - reads like the constant it stands for
    """Return the lease owner id of this process's scans."""
    pid = os.getpid()  # a forked child scans as itself
    if pid not in _scan_owners:
        _scan_owners[pid] = lease_owner_id("recovery")
    return _scan_owners[pid]


_scan_owners: dict[int, str] = {}


@dataclasses.dataclass
class RunDecision:
    """What the scan decided (or, in a dry run, would decide) for one run."""

    run_id: str
    previous_status: str
    outcome: str
    """``interrupted``, ``completed``, ``reattached``, ``recovering``, ``cancelled``, ``skipped`` (changed
    meanwhile) or ``would_recover`` (dry run)."""
    reason: str = ""
    """Why: ``process_lost``, ``exited_normally``, ``provider_completed``, ``provider_in_progress``,
    ``provider_failed``, ``operation_unknown``, ``status_unavailable``, ``cancel_requested``..."""
    stage: str = ""
    partial_chars: int = 0


@dataclasses.dataclass
class ScanReport:
    """All decisions of one scan."""

    decisions: list[RunDecision] = dataclasses.field(default_factory=list)
    is_dry_run: bool = False
    queued_started: int = 0
    """Queued messages the scan started (sessions whose last run ended with no start of their next)."""

    @property
    def counts(self) -> dict[str, int]:
        """Return ``{outcome: count}`` plus ``scanned``."""
        counts = Counter(d.outcome for d in self.decisions)
        return {"scanned": len(self.decisions), **dict(sorted(counts.items()))}


def _stage(run: Run, has_text: bool) -> str:
    """Return where the run stopped: ``starting`` (no provider operation yet), ``awaiting_first_token``,
    ``streaming``, ``tooling`` or ``recovering``."""
    if run.status == RunStatus.STARTING:
        return "starting" if not run.provider_operation_id else "awaiting_first_token"
    if run.status == RunStatus.STREAMING and not has_text:
        return "awaiting_first_token"
    return str(run.status)


def expired_run_ids(now: datetime | None = None, limit: int | None = None) -> list[str]:
    """Return ids of runs in scanned statuses whose lease expired or whose holder is certainly gone, oldest first.

    A holder is certainly gone when its process on this host no longer exists
    (:func:`helix_django.processes.is_certainly_gone`): a restarted server recovers its
    predecessor's runs at its first scan, not a lease later.
    """
    in_flight = Run.objects.filter(status__in=SCANNED_STATUSES).order_by("created_at")
    expired = list(in_flight.filter(lease_expired_q(now)).values_list("id", "created_at"))
    held = (
        in_flight.exclude(lease_expired_q(now)).exclude(lease_owner="").values_list("id", "created_at", "lease_owner")
    )
    orphaned = [(run_id, created) for run_id, created, owner in held if is_certainly_gone(owner)]
    ids = [run_id for run_id, _created in sorted(expired + orphaned, key=lambda row: row[1])]
    return ids[:limit] if limit else ids


async def arecover_run(
    run_id: str,
    *,
    dry_run: bool = False,
    force: bool = False,
    query_provider: bool = True,
    cause: str = "process_lost",
    followers: list[asyncio.Task[str]] | None = None,
    executor: Reattacher | None = None,
) -> RunDecision:
    """Inspect one run and end it as the six steps say (module docstring); return the decision.

    Without ``force`` a run whose lease is still live, or that is no longer in a scanned
    status, is ``skipped``. ``query_provider=False`` skips step 4 (staff's "Mark interrupted").
    ``cause`` is recorded on a run ended ``interrupted`` without a provider's word
    (``process_lost``; ``server_stopped`` for a run a stopping process ends); such a run's
    provider operation is cancelled (:func:`~helix_django.recovery.provider.acancel_operation`).
    With ``followers`` (the scan's list), a run whose operation is still running goes to
    ``recovering`` (outcome ``recovering``) and a task following it is appended
    (:mod:`helix_django.recovery.follow`); without, it is ended ``interrupted``. With
    ``executor`` (the runtime's), a run whose operation still runs, or completed asking
    for tools, goes on as the same run there first (outcome ``reattached``, reason
    ``provider_in_progress`` or ``provider_requested_tools``).
    Raises RunNotFoundError for an unknown run; StreamConnectionError when chunks cannot be read.
    """
    run = await Run.objects.filter(pk=run_id).afirst()
    if run is None:
        raise RunNotFoundError()
    decision = RunDecision(run.id, run.status, "skipped")
    orphaned = bool(run.lease_owner) and is_certainly_gone(run.lease_owner)
    expired = orphaned or await Run.objects.filter(lease_expired_q(), pk=run_id).aexists()
    # A run waiting for the browser holds no lease (the scan leaves it); staff may end it when forced.
    in_flight = run.status in SCANNED_STATUSES or (force and run.status == RunStatus.SUSPENDED_CLIENT_TOOL)
    if not in_flight or not (expired or force):
        decision.reason = "not_in_flight" if not in_flight else "lease_live"
        return decision
    started = time.monotonic()
    if dry_run:
        partial = await arebuild_partial(run)
        decision.partial_chars, decision.stage = partial.text_chars, _stage(run, partial.text_chars > 0)
        decision.outcome, decision.reason = "would_recover", "dry_run"
        return decision
    if not force and not await _take_lease(run, orphaned=orphaned):
        decision.reason = "claimed_by_other"  # another scanner (or a revived process) took it first
        return decision
    is_fenced = await fence_writer(run)
    partial = await arebuild_partial(run)  # after the fence: what the writer wrote before it decides
    decision.partial_chars, decision.stage = partial.text_chars, _stage(run, partial.text_chars > 0)
    try:
        await _decide(
            run, partial, decision, query_provider=query_provider, cause=cause, followers=followers, executor=executor
        )
        if decision.outcome == "interrupted" and not query_provider:
            await acancel_operation(run)  # given up without the provider's word: nothing generates unseen
    except RunSupersededError:
        decision.outcome, decision.reason = "skipped", "changed_meanwhile"
        if is_fenced:
            await release_fence(run.id)
    telemetry.emit(
        "recovery.outcome",
        run_id=run.id,
        session_id=run.session_id,
        provider=run.provider,
        model=run.model,
        action="relaunch_scan",
        outcome=decision.outcome,
        reason=decision.reason,
        stage=decision.stage,
        partial_chars=decision.partial_chars,
        duration_ms=int((time.monotonic() - started) * 1000),
    )
    return decision


async def _take_lease(run: Run, *, orphaned: bool) -> bool:
    """Take the run's lease for this scan: from its gone holder (compare-and-set on that holder), else if free."""
    if orphaned:
        return await store.atake_over_lease(run.id, run.lease_owner, SCAN_OWNER(), helix_settings.LEASE_SECONDS)
    return await store.aclaim_lease(run.id, SCAN_OWNER(), helix_settings.LEASE_SECONDS)


async def _start_following(run: Run, followers: list[asyncio.Task[str]]) -> bool:
    """Move ``run`` to ``recovering`` and follow its still-running operation (:mod:`.follow`); False when
    following is off (``OPERATION_WAIT_SECONDS`` 0) or the run changed meanwhile."""
    if helix_settings.OPERATION_WAIT_SECONDS <= 0:
        return False
    owner = SCAN_OWNER()
    moved = await amove_to_recovering(run, owner)
    if moved:
        followers.append(asyncio.ensure_future(afollow_operation(run.id, owner)))
    return moved


async def _decide(
    run: Run,
    partial,
    decision: RunDecision,
    *,
    query_provider: bool,
    cause: str,
    followers: list | None = None,
    executor: Reattacher | None = None,
) -> None:
    # 0. a person asked to cancel before the process died: it stays cancelled.
    if run.cancel_requested_at is not None or partial.end_status == "cancelled":
        await acancel_ended(run, partial, provider_cancel_result=run.provider_cancel_result or "not_requested")
        decision.outcome, decision.reason = "cancelled", "cancel_requested"
        return
    # 1. the process finished the run's output but died before its terminal commit.
    if partial.has_finish and partial.end_status in ("", "completed"):
        await store.acommit_terminal(
            run.id,
            RunStatus.COMPLETED,
            response_message=partial.message,
            stream_sequence=partial.last_sequence,
        )
        await aclose_stream(run, [{"type": "helix-run-end", "status": "completed"}], end_status="completed", error=None)
        decision.outcome, decision.reason = "completed", "exited_normally"
        return
    # 2-4. a provider operation whose durable state can be queried.
    invalidate = False
    if query_provider and run.provider_operation_id:
        query = await aquery_operation(run)
        result = query.result
        if result is not None and result.status == "completed" and not result.tool_calls:
            await acomplete_from_provider(run, result)
            decision.outcome, decision.reason = "completed", "provider_completed"
            return
        reason = reattach_reason(result) if executor is not None else ""
        if reason and executor is not None and await ahand_over(run, executor, SCAN_OWNER()):
            decision.outcome, decision.reason = "reattached", reason  # it goes on here, as the same run
            return
        if result is not None and result.status == "in_progress" and followers is not None:
            if await _start_following(run, followers):
                decision.outcome, decision.reason = "recovering", "provider_in_progress"
                return
        if result is None:
            cause = query.reason if query.reason != "ok" else "status_unavailable"
        elif result.status == "unknown":
            cause, invalidate = "operation_unknown", True
        elif result.status == "completed":
            cause = "provider_requested_tools"
        else:
            cause = f"provider_{result.status}"
    # 5. mark interrupted (tool outcomes classified inside), partial kept, stream failed.
    await ainterrupt(run, partial, stage=decision.stage, cause=cause[:40], invalidate=invalidate)
    decision.outcome, decision.reason = "interrupted", cause


async def arecover(
    *,
    dry_run: bool = False,
    limit: int | None = None,
    now: datetime | None = None,
    executor: Reattacher | None = None,
) -> ScanReport:
    """Run the relaunch scan over every expired in-flight run (module docstring); return the report.

    ``executor``: the runtime's, which goes on with runs whose durable operation still runs
    (``reattached``), asks the tools of a run it interrupted about their unknown outcomes
    (``reconcile``), and starts messages queued in sessions left without a live run
    (``queued_started``); without one they are followed (``recovering``).

    Runs whose provider operation is still running are followed until it ends (at most
    ``OPERATION_WAIT_SECONDS``) before the scan returns: their decision says ``recovering``.
    Cancelled runs whose provider cancel answer was unclear are asked about again, bounded
    (:func:`~helix_django.recovery.cancels.arevisit_unclear_cancels`; not in a dry run).

    A run that fails to be read is reported as ``skipped`` with reason ``error:<code>``;
    the scan goes on with the next run.
    """
    now = now or timezone.now()
    report = ScanReport(is_dry_run=dry_run)
    followers: list[asyncio.Task[str]] = []
    for run_id in await sync_to_async(expired_run_ids)(now, limit):
        try:
            decision = await arecover_run(run_id, dry_run=dry_run, followers=followers, executor=executor)
            report.decisions.append(decision)
            if executor is not None and decision.outcome == "interrupted":  # tools settle their unknown outcomes
                await executor.reconcile_tools(run_id)
        except Exception as exc:  # noqa: BLE001 - one bad run must not stop the scan
            report.decisions.append(RunDecision(run_id, "", "skipped", f"error:{as_helix_error(exc).code}"))
    if followers:  # the operations still running, followed together until each ends (bounded)
        await asyncio.gather(*followers)
    if not dry_run:  # cancels whose provider answer was unclear, asked again (bounded: recovery.cancels)
        await arevisit_unclear_cancels(now)
    if executor is not None and not dry_run:  # messages queued behind runs whose process stopped
        report.queued_started = await executor.start_queued()
    counts = {k: v for k, v in report.counts.items() if k in telemetry.ALLOWED_FIELDS}
    # A periodic scan that found nothing is routine: keep it out of INFO logs.
    telemetry.emit("recovery.scan", level=logging.INFO if report.decisions else logging.DEBUG, **counts)
    return report
