"""The embedded default launcher: each run executes as an asyncio task in the process that accepted it."""

from __future__ import annotations

from typing import Any

from helix_django.runtime import shutdown
from helix_django.runtime.agent import RunLoop
from helix_django.runtime.handles import Entry, Launch, RunHandle
from helix_django.runtime.launchers.base import BaseLauncher
from helix_django.runtime.local_runs import LocalRuns


class LocalLauncher(BaseLauncher):
    """Runs each run as a task on the loop where runs live (:mod:`helix_django.runtime.runner`).

    The run holds a renewable lease owned by this process; on SIGTERM the process drains
    its runs (:mod:`helix_django.runtime.shutdown`).
    """

    async def dispatch(self, runs: LocalRuns, entry: Entry, loop: RunLoop) -> None:
        """Start the run's task here."""
        runs.start_task(entry, loop)

    async def launched(self, runs: LocalRuns, handle: RunHandle, launch: Launch, user: Any, owner: str) -> RunHandle:
        """Make sure this process drains its runs on SIGTERM; return ``handle``."""
        shutdown.install(runs)
        return handle
