"""The runs executing in this process: their entries, their tasks, the loop where they live.

An :class:`~helix_django.runtime.handles.Entry` exists from a run's opening (its stream
claim in flight) until its task ends; the outcome of an ended run is kept a while
(:data:`RECENT_RUNS`) so :meth:`LocalRuns.wait` can still report it. Run tasks execute
on a loop that lasts as long as the process (:mod:`.runner`): the ASGI server's, or this
object's own loop thread for other callers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging

from helix_django.deadlines import within
from helix_django.runtime.agent import RunLoop
from helix_django.runtime.handles import Entry
from helix_django.runtime.runner import RunnerLoop, start_task

logger = logging.getLogger("helix_django.runtime.executor")

#: How many ended runs are remembered for :meth:`LocalRuns.wait`.
RECENT_RUNS = 256

#: Seconds an entry point waits for a local run task to end after cancelling it.
CANCEL_WAIT_SECONDS = 15.0


class LocalRuns:
    """The entries of runs executing (or opening) in this process, and the loop thread they may run on."""

    def __init__(self, name: str) -> None:
        self._entries: dict[str, Entry] = {}
        self._recent: dict[str, Entry] = {}
        """Runs that ended here lately (oldest first), so :meth:`wait` can still report them."""
        self.runner = RunnerLoop(name)
        """The own loop thread: where run tasks execute unless started on the server's loop."""

    def get(self, run_id: str) -> Entry | None:
        """Return the entry of a run executing or opening here (None: not here)."""
        return self._entries.get(run_id)

    def open(self, run_id: str) -> Entry:
        """Register a run opening on the running loop; return its entry."""
        entry = self._entries[run_id] = Entry(event_loop=asyncio.get_running_loop())
        return entry

    def drop(self, run_id: str) -> None:
        """Forget a run's entry without keeping its outcome (it failed to open, or went to a worker)."""
        self._entries.pop(run_id, None)

    def is_local(self, run_id: str) -> bool:
        """Whether ``run_id`` is executing in this process right now."""
        entry = self._entries.get(run_id)
        return entry is not None and not entry.done.done()

    def local_runs(self) -> dict[str, concurrent.futures.Future[str]]:
        """Return ``{run_id: future of its ending status}`` of the runs executing in this process now."""
        return {run_id: entry.done for run_id, entry in list(self._entries.items()) if not entry.done.done()}

    async def wait(self, run_id: str, timeout: float | None = None) -> str | None:
        """Wait until a run executing here ends or suspends; return its final status (None if not local).

        Raises asyncio.TimeoutError after ``timeout`` seconds (None: no bound).
        """
        entry = self._entries.get(run_id) or self._recent.get(run_id)
        if entry is None:
            return None
        return await within(asyncio.wrap_future(entry.done), timeout)

    async def wait_claimed(self, run_id: str) -> None:
        """Wait (at most :data:`CANCEL_WAIT_SECONDS`) until a run opening here has claimed its stream."""
        entry = self._entries.get(run_id)
        if entry is not None:
            try:
                await within(asyncio.shield(asyncio.wrap_future(entry.claimed)), CANCEL_WAIT_SECONDS)
            except asyncio.TimeoutError:
                pass  # the caller waits for the stream to go live (002, "The run-start window")

    def start_task(self, entry: Entry, loop: RunLoop) -> None:
        """Start the run's task on the running loop; its ending retires the entry."""

        async def drive() -> None:
            entry.started = True
            status = "abandoned"
            try:
                status = await loop.run_forever()
            except asyncio.CancelledError:
                logger.info("run %s task stopped without ending the run (process going away)", loop.run_id)
            finally:
                self.retire(entry, loop.run_id, status)

        task = start_task(drive(), name=f"helix-run-{loop.run_id}")
        # A task cancelled before its first step (abandon() at once) never runs drive: retired here.
        task.add_done_callback(lambda _task: self.retire(entry, loop.run_id, "abandoned"))
        entry.loop, entry.task, entry.event_loop = loop, task, asyncio.get_running_loop()
        loop.task = task

    def retire(self, entry: Entry, run_id: str, status: str) -> None:
        """The run's task ended with ``status``: drop its entry, keep its outcome for wait() (once)."""
        if entry.done.done():
            return
        self._entries.pop(run_id, None)
        # wait() needs only the outcome: the run's loop (its message, writer, agent) is let go.
        entry.loop = entry.task = None
        self._recent[run_id] = entry
        while len(self._recent) > RECENT_RUNS:
            self._recent.pop(next(iter(self._recent)))
        entry.done.set_result(status)

    def abandon(self, run_id: str) -> bool:
        """Stop executing a run here *without* ending it, as a dying process would; True if it was running.

        The run stays live with its lease until the lease expires; then the relaunch scan
        (or a user's Continue/Regenerate) takes it over. For process shutdown and tests.
        """
        entry = self._entries.get(run_id)
        if entry is None or entry.task is None or entry.done.done():
            return False
        assert entry.event_loop is not None  # start_task sets event_loop together with task
        if entry.event_loop.is_closed():
            return False
        entry.event_loop.call_soon_threadsafe(entry.task.cancel)
        return True

    def close(self) -> None:
        """Abandon every run executing here (on any loop) and stop the runner loop (process shutdown)."""
        for run_id in list(self._entries):
            self.abandon(run_id)
        self.runner.close()
