"""The executor's other entry points: cancel, client-tool results and approvals, wait.

Cancellation is its own terminal (000, "Cancellation has its own recovery rules"): the
run ends ``cancelled`` with ``cancel_requested_at`` and the provider's cancel answer, its
stream ends (never fails), and nothing resumes it on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Iterator
from typing import Any

from django.db import DatabaseError
from django.utils import timezone
from django.utils.translation import gettext_lazy

from helix_django import store
from helix_django.conf import helix_settings
from helix_django.deadlines import within
from helix_django.errors import (
    FrameworkInternalError,
    HelixError,
    InvalidToolResultError,
    MessageTooLargeError,
    RunNotActionableError,
    RunNotFoundError,
    RunSupersededError,
    ValidationError,
    store_error_for,
)
from helix_django.limits import ENDING_RESERVE_BYTES, json_size
from helix_django.models import CancelledBy, ChatSession, Run, RunStatus, ToolExecutionStatus
from helix_django.orm import sync_to_async
from helix_django.recovery.outcomes import acancel_ended
from helix_django.recovery.partial import arebuild_partial
from helix_django.recovery.scan import arecover_run, fence_writer, release_fence
from helix_django.runtime import requests as rq
from helix_django.runtime.agents import get_agent
from helix_django.runtime.handles import Entry, Launch, RunHandle
from helix_django.streams import get_stream_manager

logger = logging.getLogger(__name__)

#: Seconds an entry point waits for a local run task to end after cancelling it.
CANCEL_WAIT_SECONDS = 15.0
NO_RESULT_TEXT = "This tool call has no recorded result"


@contextlib.contextmanager
def typed_errors(name: str, log: logging.Logger = logger) -> Iterator[None]:
    """Let the block raise typed HelixErrors only (STYLE, "Errors"; internals, "Runtime").

    A HelixError passes unchanged; a DatabaseError becomes a HistoryIncompleteError
    (``state_history_incomplete``: ``store_error``, retryable, or ``store_rejected`` for an
    integrity or data error; :func:`~helix_django.errors.store_error_for`), any other
    Exception a FrameworkInternalError; neither keeps the cause's text. A BaseException (a
    cancel) passes unchanged. ``name``: the entry point, in the line logged to ``log``.
    """
    try:
        yield
    except HelixError:
        raise
    except DatabaseError as exc:
        log.warning("executor %s: database failure %s", name, type(exc).__name__)
        raise store_error_for(exc) from exc
    except Exception as exc:
        log.error("executor %s failed: %s", name, type(exc).__name__)
        raise FrameworkInternalError() from exc


def typed(method: Any) -> Any:
    """Make an async entry point raise typed HelixErrors only (:func:`typed_errors`)."""

    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        with typed_errors(method.__name__):
            return await method(*args, **kwargs)

    return wrapper


def _get_run(session_id: str, run_id: str) -> Run:
    run = Run.objects.filter(pk=run_id, session_id=session_id).first()
    if run is None:
        raise RunNotFoundError()
    return run


def _current_run(session_id: str) -> Run | None:
    session = ChatSession.objects.filter(pk=session_id).first()
    return Run.objects.filter(pk=session.current_run_id).first() if session and session.current_run_id else None


aget_run = sync_to_async(_get_run)
acurrent_run = sync_to_async(_current_run)


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


class EntriesMixin:
    """Cancel / submit / regenerate / continue for :class:`~helix_django.runtime.executor.LocalExecutor`."""

    owner: str
    _entries: dict[str, Any]
    _recent: dict[str, Any]

    _launch: Any
    """Provided by LocalExecutor: run-start commit, claim, opening chunks, task."""
    _keyed_duplicate: Any

    # --- local tasks -----------------------------------------------------------------------

    def is_local(self, run_id: str) -> bool:
        """Whether ``run_id`` is executing in this process right now."""
        entry = self._entries.get(run_id)
        return entry is not None and not entry.done.done()

    async def wait(self, run_id: str, timeout: float | None = None) -> str | None:
        """Wait until a run executing here ends or suspends; return its final status (None if not local)."""
        entry = self._entries.get(run_id) or self._recent.get(run_id)
        if entry is None:
            return None
        return await within(asyncio.wrap_future(entry.done), timeout)

    async def _wait_claimed(self, run_id: str) -> None:
        entry = self._entries.get(run_id)
        if entry is not None:
            try:
                await within(asyncio.shield(asyncio.wrap_future(entry.claimed)), CANCEL_WAIT_SECONDS)
            except asyncio.TimeoutError:
                pass  # the caller waits for the stream to go live (002, "The run-start window")

    async def _retire_if_dead(self, run: Run) -> bool:
        """End a live run nobody executes any more as the relaunch scan would; False if it is still executing.

        Dead: its lease expired, or this process owns it but has no task for it. The ending
        is the scan's decision (:func:`~helix_django.recovery.scan.arecover_run`, forced,
        without asking the provider, so a send waits on no network call): ``completed`` when
        the run wrote its ``finish``, ``cancelled`` when a Stop was recorded, else
        ``interrupted`` with its partial output; a client is never told an ending that
        contradicts one it saw (docs/transport.md, "Endings"). True also when a concurrent
        request retired or replaced it first: it no longer holds the session, and the
        caller's compare-and-set start decides who wins.
        """
        if self.is_local(run.id) or run.status == RunStatus.SUSPENDED_CLIENT_TOOL:
            return False
        expired = run.lease_expires_at is None or run.lease_expires_at < timezone.now()
        if not expired and run.lease_owner != self.owner:
            return False
        # Recovery's own decision and ending: the writer fenced, partial output rebuilt from the
        # stream, unknown tool outcomes marked (000, "Recovery on app relaunch").
        decision = await arecover_run(run.id, force=True, query_provider=False)
        if decision.outcome == "skipped":
            logger.info("run %s was retired by a concurrent request (%s)", run.id, decision.reason)
        return True

    # --- cancel ----------------------------------------------------------------------------

    @typed
    async def cancel(self, *, session: ChatSession, run_id: str, by: str = CancelledBy.USER) -> Run:
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
        entry = self._entries.get(run.id)
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
            if not run.is_live or self.is_local(run.id):
                return run
            # Its task ended without ending it (it suspended as the Stop came, or was handed to a worker).
            try:
                await self._cancel_detached(run, answer)
            except RunSupersededError:
                pass  # it ended meanwhile: an ended run is never cancelled
        else:
            await self._cancel_detached(run, answer)
        return await aget_run(session.id, run_id)

    async def _cancel_detached(self, run: Run, answer: str) -> None:
        """Cancel a run no task of this process executes (suspended, or executing elsewhere).

        Its partial output is rebuilt from the stream and kept; its stream ends ``cancelled``,
        also when the run's claim has not landed (the stream is closed for it at its epoch:
        :func:`~helix_django.recovery.outcomes.aclose_stream`). The process executing it (if
        any) stops at its next fenced write; one still claiming the stream is refused the claim.

        The writer of a run executing elsewhere is fenced first (its stream paused as the run,
        as the relaunch scan does: :func:`~helix_django.recovery.scan.fence_writer`), so the
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

    # --- client tools and approvals --------------------------------------------------------

    @typed
    async def submit_tool_results(
        self, *, session: ChatSession, run_id: str, results: list[dict[str, Any]], user: Any = None
    ) -> RunHandle | None:
        """Store browser results / approval answers of a suspended run; continue it once the batch is complete.

        ``results``: ``[{"toolCallId", "output"} | {"toolCallId", "errorText"} | {"toolCallId", "approved"}]``.
        Returns None while calls of the batch are still unanswered. Raises
        RunSupersededError (late submit), InvalidToolResultError, RunNotActionableError.
        """
        run = await aget_run(session.id, run_id)
        if run.status == RunStatus.SUPERSEDED:
            raise RunSupersededError()
        if run.status != RunStatus.SUSPENDED_CLIENT_TOOL:
            raise RunNotActionableError(cause="run_not_suspended")
        known = {e.tool_call_id: e for e in await store.alist_tool_executions(run_id=run.id)}
        answers = [_answer(result) for result in (results if isinstance(results, list) else [None])]
        await _check_room_for_answers(session, run, answers)
        for call_id, status, value, code in answers:  # all validated before any is stored
            execution = known.get(call_id)
            if execution is not None and execution.status == status:
                continue  # a repeated submit of the same answer
            await store.aanswer_tool_execution(run.id, call_id, status=status, result=value, error_code=code)
        if await rq.apending_tool_executions(run.id):
            return None
        return await self._continue_after_tools(session, run, user)

    async def _continue_after_tools(self, session: ChatSession, run: Run, user: Any) -> RunHandle:
        row = await rq.aload_response_row(session.id, run.start_message_count, run.response_message_id)
        if row is None:
            raise RunNotActionableError(cause="response_message_missing")
        agent = get_agent(session.agent)
        waiting = {
            p["toolCallId"]
            for p in row["parts"]
            if p.get("state") in ("input-available", "approval-requested") and "toolCallId" in p
        }
        chunks: list[dict[str, Any]] = []
        approved = []
        for execution in await store.alist_tool_executions(run_id=run.id):
            call_id = execution.tool_call_id
            if call_id not in waiting:
                continue
            if execution.status == ToolExecutionStatus.SUCCEEDED:
                chunks.append({"type": "tool-output-available", "toolCallId": call_id, "output": execution.result})
            elif execution.status == ToolExecutionStatus.FAILED:
                text = str((execution.result or {}).get("errorText") or "The tool failed")
                chunks.append({"type": "tool-output-error", "toolCallId": call_id, "errorText": text})
            elif execution.status == ToolExecutionStatus.DENIED:
                chunks.append({"type": "tool-output-denied", "toolCallId": call_id})
            elif execution.status == ToolExecutionStatus.APPROVED and execution.name in agent.tools:
                approved.append((agent.tools[execution.name], execution.arguments, call_id))
        request = store.RunStartRequest(
            session_id=session.id,
            kind="tool_result",
            input_messages=[row],
            turn_message_id=run.turn_message_id,
            attempt=run.attempt,
            expected_current_run_id=run.id,
            supersede_live=True,
        )
        launch = Launch(request, lambda _r: chunks, parts=row["parts"], metadata=row["metadata"], approved=approved)
        return await self._launch(session, launch, user=user)

    async def _tool_result_from_message(self, session: ChatSession, message: dict[str, Any], user: Any) -> RunHandle:
        run = await acurrent_run(session.id)
        if run is None or run.response_message_id != message["id"]:
            if await rq.ais_superseded_response(session.id, message["id"]):
                raise RunSupersededError()  # a late browser result (002, "Superseded runs")
            raise ValidationError(gettext_lazy("No pending tool calls for this message"), cause="no_pending_tools")
        if run.status == RunStatus.SUSPENDED_CLIENT_TOOL:
            # The message also carries the settled calls of earlier steps (and earlier runs of
            # this message): only the answers to calls this run waits for are submitted.
            pending = {e.tool_call_id for e in await rq.apending_tool_executions(run.id)}
            answers = [a for a in rq.tool_answers(message) if a["toolCallId"] in pending]
            handle = await self.submit_tool_results(session=session, run_id=run.id, results=answers, user=user)
            if handle is not None:
                return handle
            info = await get_stream_manager().get_info(session.stream_id)
            head = info.head_sequence if info else run.start_sequence
            return RunHandle(
                run.id, session.stream_id, run.response_message_id, head, run_status=run.status, is_pending_batch=True
            )
        if run.is_live:
            return RunHandle(run.id, session.stream_id, run.response_message_id, run.start_sequence, True, run.status)
        raise RunNotActionableError(cause="run_not_suspended")


async def _check_room_for_answers(session: ChatSession, run: Run, answers: list[tuple[str, str, Any, str]]) -> None:
    """Refuse answers whose outputs would grow the response message past ``MAX_MESSAGE_BYTES``, before any is stored.

    Raises MessageTooLargeError (413, ``cause: "tool_result"``, ``limitBytes``, ``sizeBytes``:
    the message with every output added, an upper bound).
    """
    row = await rq.aload_response_row(session.id, run.start_message_count, run.response_message_id)
    size = json_size(row) if row is not None else 0
    size += sum(json_size(value) for _call_id, _status, value, _code in answers)
    limit = helix_settings.MAX_MESSAGE_BYTES
    if size > limit - ENDING_RESERVE_BYTES:
        raise MessageTooLargeError(
            gettext_lazy("Tool results too large"), cause="tool_result", limitBytes=limit, sizeBytes=size
        )


def _answer(result: Any) -> tuple[str, str, Any, str]:
    """Validate one submitted answer; return (tool call id, status, stored result, error code)."""
    if not isinstance(result, dict) or not isinstance(result.get("toolCallId"), str):
        raise InvalidToolResultError()
    if "approved" in result:
        if not isinstance(result["approved"], bool):
            raise InvalidToolResultError()
        status = ToolExecutionStatus.APPROVED if result["approved"] else ToolExecutionStatus.DENIED
        return result["toolCallId"], status, None, ""
    if "errorText" in result:
        error = {"errorText": str(result["errorText"])[:500]}
        return result["toolCallId"], ToolExecutionStatus.FAILED, error, "client_error"
    if "output" in result:
        return result["toolCallId"], ToolExecutionStatus.SUCCEEDED, result["output"], ""
    raise InvalidToolResultError()
