"""The figures of the kill campaign (tests/recovery/kill_campaign.py): counts, the five that must be 0, the report."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Figures:
    """What the campaign saw: the five ``bad_*`` counts must be 0 (issue 17, "Done when")."""

    killed: int = 0
    """Runs in flight when their process was SIGKILLed."""
    interrupted: int = 0
    """Killed runs the scan ended ``interrupted``."""
    failed: int = 0
    cancelled: int = 0
    tool_unknown: int = 0
    """Runs killed right after a side effect (their tool outcome is ``unknown`` after the scan)."""
    redo_attempts: int = 0
    races: int = 0
    race_finish_seen: int = 0
    race_interrupted: int = 0
    race_within_50ms: int = 0
    bad_untyped_chat: int = 0
    bad_untyped_raw: int = 0
    bad_untyped_ws: int = 0
    bad_cancel_without_abort: int = 0
    bad_ws_duplicates: int = 0
    bad_race_flips: int = 0
    bad_model_calls_over_unknown: int = 0
    notes: list[str] = dataclasses.field(default_factory=list)
    """One line per bad ending (session, route, what was read), for the report."""

    @property
    def untyped_endings(self) -> int:
        """Interrupted or failed runs that ended without their typed error, summed over the routes."""
        return self.bad_untyped_chat + self.bad_untyped_raw + self.bad_untyped_ws

    @property
    def is_clean(self) -> bool:
        """Whether every figure that must be 0 is 0."""
        return not (
            self.untyped_endings
            or self.bad_cancel_without_abort
            or self.bad_ws_duplicates
            or self.bad_race_flips
            or self.bad_model_calls_over_unknown
        )

    def report(self) -> str:
        """The printed figures (one line each)."""
        return "\n".join(
            [
                f"runs: killed={self.killed} interrupted={self.interrupted} failed={self.failed} "
                f"cancelled={self.cancelled} tool_unknown={self.tool_unknown}",
                f"interrupted/failed runs ending without a typed error: {self.untyped_endings} "
                f"(chat={self.bad_untyped_chat} raw={self.bad_untyped_raw} ws={self.bad_untyped_ws})",
                f"cancelled runs whose chat-route ending lacks abort: {self.bad_cancel_without_abort}",
                f"sequences delivered twice on one WebSocket (doubled resumes): {self.bad_ws_duplicates}",
                f"status flips in the reconcile-vs-finish race: {self.bad_race_flips} (races={self.races} "
                f"finish_seen={self.race_finish_seen} interrupted={self.race_interrupted} "
                f"mark_within_50ms_of_finish={self.race_within_50ms})",
                f"model calls started over an unknown tool outcome: {self.bad_model_calls_over_unknown} "
                f"(redo attempts={self.redo_attempts})",
                *self.notes[:20],
            ]
        )
