"""Opening a run: the run-start commit, the stream claim with the opening chunks, the launcher's hand-over.

Every entry point persists before inference (000, "Persist the turn before starting
inference"): the run-start commit, the stream claim with the opening chunks, and only
then is a :class:`~helix_django.runtime.handles.RunHandle` returned, so the stream is
readable when the caller gets it. A run never depends on the request that started it.
:class:`RunStarts` does this for the entry points (:mod:`.sends`, :mod:`.restarts`,
:mod:`.tool_results`) and hands each opened run to its launcher (:mod:`.launchers`).
"""

from __future__ import annotations

import copy
import functools
import logging
from typing import Any

from django.db import IntegrityError

from helix_django import store
from helix_django.budgets import acheck_budgets, check_budgets
from helix_django.conf import helix_settings
from helix_django.errors import (
    AlreadyRunningError,
    FrameworkInternalError,
    RunStartConflictError,
    RunSupersededError,
    ServerDrainingError,
    StreamFenceError,
)
from helix_django.models import ChatSession, Run, RunStatus
from helix_django.protocol import MessageAccumulator
from helix_django.runtime import guards, shutdown
from helix_django.runtime.agent import RunLoop
from helix_django.runtime.agents import get_agent
from helix_django.runtime.entries import aget_run
from helix_django.runtime.handles import Entry, Launch, RunHandle
from helix_django.runtime.launchers.base import BaseLauncher
from helix_django.runtime.local_runs import LocalRuns
from helix_django.runtime.opening import abort_start, claim_in_start, opening_chunks
from helix_django.runtime.runner import start_task
from helix_django.signals import run_started
from helix_django.store.reads import write_alias
from helix_django.streams import get_stream_manager
from helix_django.streams.base import RUN_ENDED
from helix_django.streams.transactions import joined_transactions
from helix_django.streams.writer import StreamWriter

logger = logging.getLogger("helix_django.runtime.executor")


class RunStarts:
    """Opens runs for the entry points: run-start commit, claim, opening chunks, then the launcher."""

    def __init__(self, launcher: BaseLauncher, runs: LocalRuns, owner: str) -> None:
        self.launcher = launcher
        self.runs = runs
        self.owner = owner
        """Lease owner id recorded by this process's run-start commits."""
        self._announcements: set[Any] = set()

    async def launch(self, session: ChatSession, launch: Launch, *, user: Any = None) -> RunHandle:
        """Start ``launch`` from the caller's loop and return its handle once its stream is readable.

        Run-start commit, stream claim with the opening chunks, then the run's task starts
        where runs live and the launcher takes its last step. Raises AlreadyRunningError
        (the session has a live run; nothing stored), the budget and side-effect guards'
        errors (nothing stored), FrameworkInternalError once the commit landed.
        """
        handle = await self.runs.runner.call(self._launch_here(session, launch, user=user))
        return await self._launched(handle, launch, user)

    def commit_in_thread(
        self, session: ChatSession, launch: Launch, *, stream_sequence: int | None
    ) -> store.RunStartResult | None:
        """Do ``launch``'s run-start commit here, on the ORM's thread; None when nothing was committed.

        For a plain send only (a redo's side-effect guard reads on the loop: :meth:`launch`).
        ``stream_sequence``: as :meth:`_prepare`'s. None: the session has a live run, a
        concurrent start won the compare-and-set, or the claim was refused; the caller goes
        :meth:`launch`'s way, which examines the live run. Raises ServerDrainingError and the
        budget errors (nothing stored). Open the result with :meth:`aopen`.
        """
        assert not guards.is_redo(launch.request), "a redo's guard reads on the loop"
        self._prepare(session, launch, stream_sequence=stream_sequence)
        check_budgets(session)  # before the run-start commit: a refusal stores nothing
        try:
            return store.start_run(launch.request)
        except (AlreadyRunningError, RunStartConflictError, StreamFenceError, IntegrityError):
            return None

    async def aopen(
        self,
        session: ChatSession,
        launch: Launch,
        result: store.RunStartResult,
        *,
        user: Any = None,
        shielded: bool = False,
    ) -> RunHandle:
        """Open a run whose run-start commit :meth:`commit_in_thread` made: its claim (unless joined), its task.

        ``shielded``: the caller's task is one no cancel reaches before this returns
        (:meth:`~helix_django.runtime.runner.RunnerLoop.call`). Raises FrameworkInternalError
        (``cause: after_run_start``) when the run cannot open.
        """
        opening = self._open_started(session, launch, result, user=user)
        handle = await self.runs.runner.call(opening, shielded=shielded)
        return await self._launched(handle, launch, user)

    async def _launched(self, handle: RunHandle, launch: Launch, user: Any) -> RunHandle:
        """Once a run opened, on the caller's loop: the launcher's last step (a drain hook, an enqueue)."""
        return await self.launcher.launched(self.runs, handle, launch, user, self.owner)

    async def _launch_here(self, session: ChatSession, launch: Launch, *, user: Any = None) -> RunHandle:
        manager = get_stream_manager()
        head = None
        if not session._state.adding:
            info = await manager.get_info(session.stream_id)
            head = info.head_sequence if info else 0
        self._prepare(session, launch, stream_sequence=head)
        await acheck_budgets(session)  # before the run-start commit: a refusal stores nothing
        if guards.is_redo(launch.request):
            await guards.acheck_no_unknown_side_effects(launch.request, ask_tools=not launch.tools_asked)
        try:
            result = await store.astart_run(launch.request)
        except StreamFenceError:  # the claim failed, so nothing of the start was committed
            raise AlreadyRunningError() from None
        return await self._open_started(session, launch, result, user=user)

    def _prepare(self, session: ChatSession, launch: Launch, *, stream_sequence: int | None) -> None:
        """Fill in what ``launch``'s run-start commit writes besides its input: agent, lease, status, claim.

        ``stream_sequence``: the session stream's head (None for a chat's first send: the
        commit creates the session; a stale stream's head is caught by the claim). No I/O:
        callable on the loop or on the ORM's thread.

        Raises ServerDrainingError (503, retryable) once this process received SIGTERM
        (:mod:`helix_django.runtime.shutdown`): no run starts; the client sends again, to a
        process that stays.
        """
        if shutdown.is_draining():
            raise ServerDrainingError()
        agent = get_agent(session.agent)
        manager = get_stream_manager()
        request = launch.request
        if session._state.adding:
            request.new_session = store.NewSession(session.owner_id, session.anonymous_key, session.agent)
        else:
            request.stream_sequence = stream_sequence or 0
        request.agent, request.provider, request.model = agent.name, agent.provider.name, agent.model
        request.lease_owner, request.lease_seconds = self.owner, helix_settings.LEASE_SECONDS
        if self.launcher.executes_at_once:
            request.status, request.read_context = RunStatus.STREAMING, True
        transactions = joined_transactions(manager, write_alias())
        if transactions is not None:
            # The claim and the opening chunks in the run-start transaction: one hop, one commit.
            request.in_transaction = functools.partial(claim_in_start, transactions, session.stream_id, launch)

    async def _open_started(
        self, session: ChatSession, launch: Launch, result: store.RunStartResult, *, user: Any = None
    ) -> RunHandle:
        """After ``launch``'s run-start commit: claim (unless it joined the commit), open, start its task.

        Call it where runs live (``self.runs.runner.call``). Raises FrameworkInternalError
        (``cause: after_run_start``) when the run cannot open; the run then ends ``failed``.
        """
        agent = get_agent(session.agent)
        manager = get_stream_manager()
        request = launch.request
        owner = request.lease_owner
        joined = manager.transactions if request.in_transaction is not None else None
        session._state.adding = False
        run = result.run
        # A Stop reaches the entry from now on, through this loop (cancels.stop_started_task): also while
        # the claim below is in flight, before the run's task exists.
        entry = self.runs.open(run.id)
        claim = joined.claimed(session.stream_id, result.joined[0]) if joined is not None else None
        try:
            writer = StreamWriter.from_settings(manager, session.stream_id, run.id)
            acc = MessageAccumulator(run.response_message_id, parts=launch.parts, metadata=launch.metadata)
            loop = RunLoop(
                run=run,
                agent=agent,
                writer=writer,
                acc=acc,
                owner=owner,
                user=user,
                approved=launch.approved,
                add_continue_instruction=launch.add_continue_instruction,
                context=result.context,
            )
            entry.loop = loop
            if claim is not None:
                for chunk in result.joined[1]:
                    loop.prepare(chunk)
            else:  # the claim and the opening chunks: one write before the caller's first byte
                chunks = [loop.prepare(chunk) for chunk in opening_chunks(result, launch)]
                claim = await manager.claim_and_append(
                    session.stream_id, run.id, epoch=result.checkpoint.id, chunks=chunks
                )
            claimed, sequences = claim
            writer.last_sequence = sequences[-1]
            if claimed.head_sequence > run.start_sequence:
                # A superseded run wrote between our head read and the claim: our chunks start later.
                run.start_sequence = claimed.head_sequence
                await store.aupdate_run(run.id, start_sequence=run.start_sequence)
        except BaseException as exc:
            ended = await _ended_before_its_claim(run, exc) if claim is None else None
            if ended is not None:
                # Ended elsewhere while its claim was in flight (a Stop served by another process):
                # its stream holds that ending for readers; the run never takes a step here.
                logger.info("run %s was ended (%s) before its stream claim landed", run.id, ended.status)
                entry.claimed.set_result(True)
                self.runs.retire(entry, run.id, ended.status)
                return RunHandle(
                    run.id, session.stream_id, run.response_message_id, run.start_sequence, run_status=ended.status
                )
            self.runs.drop(run.id)
            entry.claimed.set_result(False)
            entry.done.set_result(RunStatus.FAILED)
            await abort_start(run, exc, stream_id=session.stream_id if claim is not None else None)
            if isinstance(exc, Exception) and not isinstance(exc, RunSupersededError):
                # The run-start commit landed: never a retryable answer, a re-send would
                # append the message twice (002, "Wire errors").
                raise FrameworkInternalError(cause="after_run_start") from exc
            raise
        # A Stop that came during the claim (its call on this loop may still be queued): the run's
        # task starts with it and ends cancelled before its first step.
        loop.is_cancel_requested = loop.is_cancel_requested or entry.is_cancel_requested
        announced = copy.copy(run)  # the run task mutates ``run`` on this loop from now on
        self._announce(announced, rewrote_history=result.rewrote_history)
        await self._dispatch(entry, loop)
        entry.claimed.set_result(True)
        return RunHandle(run.id, session.stream_id, run.response_message_id, run.start_sequence, run=announced)

    def _announce(self, run: Run, *, rewrote_history: bool) -> None:
        """Send ``run_started`` in a task of its own (before the run's task: same loop, FIFO).

        Receivers (telemetry, stale-continuation checks) may query the database; the
        caller's first byte does not wait for them. A receiver's error is logged.
        """

        async def send() -> None:
            try:
                await run_started.asend(sender=Run, run=run, rewrote_history=rewrote_history)
            except Exception as exc:
                logger.warning("a run_started receiver failed for run %s: %s", run.id, type(exc).__name__)

        task = start_task(send(), name=f"helix-run-started-{run.id}")
        self._announcements.add(task)
        task.add_done_callback(self._announcements.discard)

    async def _dispatch(self, entry: Entry, loop: RunLoop) -> None:
        """Hand the opened run to what executes it (the launcher), where runs live."""
        await self.launcher.dispatch(self.runs, entry, loop)


async def _ended_before_its_claim(run: Run, exc: BaseException) -> Run | None:
    """Return ``run`` as ended elsewhere when its opening claim was refused for it; else None.

    The stream was closed for the run before its claim landed (``run_ended``), or right
    after it landed, before its opening chunks (``stream_not_active``, where the claim and
    the chunks are two writes): another process ended the run. Reads the run only then.
    """
    if not isinstance(exc, StreamFenceError) or exc.cause not in (RUN_ENDED, "stream_not_active"):
        return None
    fresh = await aget_run(run.session_id, run.id)
    return None if fresh.is_live else fresh
