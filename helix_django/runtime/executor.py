"""The executor: the run service behind every surface (chat route, socket, API, admin, commands).

``get_executor()`` returns the configured :class:`Executor`: the entry points by verb
(:mod:`.sends`, :mod:`.restarts`, :mod:`.cancels`, :mod:`.tool_results`) over one
:class:`~helix_django.runtime.starts.RunStarts` (run-start commit, stream claim, opening
chunks) and one launcher (``HELIX["LAUNCHER"]``, :mod:`.launchers`: where a run executes).
Entry points raise typed HelixErrors only.

Run tasks execute on a loop that lasts as long as the process (:mod:`.runner`): the ASGI
server's, or the executor's own loop thread for other callers, so sync callers (admin
views, management commands) may call entry points with ``async_to_sync``: the run goes
on after their short-lived loop ends. A management command that exits right
away should ``await executor.wait(run_id)`` first (the process would take the run with it).
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

from helix_django.conf import helix_settings
from helix_django.errors import RunNotActionableError, RunNotFoundError
from helix_django.models import CancelledBy, ChatSession, Run
from helix_django.processes import lease_owner_id
from helix_django.runtime import cancels, guards, queue_starts, restarts, sends, tool_results
from helix_django.runtime.enqueue import QueuedSend
from helix_django.runtime.handles import RunHandle
from helix_django.runtime.launchers import load_launcher
from helix_django.runtime.launchers.base import BaseLauncher
from helix_django.runtime.launchers.local import LocalLauncher
from helix_django.runtime.local_runs import LocalRuns
from helix_django.runtime.reattach import areattach
from helix_django.runtime.sends import StartedSend
from helix_django.runtime.starts import RunStarts


class Executor:
    """Starts, cancels and continues runs; where they execute is its ``launcher``'s."""

    def __init__(self, launcher: BaseLauncher | None = None) -> None:
        self.launcher = launcher if launcher is not None else load_launcher()
        """Where runs execute (:class:`~helix_django.runtime.launchers.base.BaseLauncher`)."""
        self.owner = lease_owner_id(self.launcher.lease_owner_kind)
        """Lease owner id of the runs this executor starts (:mod:`helix_django.processes`)."""
        self.runs = LocalRuns(f"helix-runs-{self.owner}")
        """The runs executing (or opening) in this process."""
        self.runner = self.runs.runner
        self.starts = RunStarts(self.launcher, self.runs, self.owner)

    @property
    def supports_request_key(self) -> bool:
        """Whether keyed sends are honoured (the launcher's flag)."""
        return self.launcher.supports_request_key

    async def execute(
        self,
        session: ChatSession,
        messages: list[dict[str, Any]],
        *,
        request_key: str | None = None,
        trigger: str = "submit-message",
        message_id: str | None = None,
        user: Any = None,
        multitask: str | None = None,
    ) -> RunHandle | QueuedSend:
        """Start the run a chat request asks for, or queue its message (:func:`.sends.execute`: what it raises)."""
        return await sends.execute(
            self.starts,
            session,
            messages,
            request_key=request_key,
            trigger=trigger,
            message_id=message_id,
            user=user,
            multitask=multitask,
        )

    def start_send_in_thread(
        self,
        session: ChatSession,
        messages: list[dict[str, Any]],
        *,
        request_key: str | None = None,
        stream_sequence: int | None = None,
    ) -> StartedSend | None:
        """A plain send's run-start commit on the ORM's thread (:func:`.sends.start_send_in_thread`)."""
        return sends.start_send_in_thread(
            self.starts, session, messages, request_key=request_key, stream_sequence=stream_sequence
        )

    async def aopen_send(self, started: StartedSend, *, user: Any = None, shielded: bool = False) -> RunHandle:
        """Open a send started on the ORM's thread (:func:`.sends.aopen_send`)."""
        return await sends.aopen_send(self.starts, started, user=user, shielded=shielded)

    async def regenerate(
        self, *, session: ChatSession, request_key: str | None = None, user: Any = None, supersede_live: bool = False
    ) -> RunHandle:
        """Run the session's latest turn again as a new attempt (:func:`.restarts.regenerate`)."""
        return await restarts.regenerate(
            self.starts, session=session, request_key=request_key, user=user, supersede_live=supersede_live
        )

    async def continue_run(self, *, session: ChatSession, run_id: str, user: Any = None) -> RunHandle:
        """Continue an interrupted run's partial answer in a new run (:func:`.restarts.continue_run`)."""
        return await restarts.continue_run(self.starts, session=session, run_id=run_id, user=user)

    async def cancel(self, *, session: ChatSession, run_id: str, by: str = CancelledBy.USER) -> Run:
        """Cancel a live run (:func:`.cancels.cancel`)."""
        return await cancels.cancel(self.runs, session=session, run_id=run_id, by=by)

    async def submit_tool_results(
        self, *, session: ChatSession, run_id: str, results: list[dict[str, Any]], user: Any = None
    ) -> RunHandle | None:
        """Store client-tool results / approval answers (:func:`.tool_results.submit_tool_results`)."""
        return await tool_results.submit_tool_results(
            self.starts, session=session, run_id=run_id, results=results, user=user
        )

    async def reattach(self, run_id: str) -> bool:
        """Go on here with a ``recovering`` run whose durable operation outlived its process (:mod:`.reattach`).

        True once the run executes here as the same run; False when it cannot (a launcher
        that executes runs elsewhere, a provider without ``stream_from`` or ``retrieve``, an
        attempt past its stream): the caller keeps following it. Raises StreamConnectionError.
        """
        if not isinstance(self.launcher, LocalLauncher):
            return False
        return await self.runner.call(areattach(self.runs, self.owner, run_id))

    async def reconcile_tools(self, run_id: str) -> int:
        """Ask the tools of the run's unknown side effects to settle them (:func:`.guards.areconcile_run`)."""
        return await guards.areconcile_run(run_id)

    async def start_queued(self) -> int:
        """Start the queued messages of sessions without a live run (:func:`.queue_starts.astart_waiting`)."""
        return await queue_starts.astart_waiting(self)

    async def wait(self, run_id: str, timeout: float | None = None) -> str | None:
        """Wait until a run executing here ends or suspends; return its final status (None if not local)."""
        return await self.runs.wait(run_id, timeout)

    def is_local(self, run_id: str) -> bool:
        """Whether ``run_id`` is executing in this process right now."""
        return self.runs.is_local(run_id)

    def local_runs(self) -> dict[str, concurrent.futures.Future[str]]:
        """Return ``{run_id: future of its ending status}`` of the runs executing in this process now."""
        return self.runs.local_runs()

    def abandon(self, run_id: str) -> bool:
        """Stop executing a run here without ending it (:meth:`.local_runs.LocalRuns.abandon`)."""
        return self.runs.abandon(run_id)

    def close(self) -> None:
        """Abandon every run executing here and stop the runner loop (process shutdown)."""
        self.runs.close()


class LocalExecutor(Executor):
    """An executor over the local launcher whatever the settings say (the embedded default's name)."""

    def __init__(self, launcher: BaseLauncher | None = None) -> None:
        super().__init__(launcher if launcher is not None else LocalLauncher())


_executors: dict[str, Executor] = {}


def get_executor() -> Executor:
    """Return the configured executor, one instance per launcher configuration (``HELIX["LAUNCHER"]``).

    The deprecated ``HELIX["EXECUTOR"]`` warns once, when its executor is built. Raises
    ImproperlyConfigured for a launcher that cannot be loaded.
    """
    user = helix_settings.user_settings
    key = repr((user.get("LAUNCHER"), user.get("EXECUTOR")))
    executor = _executors.get(key)
    if executor is None:
        executor = _executors[key] = Executor(load_launcher())
    return executor


__all__ = ["Executor", "LocalExecutor", "RunHandle", "RunNotActionableError", "RunNotFoundError", "get_executor"]
