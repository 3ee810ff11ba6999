"""``manage.py helix_purge``: apply the ``RETENTION`` policy (see :mod:`helix_django.retention`)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from helix_django.errors import HelixError
from helix_django.retention import purge


class Command(BaseCommand):
    help = (
        "Delete what the HELIX['RETENTION'] policy says is old: stored stream chunks of ended, idle "
        "conversations; ended generations by status and age (their conversation rows kept, or whole "
        "conversations deleted). Never touches a live generation. Prints a count per kind."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="Count what would be purged; delete nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = purge(dry_run=options["dry_run"])
        except HelixError as exc:
            raise CommandError(f"purge stopped: {exc.code}") from exc
        for line in report.lines():
            self.stdout.write(line)
