"""Cancel: a run ends ``cancelled``, its partial answer kept, its stream ended (never failed).

Cancellation is its own terminal (000, "Cancellation has its own recovery rules"): the
run ends ``cancelled`` with ``cancel_requested_at`` and the provider's cancel answer, its
stream ends (never fails), and nothing resumes it on its own.
"""

from __future__ import annotations

import asyncio
import logging

from django.utils import timezone

from helix_django import store
from helix_django.deadlines import within
from helix_django.errors import RunNotActionableError, RunSupersededError
from helix_django.models import CancelledBy, ChatSession, Run, RunStatus
from helix_django.recovery.fences import fence_writer, release_fence
from helix_django.recovery.outcomes import acancel_ended
from helix_django.recovery.partial import arebuild_partial
from helix_django.runtime.agents import get_agent
from helix_django.runtime.entries import aget_run, typed
from helix_django.runtime.handles import Entry
from helix_django.runtime.local_runs import CANCEL_WAIT_SECONDS, LocalRuns

logger = logging.getLogger("helix_django.runtime.executor")


def stop_started_task(entry: Entry) -> None:
    """On the run's loop: mark the run cancel-requested and cancel its task once it started.

    A task yet to start (or not created yet: the stream claim in flight) sees
    ``is_cancel_requested`` at the start of its run
    (:meth:`~helix_django.runtime.agent.RunLoop.run_forever`), where it ends ``cancelled``
    before its first step (a cancel before a task's first step would end it without
    running any of it).
    """
    entry.is_cancel_requested = True
    if entry.loop is not None:
        entry.loop.is_cancel_requested = True
    if entry.started and entry.task is not None:
        entry.task.cancel()


def expect_stop(entry: Entry) -> None:
    """On the run's loop: tell the run's task a Stop is coming, so a model call failing meanwhile waits for it.

    The Stop cancels the provider's operation first, which may end the run's model stream
    (an operation ``cancelled``) before :func:`stop_started_task` reaches the task; the
    run then ends ``cancelled`` (the Stop's terminal), not ``interrupted``.
    """
    if entry.loop is not None:
        entry.loop.is_cancel_coming = True


@typed
async def cancel(runs: LocalRuns, *, session: ChatSession, run_id: str, by: str = CancelledBy.USER) -> Run:
    """Cancel a live run: status ``cancelled``, with who asked (``cancelled_by``) and the provider's answer.

    ``by`` is who asked (:class:`~helix_django.models.CancelledBy`: ``user`` for the
    owner's routes, ``staff`` for the admin); the snapshot and the partial message's
    ``helix`` metadata tell it. The partial answer is kept, marked partial;
    the stream ends with ``cancelled`` (not failed). A run opening in this process (its
    stream claim in flight) is ended by its own task as soon as the claim returns, before
    its first step; a run whose task here ended without ending it (it suspended as the
    Stop came, or went to a worker) is then cancelled detached. Idempotent for a cancelled run.
    Raises RunNotFoundError, and RunNotActionableError (``run_not_live``) for a run
    that ended otherwise: an ended run is never cancelled.
    """
    run = await aget_run(session.id, run_id)
    if run.status == RunStatus.CANCELLED:
        return run
    if not run.is_live:
        raise RunNotActionableError(cause="run_not_live")
    provider = get_agent(run.agent).provider
    answer = ""
    entry = runs.get(run.id)
    if entry is not None and entry.event_loop is not None and not entry.done.done():
        # The provider's cancel may end the run's model stream before the Stop reaches its task.
        entry.event_loop.call_soon_threadsafe(expect_stop, entry)
    if run.provider_operation_id and provider.supports_cancel:
        try:
            answer = (await provider.cancel(run.provider_operation_id))[:64]
        except Exception:  # the outcome is uncertain; recorded as such
            answer = "failed"
    try:
        await store.aupdate_run(
            run.id, cancel_requested_at=timezone.now(), provider_cancel_result=answer, cancelled_by=by
        )
    except RunSupersededError:
        return await aget_run(session.id, run_id)
    entry = runs.get(run.id)
    if entry is not None and entry.event_loop is not None and not entry.done.done():
        # Executing here, or opening here (its stream claim in flight): the run's own task ends it.
        entry.is_cancel_requested = True
        entry.event_loop.call_soon_threadsafe(stop_started_task, entry)
        try:
            await within(asyncio.shield(asyncio.wrap_future(entry.done)), CANCEL_WAIT_SECONDS)
        except asyncio.TimeoutError:
            logger.warning("run %s: cancel requested, task still ending", run.id)
            return await aget_run(session.id, run_id)
        run = await aget_run(session.id, run_id)
        if not run.is_live or runs.is_local(run.id):
            return run
        # Its task ended without ending it (it suspended as the Stop came, or was handed to a worker).
        try:
            await _cancel_detached(run, answer)
        except RunSupersededError:
            pass  # it ended meanwhile: an ended run is never cancelled
    else:
        await _cancel_detached(run, answer)
    return await aget_run(session.id, run_id)


async def _cancel_detached(run: Run, answer: str) -> None:
    """Cancel a run no task of this process executes (suspended, or executing elsewhere).

    Its partial output is rebuilt from the stream and kept; its stream ends ``cancelled``,
    also when the run's claim has not landed (the stream is closed for it at its epoch:
    :func:`~helix_django.recovery.outcomes.aclose_stream`). The process executing it (if
    any) stops at its next fenced write; one still claiming the stream is refused the claim.

    The writer of a run executing elsewhere is fenced first (its stream paused as the run,
    as the relaunch scan does: :func:`~helix_django.recovery.fences.fence_writer`), so the
    partial kept is exactly what the stream holds, the text every client was shown; a
    delta written after the read would reach the clients and not the kept message. Live
    readers meet the pause as a retryable drop (``cause: run_recovering``) and resume into
    the cancelled ending.
    """
    await store.amark_started_tool_executions_unknown(run.id)
    partial, is_fenced = None, False
    if run.status != RunStatus.SUSPENDED_CLIENT_TOOL:
        is_fenced = await fence_writer(run)
        partial = await arebuild_partial(run)  # after the fence: nothing more lands before the end
    fresh = await aget_run(run.session_id, run.id)
    try:
        await acancel_ended(fresh, partial, provider_cancel_result=answer)
    except RunSupersededError:
        if is_fenced:  # it ended meanwhile, its own ending fenced by our pause: close the stream with it
            await release_fence(run.id)
        raise
