"""How a run ends: completed, suspended, failed, interrupted or cancelled (fenced writes only).

Every ending stores the writer's chunks before its commit (the commit's ``stream_sequence``
is the last one's sequence), then writes ``helix-run-end`` and ends, pauses or fails the
stream; a completion does it in one thread hop (:mod:`.completion`). A partial answer is
committed marked partial, with the same ``helix`` message metadata the client received
in a ``message-metadata`` chunk, never as a finished answer (000, "Store partial output
explicitly"). Cancel is distinct from failure: the stream *ends* with ``cancelled``; a
failure *fails* it with the typed, scrubbed error.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from helix_django import store
from helix_django.deadlines import outlasts_cancel
from helix_django.errors import (
    FrameworkInternalError,
    HelixError,
    ProviderError,
    RunInterruptedError,
    StreamFenceError,
)
from helix_django.models import Run, RunStatus
from helix_django.pricing import run_cost
from helix_django.recovery.provider import aended_operation_usage
from helix_django.runtime.completion import (
    Completion,
    acommit_completion,
    acomplete_in_transaction,
    outlasting_cancel,
)
from helix_django.signals import run_finished
from helix_django.store.reads import write_alias
from helix_django.store.run_ends import helix_metadata
from helix_django.streams.transactions import TransactionalWrites, joined_transactions
from helix_django.usage import chars_of

FENCER_WAIT_SECONDS = 2.0
"""How long a fenced run's task waits for the fencing process to commit the run's ending."""

logger = logging.getLogger(__name__)


class EndingsMixin:
    """Endings of :class:`~helix_django.runtime.agent.RunLoop` (uses its writer, accumulator and state)."""

    run_id: str
    run: Any
    acc: Any
    writer: Any
    manager: Any
    step: int
    stage: str
    is_ending: bool
    meter: Any
    streaming: Any
    emit: Any
    prepare: Any
    flush: Any
    step_committed: Any

    def _helix_metadata(self, status: str, cancelled_by: str = "") -> dict[str, Any]:
        return {"helix": helix_metadata(self.run_id, status, cancelled_by=cancelled_by)}

    async def _complete(self, reason: str, *, step_done: bool = False) -> str:
        """Complete the run, committing its last step too when ``step_done``: one thread hop (:mod:`.completion`)."""
        step_message = self.acc.snapshot() if step_done else None
        step_committed = self.prepare(self.step_committed(None)) if step_done else None
        self.is_ending = True
        # ..., finish-step (unless stored already), finish: never a flush of its own
        chunks = await self.writer.take(self.prepare(self._finish_chunk(reason)))
        completion = Completion(
            chunks=chunks,
            message=self.acc.snapshot(),
            end=self.prepare({"type": "helix-run-end", "status": "completed"}),
            stored_sequence=self.writer.last_sequence,
            step_message=step_message,
            step_number=self.step,
            step_committed=step_committed,
            usage=self.meter.record(chars_of(self.acc.parts)),
        )
        stream_id = self.writer.stream_id
        transactions = joined_transactions(self.manager, write_alias())
        if transactions is not None:
            writes = self._complete_in_transaction(transactions, stream_id, completion)
        else:
            writes = self._complete_in_steps(stream_id, completion)
        try:
            checkpoint = await outlasting_cancel(writes)
        except BaseException:
            if not completion.is_stored:  # the ending that follows stores them (not finish)
                self.writer.restore(chunks[:-1])
            raise
        assert checkpoint.run is not None  # commit_terminal's checkpoint carries the Run it ended
        # Ended: a cancel landing in run_finished's receivers must not turn it into a cancelled ending.
        return await outlasts_cancel(self._finished(checkpoint.run, RunStatus.COMPLETED))

    async def _complete_in_transaction(
        self, transactions: TransactionalWrites, stream_id: str, completion: Completion
    ) -> Any:
        """The database stream manager: one transaction, then readers are told; return the terminal checkpoint."""
        checkpoint, writes = await acomplete_in_transaction(transactions, stream_id, self.run_id, completion)
        completion.is_stored = True
        self.writer.last_sequence = writes[1].sequences[-1]
        transactions.wrote(stream_id, writes)
        return checkpoint

    async def _complete_in_steps(self, stream_id: str, completion: Completion) -> Any:
        """Other stream managers: the chunks, one commit hop, the closing chunks, the end; return the checkpoint."""
        sequences = await self.manager.append(stream_id, self.run_id, completion.chunks)
        completion.is_stored = True
        self.writer.last_sequence = sequences[-1]
        checkpoint = await acommit_completion(completion, self.run_id, sequences)
        for chunk in completion.closing():
            self.writer.write(chunk)
        await self.flush()
        await self.manager.end_stream(stream_id, self.run_id, end_status="completed")
        return checkpoint

    def _finish_chunk(self, reason: str) -> dict[str, Any]:
        metadata = self._helix_metadata("completed")
        if self.meter.reported:  # the reported token counts, summed
            metadata["usage"] = dict(self.meter.reported)
        cost = run_cost(self.run.model, self.meter.record(chars_of(self.acc.parts)))  # as Run.usage will hold
        if cost is not None:
            metadata["cost"] = cost.as_json()
        return {"type": "finish", "finishReason": reason, "messageMetadata": metadata}

    async def _suspend(self) -> str:
        self.is_ending = True
        await store.aupdate_run(self.run_id, status=RunStatus.SUSPENDED_CLIENT_TOOL)
        self.emit({"type": "helix-run-end", "status": "suspended"})
        await self.flush()
        await self.manager.pause_stream(self.writer.stream_id, self.run_id)
        return RunStatus.SUSPENDED_CLIENT_TOOL

    def _close_open_parts(self) -> None:
        for kind, part_id in self.acc.open_parts():
            self.emit({"type": f"{kind}-end", "id": part_id}, content=True)

    async def _end_partial(self, status: str, error: HelixError | None, cancelled_by: str = "") -> Run:
        """Close open parts, mark the message partial, commit it terminal; return the Run as committed."""
        self.is_ending = True
        self._close_open_parts()
        if self.acc.parts:
            self.emit({"type": "message-metadata", "messageMetadata": self._helix_metadata(status, cancelled_by)})
        sequence = await self.flush()
        checkpoint = await store.acommit_terminal(
            self.run_id,
            status,
            response_message=self.acc.snapshot(),
            stream_sequence=sequence,
            step_count=self.step,
            error=error,
            stage=self.stage,
            usage=self.meter.record(chars_of(self.acc.parts)),
        )
        self.emit({"type": "helix-run-end", "status": status})
        await self.flush()
        assert checkpoint.run is not None  # commit_terminal's checkpoint carries the Run it ended
        return checkpoint.run

    async def _end_failed(self, exc: BaseException) -> str:
        error: HelixError
        if isinstance(exc, ProviderError) and exc.cause == "stream_dropped":
            status, error = RunStatus.INTERRUPTED, RunInterruptedError(cause="stream_dropped")
        else:
            status = RunStatus.FAILED
            error = exc if isinstance(exc, HelixError) else FrameworkInternalError()
            if not isinstance(exc, HelixError):
                logger.error("run %s failed unexpectedly: %s", self.run_id, type(exc).__name__)
        logger.info("run %s ended %s (%s) at stage %s", self.run_id, status, error.code, self.stage)
        run = await self._end_partial(status, error)
        await self.manager.fail_stream(self.writer.stream_id, self.run_id, error.to_body())
        return await self._finished(run, status)

    async def _end_cancelled(self) -> str:
        # Who asked was recorded with the request (the executor's cancel); the live chunk tells it too.
        by = await Run.objects.filter(pk=self.run_id).values_list("cancelled_by", flat=True).afirst()
        if self.streaming is not None and self.streaming.operation_id:
            # The cut call's durable operation: what the provider reports it cost replaces the estimate.
            usage = await aended_operation_usage(self.streaming.provider, self.streaming.operation_id)
            self.meter.add_reported(usage, chars_of(self.acc.parts))
        run = await self._end_partial(RunStatus.CANCELLED, None, cancelled_by=by or "")
        await self.manager.end_stream(self.writer.stream_id, self.run_id, end_status="cancelled")
        return await self._finished(run, RunStatus.CANCELLED)

    async def _settle_after_fence(self) -> str:
        """The run lost its right to write: report why; end its stream if it was cancelled elsewhere.

        A run cancelled before its task started (or by another process) may still hold the
        stream claim, which would otherwise stay ``active`` with no writer. Returns the run's
        status, or ``abandoned`` when it is still live under another lease owner.
        """
        run = await self._decided_by_the_fencer()
        status = run.status if run is not None else RunStatus.SUPERSEDED
        if run is not None and run.is_live:
            return "abandoned"
        if status == RunStatus.CANCELLED:
            try:
                await self.manager.end_stream(self.writer.stream_id, self.run_id, end_status="cancelled")
            except StreamFenceError:
                pass  # a newer run holds the stream
        return status

    async def _decided_by_the_fencer(self) -> Run | None:
        """Return the run's row once the process that fenced this run decided its ending, or as it is.

        A Stop served by another process fences the writer before it commits ``cancelled``
        (``cancels._cancel_detached``): read at once, the run still looked live and
        this task reported ``abandoned``. Waits at most :data:`FENCER_WAIT_SECONDS` on the
        stream's wake-ups (the fencer closes the stream after its commit), re-reading the
        row at each, or every 0.1 s.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FENCER_WAIT_SECONDS
        while True:
            waiter = self.manager.subscribe(self.writer.stream_id)
            try:
                run = await Run.objects.filter(pk=self.run_id).afirst()
                remaining = deadline - loop.time()
                if run is None or not run.is_live or remaining <= 0:
                    return run
                await waiter.wait(min(remaining, 0.1))
            finally:
                waiter.cancel()

    async def _finished(self, run: Run, status: str) -> str:
        """Send ``run_finished`` with ``run`` as its terminal commit left it (no re-read); return ``status``."""
        await run_finished.asend(sender=Run, run=run, status=status, usage=dict(run.usage or {}))
        return status
