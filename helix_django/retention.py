"""Retention: delete what an age policy per status says is old (``manage.py helix_purge``).

Three kinds of data age out, each only once nothing live can need it:

- **stream chunks** of a session whose current run ended with a terminal checkpoint (its
  messages are committed, so the snapshot holds the conversation) and that was idle for
  ``CHUNKS_AFTER_HOURS``: purged through the stream manager (``purge_stream``: the head
  stays, sequences are never reused);
- **ended runs** that are no longer their session's current run, by status after
  ``RUNS[status]["AFTER_DAYS"]``: with ``KEEP_MESSAGES`` the conversation rows stay (their
  ``run`` becomes empty) and the run, its tool executions, its checkpoints other than the
  session's latest, and the archived rows it wrote are deleted;
- **whole conversations** whose current run ended with a status whose policy says
  ``KEEP_MESSAGES: False``, idle for ``AFTER_DAYS``: the session and everything in it.

Deletes go in batches of ``BATCH_SIZE`` rows, one short transaction each, and every delete
re-checks its condition in its own statement, so a send that starts a new run in a session
meanwhile (it moves ``current_run`` and ``updated_at``) keeps that session out of the batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction
from django.db.models import Max, Q, QuerySet
from django.utils import timezone

from helix_django.conf import DEFAULTS, helix_settings
from helix_django.models import ChatSession, Checkpoint, CheckpointKind, Message, Run, ToolExecution
from helix_django.models.run import TERMINAL_STATUSES
from helix_django.streams import get_stream_manager
from helix_django.streams.base import TERMINAL_STREAM_STATUSES


@dataclasses.dataclass
class PurgeReport:
    """What a purge removed (or, with ``dry_run``, would remove): row counts per kind."""

    streams: int = 0
    sessions: int = 0
    runs: int = 0
    tool_executions: int = 0
    checkpoints: int = 0
    messages: int = 0
    dry_run: bool = False
    doomed: set[str] = dataclasses.field(default_factory=set, repr=False)
    """Sessions a dry run counted as deleted: the later steps leave them out, as a real run would."""

    def lines(self) -> list[str]:
        """Return one ``"<kind>: <count>"`` line per kind, in a fixed order."""
        verb = "would purge" if self.dry_run else "purged"
        return [
            f"{verb} streams: {self.streams}",
            f"{verb} sessions: {self.sessions}",
            f"{verb} runs: {self.runs}",
            f"{verb} tool executions: {self.tool_executions}",
            f"{verb} checkpoints: {self.checkpoints}",
            f"{verb} messages: {self.messages}",
        ]


def policy() -> dict[str, Any]:
    """Return the effective ``RETENTION`` setting: the user's keys over the defaults (``RUNS`` per status)."""
    defaults, user = DEFAULTS["RETENTION"], helix_settings.RETENTION
    runs = {**defaults["RUNS"], **(user.get("RUNS") or {})}
    return {**defaults, **user, "RUNS": runs}


def _batches(queryset: QuerySet, size: int) -> Iterator[list[Any]]:
    """Yield lists of at most ``size`` primary keys of ``queryset``, in key order (keyset pagination).

    Each batch is read after the previous one was handled, so a dry run and a deleting run
    walk the same rows, and no read holds a lock across batches.
    """
    last: Any = None
    while True:
        page = queryset.order_by("pk") if last is None else queryset.filter(pk__gt=last).order_by("pk")
        keys = list(page.values_list("pk", flat=True)[:size])
        if not keys:
            return
        last = keys[-1]
        yield keys


def _ended(now: datetime, hours: float) -> Q:
    """Sessions whose current run ended with a terminal checkpoint and that were idle ``hours``."""
    committed = Checkpoint.objects.filter(kind=CheckpointKind.TERMINAL).values("run_id")
    return Q(
        current_run__status__in=TERMINAL_STATUSES,
        current_run_id__in=committed,
        updated_at__lt=now - timedelta(hours=hours),
    )


def purge_streams(report: PurgeReport, *, now: datetime, hours: float | None, batch: int) -> None:
    """Purge the stored chunks of ended, idle sessions (see the module docstring)."""
    if hours is None:
        return
    manager = get_stream_manager()
    candidates = ChatSession.objects.filter(_ended(now, hours)).exclude(pk__in=report.doomed)
    for keys in _batches(candidates, batch):
        for session_id, run_id in candidates.filter(pk__in=keys).values_list("pk", "current_run_id"):
            info = async_to_sync(manager.get_info)(session_id)
            # Only a stream still claimed by the ended current run: a purged stream has no run, and
            # a stream claimed by a newer run (a send since the query) is live; never purge under it.
            if info is None or info.run_id != run_id or info.status not in TERMINAL_STREAM_STATUSES:
                continue
            report.streams += 1
            if not report.dry_run:
                async_to_sync(manager.purge_stream)(session_id)


def purge_runs(report: PurgeReport, status: str, *, now: datetime, days: float, batch: int) -> None:
    """Delete ended runs of ``status`` older than ``days`` that are not their session's current run.

    The conversation rows they wrote stay; their archived rows, tool executions and their
    checkpoints (except each session's latest) go.
    """
    cutoff = now - timedelta(days=days)
    current = ChatSession.objects.filter(current_run__isnull=False).values("current_run_id")
    old = Run.objects.filter(status=status).filter(
        Q(finished_at__lt=cutoff) | Q(finished_at__isnull=True, created_at__lt=cutoff)
    )
    candidates = old.exclude(pk__in=current).exclude(session_id__in=report.doomed)
    for keys in _batches(candidates, batch):
        with transaction.atomic():
            runs = candidates.filter(pk__in=keys)  # re-checked: a run that became current again stays
            latest = Checkpoint.objects.values("session_id").annotate(latest=Max("id")).values("latest")
            checkpoints = Checkpoint.objects.filter(run__in=runs).exclude(id__in=latest)
            archived = Message.objects.filter(run__in=runs, position__isnull=True)
            tools = ToolExecution.objects.filter(run__in=runs)
            report.tool_executions += tools.count()
            report.checkpoints += checkpoints.count()
            report.messages += archived.count()
            count = runs.count()
            report.runs += count
            if not report.dry_run:
                checkpoints.delete()
                archived.delete()
                runs.delete()  # tool executions cascade; conversation rows keep their text (run=NULL)


def purge_sessions(report: PurgeReport, status: str, *, now: datetime, days: float, batch: int) -> None:
    """Delete whole conversations whose current run ended as ``status`` and that were idle ``days``."""
    cutoff = now - timedelta(days=days)
    candidates = ChatSession.objects.filter(current_run__status=status, updated_at__lt=cutoff)
    for keys in _batches(candidates, batch):
        with transaction.atomic():
            sessions = candidates.filter(pk__in=keys)
            report.messages += Message.objects.filter(session__in=sessions).count()
            report.checkpoints += Checkpoint.objects.filter(session__in=sessions).count()
            report.tool_executions += ToolExecution.objects.filter(run__session__in=sessions).count()
            report.runs += Run.objects.filter(session__in=sessions).count()
            report.sessions += len(sessions)
            report.streams += len(sessions)
            if report.dry_run:
                report.doomed.update(s.pk for s in sessions)
            else:
                # ChatSession's post_delete purges each stream once the deletion commits.
                ChatSession.objects.filter(pk__in=[s.pk for s in sessions]).delete()


def purge(*, dry_run: bool = False, now: datetime | None = None) -> PurgeReport:
    """Apply the ``RETENTION`` policy once; return what was removed (or would be, with ``dry_run``).

    Conversations go first (their streams with them), then runs, then streams of what stays.
    Raises StreamConnectionError when the stream manager cannot be read.
    """
    now = now or timezone.now()
    settings = policy()
    batch = int(settings["BATCH_SIZE"])
    report = PurgeReport(dry_run=dry_run)
    for status, rule in settings["RUNS"].items():
        if rule and rule.get("AFTER_DAYS") is not None and not rule.get("KEEP_MESSAGES", True):
            purge_sessions(report, status, now=now, days=rule["AFTER_DAYS"], batch=batch)
    for status, rule in settings["RUNS"].items():
        if rule and rule.get("AFTER_DAYS") is not None:
            purge_runs(report, status, now=now, days=rule["AFTER_DAYS"], batch=batch)
    purge_streams(report, now=now, hours=settings["CHUNKS_AFTER_HOURS"], batch=batch)
    return report
