"""The executor: starts runs (send, tool result, regenerate, continue), cancels them.

``get_executor()`` returns the configured executor (``HELIX["EXECUTOR"]``); the embedded
default :class:`LocalExecutor` runs each run as an asyncio task in the process that
accepted it, holding a renewable lease on the Run. Its entry points come from mixins:
:mod:`.sends` (``execute``), :mod:`.entries` (cancel, tool results, ``wait``) and
:mod:`.restarts` (regenerate, continue); this module opens a run once its run-start
request is built (:meth:`LocalExecutor.prepare_start`, :meth:`LocalExecutor.open_started`).

Every entry point persists before inference (000, "Persist the turn before starting
inference"): the run-start commit, the stream claim with the opening chunks, and only
then is a :class:`RunHandle` returned, so the stream is readable when the caller gets
it. A run never depends on the request that started it. Entry points raise typed
HelixErrors only.

Run tasks execute on a loop that lasts as long as the process (:mod:`.runner`): the ASGI
server's, or the executor's own loop thread for other callers, so sync callers (admin
views, management commands) may call entry points with ``async_to_sync``: the run goes
on after their short-lived loop ends. A management command that exits right
away should ``await executor.wait(run_id)`` first (the process would take the run with it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import functools
import logging
from typing import Any

from django.utils.module_loading import import_string

from helix_django import store
from helix_django.conf import helix_settings
from helix_django.errors import (
    AlreadyRunningError,
    FrameworkInternalError,
    RunNotActionableError,
    RunNotFoundError,
    RunSupersededError,
    ServerDrainingError,
    StreamFenceError,
)
from helix_django.models import ChatSession, Run, RunStatus
from helix_django.processes import lease_owner_id
from helix_django.protocol import MessageAccumulator
from helix_django.runtime import guards, shutdown
from helix_django.runtime.agent import RunLoop
from helix_django.runtime.agents import get_agent
from helix_django.runtime.entries import aget_run
from helix_django.runtime.handles import Entry, Launch, RunHandle
from helix_django.runtime.opening import abort_start, claim_in_start, opening_chunks
from helix_django.runtime.restarts import RestartsMixin
from helix_django.runtime.runner import RunnerLoop, start_task
from helix_django.runtime.sends import SendsMixin
from helix_django.signals import run_started
from helix_django.store.reads import write_alias
from helix_django.streams import get_stream_manager
from helix_django.streams.base import RUN_ENDED
from helix_django.streams.transactions import joined_transactions
from helix_django.streams.writer import StreamWriter

logger = logging.getLogger(__name__)

#: How many ended runs an executor remembers for :meth:`LocalExecutor.wait`.
RECENT_RUNS = 256


class LocalExecutor(SendsMixin, RestartsMixin):
    """Runs runs as asyncio tasks in this process (the embedded default executor)."""

    supports_request_key = True
    """Keyed sends are honoured (002, "Where it is honoured")."""

    lease_owner_kind = ""
    """The kind of this executor's lease owner id: its runs execute in this process."""

    executes_at_once = True
    """The run's task starts here with its commit, which writes it ``streaming`` and reads its conversation."""

    def __init__(self) -> None:
        self.owner = lease_owner_id(self.lease_owner_kind)
        """Lease owner id of this executor's runs (:mod:`helix_django.processes`)."""
        self._entries: dict[str, Entry] = {}
        self._recent: dict[str, Entry] = {}
        """Runs that ended here lately (oldest first), so :meth:`wait` can still report them."""
        self._announcements: set[asyncio.Task[None]] = set()
        self.runner = RunnerLoop(f"helix-runs-{self.owner}")
        """The executor's own loop thread: where run tasks execute unless started on the server's loop."""

    def abandon(self, run_id: str) -> bool:
        """Stop executing a run here *without* ending it, as a dying process would; True if it was running.

        The run stays live with its lease until the lease expires; then the relaunch scan
        (or a user's Continue/Regenerate) takes it over. For process shutdown and tests.
        """
        entry = self._entries.get(run_id)
        if entry is None or entry.task is None or entry.done.done():
            return False
        assert entry.event_loop is not None  # _start_task sets event_loop together with task
        if entry.event_loop.is_closed():
            return False
        entry.event_loop.call_soon_threadsafe(entry.task.cancel)
        return True

    def close(self) -> None:
        """Abandon every run executing here (on any loop) and stop the runner loop (process shutdown)."""
        for run_id in list(self._entries):
            self.abandon(run_id)
        self.runner.close()

    # --- starting a run --------------------------------------------------------------------

    def local_runs(self) -> dict[str, concurrent.futures.Future[str]]:
        """Return ``{run_id: future of its ending status}`` of the runs executing in this process now."""
        return {run_id: entry.done for run_id, entry in list(self._entries.items()) if not entry.done.done()}

    async def _launch(self, session: ChatSession, launch: Launch, *, user: Any = None) -> RunHandle:
        """Run-start commit, stream claim with the opening chunks; then the run task starts (where runs live)."""
        handle = await self.runner.call(self._launch_here(session, launch, user=user))
        return await self._launched(handle, launch, user)

    async def _launched(self, handle: RunHandle, launch: Launch, user: Any) -> RunHandle:
        """Once a run opened (its task started or handed to :meth:`_dispatch`): here, make sure this
        process drains its runs on SIGTERM (:mod:`helix_django.runtime.shutdown`)."""
        shutdown.install(self)
        return handle

    async def _launch_here(self, session: ChatSession, launch: Launch, *, user: Any = None) -> RunHandle:
        manager = get_stream_manager()
        head = None
        if not session._state.adding:
            info = await manager.get_info(session.stream_id)
            head = info.head_sequence if info else 0
        self.prepare_start(session, launch, stream_sequence=head)
        if guards.is_redo(launch.request):
            await guards.acheck_no_unknown_side_effects(launch.request)
        try:
            result = await store.astart_run(launch.request)
        except StreamFenceError:  # the claim failed, so nothing of the start was committed
            raise AlreadyRunningError() from None
        return await self.open_started(session, launch, result, user=user)

    def prepare_start(self, session: ChatSession, launch: Launch, *, stream_sequence: int | None) -> None:
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
        request.lease_owner, request.lease_seconds = self._new_lease_owner(), helix_settings.LEASE_SECONDS
        if self.executes_at_once:
            request.status, request.read_context = RunStatus.STREAMING, True
        transactions = joined_transactions(manager, write_alias())
        if transactions is not None:
            # The claim and the opening chunks in the run-start transaction: one hop, one commit.
            request.in_transaction = functools.partial(claim_in_start, transactions, session.stream_id, launch)

    async def open_started(
        self, session: ChatSession, launch: Launch, result: store.RunStartResult, *, user: Any = None
    ) -> RunHandle:
        """After ``launch``'s run-start commit: claim (unless it joined the commit), open, start its task.

        Call it where runs live (``self.runner.call``). Raises FrameworkInternalError
        (``cause: after_run_start``) when the run cannot open; the run then ends ``failed``.
        """
        agent = get_agent(session.agent)
        manager = get_stream_manager()
        request = launch.request
        owner = request.lease_owner
        joined = manager.transactions if request.in_transaction is not None else None
        session._state.adding = False
        run = result.run
        # A Stop reaches the entry from now on, through this loop (entries.stop_started_task): also while
        # the claim below is in flight, before the run's task exists.
        entry = self._entries[run.id] = Entry(event_loop=asyncio.get_running_loop())
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
                self._retire(entry, run.id, ended.status)
                return RunHandle(
                    run.id, session.stream_id, run.response_message_id, run.start_sequence, run_status=ended.status
                )
            self._entries.pop(run.id, None)
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

    def _new_lease_owner(self) -> str:
        """Return the lease owner recorded by a run-start commit (this process)."""
        return self.owner

    async def _dispatch(self, entry: Entry, loop: RunLoop) -> None:
        """Hand the opened run to whatever executes it: here, a task on the loop where runs live."""
        self._start_task(entry, loop)

    def _start_task(self, entry: Entry, loop: RunLoop) -> None:
        async def drive() -> None:
            entry.started = True
            status = "abandoned"
            try:
                status = await loop.run_forever()
            except asyncio.CancelledError:
                logger.info("run %s task stopped without ending the run (process going away)", loop.run_id)
            finally:
                self._retire(entry, loop.run_id, status)

        task = start_task(drive(), name=f"helix-run-{loop.run_id}")
        # A task cancelled before its first step (abandon() at once) never runs drive: retired here.
        task.add_done_callback(lambda _task: self._retire(entry, loop.run_id, "abandoned"))
        entry.loop, entry.task, entry.event_loop = loop, task, asyncio.get_running_loop()
        loop.task = task

    def _retire(self, entry: Entry, run_id: str, status: str) -> None:
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


_executors: dict[str, Any] = {}


def get_executor() -> Any:
    """Return the configured executor (``HELIX["EXECUTOR"]``), one instance per import path."""
    path = helix_settings.EXECUTOR
    executor = _executors.get(path)
    if executor is None:
        executor = _executors[path] = import_string(path)()
    return executor


__all__ = ["LocalExecutor", "RunHandle", "RunNotActionableError", "RunNotFoundError", "get_executor"]
