"""The figures of the per-kind recovery campaign (tests/recovery/kind_campaign.py): counts per kind and the table."""

from __future__ import annotations

import dataclasses
import statistics

TRUTH_BOUND_SECONDS = 15.0
"""The most a restarted process may take to tell a killed run's truth (generous: a loaded 2-core machine)."""


@dataclasses.dataclass
class KindFigures:
    """What the campaign saw for one provider kind (000, "Recovery on app relaunch")."""

    kind: str
    durable: bool
    killed: int = 0
    """Runs in flight (``streaming``) when their process was SIGKILLed."""
    finished_before_kill: int = 0
    """Runs that ended before the kill came (not counted as killed)."""
    reattached: int = 0
    """Killed runs the restarted process went on with: the same run completed, the full text exactly once."""
    completed: int = 0
    """Killed runs completed from the provider's final output (the operation ended while no server was up)."""
    interrupted: int = 0
    """Killed runs ended ``interrupted``."""
    typed: int = 0
    """Interrupted runs whose chat-route ending, read from the client's cursor, is the typed ``run_interrupted``."""
    orphans: int = 0
    """Operations still ``in_progress`` at the provider after the campaign."""
    left_streaming: int = 0
    """Killed runs still ``streaming`` after the campaign."""
    truth_seconds: list[float] = dataclasses.field(default_factory=list)
    """Per killed run: seconds from the new process's start to its truth (the run no longer ``streaming``
    under a dead owner, or the first chunk of its re-attached or completed rest)."""
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def truth_median(self) -> float:
        """Median seconds to truth (0.0 without killed runs)."""
        return statistics.median(self.truth_seconds) if self.truth_seconds else 0.0

    @property
    def truth_max(self) -> float:
        """Longest seconds to truth (0.0 without killed runs)."""
        return max(self.truth_seconds, default=0.0)

    @property
    def is_clean(self) -> bool:
        """No orphan, nothing left ``streaming``, every truth told in time, and the kind's promise kept.

        Durable kinds: every killed run re-attached or completed, none interrupted. Ephemeral:
        every killed run interrupted with its typed error.
        """
        if not self.killed or self.orphans or self.left_streaming or self.notes:
            return False
        if len(self.truth_seconds) != self.killed or self.truth_max >= TRUTH_BOUND_SECONDS:
            return False
        if self.durable:
            return self.reattached + self.completed == self.killed and not self.interrupted
        return self.interrupted == self.typed == self.killed


HEADER = ("kind", "killed", "re-attached", "completed", "interrupted", "orphans", "truth median s", "truth max s")


def table(figures: list[KindFigures]) -> str:
    """The per-kind table: one row per kind, columns as :data:`HEADER` (a Markdown table)."""
    rows = [HEADER] + [
        (
            f.kind,
            str(f.killed),
            str(f.reattached),
            str(f.completed),
            f"{f.interrupted} ({f.typed} typed)" if not f.durable else str(f.interrupted),
            str(f.orphans),
            f"{f.truth_median:.2f}",
            f"{f.truth_max:.2f}",
        )
        for f in figures
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    lines = ["| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def report(figures: list[KindFigures]) -> str:
    """The table, then each kind's notes and the runs that ended before their kill."""
    extra = [
        f"{f.kind}: {f.finished_before_kill} run(s) ended before the kill; {f.left_streaming} left streaming"
        for f in figures
    ]
    notes = [f"{f.kind}: {note}" for f in figures for note in f.notes[:10]]
    return "\n".join([table(figures), *extra, *notes])
