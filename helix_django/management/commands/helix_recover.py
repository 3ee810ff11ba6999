"""``manage.py helix_recover``: run the relaunch scan (000, "Recovery on app relaunch")."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from helix_django.errors import HelixError
from helix_django.recovery.scan import ScanReport, arecover, arecover_run
from helix_django.runtime.executor import get_executor


class Command(BaseCommand):
    help = (
        "Find generations left in flight by a dead process (lease expired) and end each as its "
        "persisted state says: completed, interrupted (partial kept) or cancelled; a run whose durable "
        "provider operation still runs goes on here as the same run (re-attached). Never restarts "
        "a generation or re-runs a tool."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="Report what would be recovered; change nothing.")
        parser.add_argument("--run", dest="run_ids", action="append", default=[], help="Only this run id (repeatable).")
        parser.add_argument("--limit", type=int, default=None, help="At most this many runs per scan.")
        parser.add_argument(
            "--every", type=float, default=None, help="Repeat the scan every SECONDS (a worker's periodic scan)."
        )
        parser.add_argument("--times", type=int, default=None, help="With --every: stop after this many scans.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["limit"] is not None and options["limit"] < 1:
            raise CommandError("--limit must be at least 1.")
        if options["every"] is not None and options["every"] <= 0:
            raise CommandError("--every must be a positive number of seconds.")
        count = 0
        while True:
            self._scan_once(options)
            count += 1
            if options["every"] is None or (options["times"] and count >= options["times"]):
                return
            time.sleep(options["every"])

    def _scan_once(self, options: dict[str, Any]) -> None:
        dry_run = options["dry_run"]
        try:
            if options["run_ids"]:
                report = ScanReport(is_dry_run=dry_run)
                for run_id in options["run_ids"]:
                    report.decisions.append(asyncio.run(_recover_one(run_id, dry_run=dry_run)))
            else:
                report = asyncio.run(_scan(dry_run=dry_run, limit=options["limit"]))
        except HelixError as exc:
            raise CommandError(f"Recovery failed: {exc.code}") from exc
        for decision in report.decisions:
            self.stdout.write(
                f"{decision.run_id}: {decision.previous_status or '?'} -> {decision.outcome}"
                + (f" ({decision.reason})" if decision.reason else "")
                + (f" stage={decision.stage} partial_chars={decision.partial_chars}" if decision.stage else "")
            )
        counts = " ".join(f"{key}={value}" for key, value in report.counts.items())
        self.stdout.write(("[dry run] " if dry_run else "") + counts)


async def _scan(*, dry_run: bool, limit: int | None) -> ScanReport:
    """The scan with this process's executor; returns once the runs it re-attached here ended."""
    executor = get_executor()
    report = await arecover(dry_run=dry_run, limit=limit, executor=executor)
    for decision in report.decisions:
        if decision.outcome == "reattached":  # the command's loop ends with it: the run must end first
            await executor.wait(decision.run_id)
    return report


async def _recover_one(run_id: str, *, dry_run: bool) -> Any:
    """One run's decision with this process's executor; returns once a run re-attached here ended."""
    executor = get_executor()
    decision = await arecover_run(run_id, dry_run=dry_run, executor=executor)
    if decision.outcome == "reattached":
        await executor.wait(decision.run_id)
    return decision
