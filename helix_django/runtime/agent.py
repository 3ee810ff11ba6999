"""The agent loop of one run: provider stream -> chunks -> stream manager, step commits -> store.

A :class:`RunLoop` runs as an asyncio task. Per step it writes ``start-step`` (carrying
the LLM attempt id), the attempt's content, the tool calls and their results, then
``finish-step``; it flushes the writer and commits the step (the committed message is
the :class:`~helix_django.protocol.MessageAccumulator` of the same chunks), then writes
``helix-step-committed``. A run that was superseded stops quietly: its writes are fenced
(002, "Superseded runs"). A provider failure after some output commits the partial
message marked partial, never as a finished answer (000, "Store partial output explicitly");
so does an answer growing past ``MAX_MESSAGE_BYTES`` (``run_response_too_large``, docs/limits.md).
"""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

from helix_django import metrics, store
from helix_django.budgets import acheck_session_budgets
from helix_django.conf import helix_settings
from helix_django.deadlines import outlasts_cancel
from helix_django.errors import ProviderError, RunSupersededError
from helix_django.ids import new_id
from helix_django.limits import ResponseBudget
from helix_django.models import RunStatus
from helix_django.protocol import MessageAccumulator
from helix_django.runtime.agents import Agent
from helix_django.runtime.context import CONTINUE_INSTRUCTION, to_provider_messages
from helix_django.runtime.endings import EndingsMixin
from helix_django.runtime.requests import abegin_streaming
from helix_django.runtime.steps import AttemptStreamer, Resumption, StepResult, attempt_superseded
from helix_django.runtime.tool_calls import execute_call, parse_arguments, run_approved
from helix_django.runtime.tools import ToolContext
from helix_django.streams.writer import StreamWriter
from helix_django.usage import UsageMeter, chars_of

#: Seconds a run whose model call failed while a Stop cancels its operation waits for that Stop.
STOP_FOLLOWS_SECONDS = 5.0

logger = logging.getLogger(__name__)


class RunLoop(EndingsMixin):
    """Executes one run after its stream was claimed and its opening chunks were written.

    ``context`` are the committed rows (UIMessages) before the response message, as the
    run-start commit read them; without them the run reads them when it starts executing,
    marking itself ``streaming`` in the same hop. ``acc`` holds the response message
    (re-opened for a continuation).
    ``approved`` are ``(tool, arguments, tool_call_id)`` to execute before the first step.
    """

    def __init__(
        self,
        *,
        run: Any,
        agent: Agent,
        writer: StreamWriter,
        acc: MessageAccumulator,
        owner: str,
        user: Any = None,
        approved: list[tuple[Any, dict[str, Any], str]] | None = None,
        add_continue_instruction: bool = False,
        context: list[dict[str, Any]] | None = None,
    ) -> None:
        self.run = run
        self.run_id = run.id
        self.agent = agent
        self.writer = writer
        self.manager = writer.manager
        self.acc = acc
        self.context: list[dict[str, Any]] = [] if context is None else to_provider_messages(context)
        self._has_context = context is not None
        self.owner = owner
        self.user = user
        self.approved = approved or []
        self.add_continue_instruction = add_continue_instruction
        self.step = run.step_count
        self.attempt_id = ""
        self.stage = "starting"
        self.is_cancel_requested = False
        self.is_cancel_coming = False  # a Stop cancels the provider's operation; its task cancel follows (.cancels)
        self.is_lease_lost = False
        self.meter = UsageMeter.from_record(run.usage, start_chars=chars_of(acc.parts))  # helix_django.usage
        self.is_ending = False
        """Set once the run commits its end: the lease is released by that commit, not lost."""
        self.last_event_at, self.has_first_token = 0.0, False  # the first content chunk sets it (its TTFT)
        self.task: asyncio.Task[Any] | None = None
        """The asyncio task running :meth:`run_forever` (set by the executor; it may wrap the call)."""
        self.budget: ResponseBudget | None = None
        """Bounds the response message by ``MAX_MESSAGE_BYTES`` once the run executes (not its opening)."""
        self.resumption: Resumption | None = None
        """The attempt its first step goes on with (a run re-attached here: :mod:`.reattach`)."""
        self.streaming: AttemptStreamer | None = None  # the attempt whose model call no usage report covers yet

    # --- chunks --------------------------------------------------------------------------

    def emit(self, chunk: dict[str, Any], *, content: bool = False) -> None:
        """Stamp ``chunk`` with run/step/attempt, queue it, and apply it to the response message."""
        self.writer.write(self.prepare(chunk, content=content))

    def prepare(self, chunk: dict[str, Any], *, content: bool = False) -> dict[str, Any]:
        """Stamp ``chunk`` with run/step/attempt and apply it to the response message; return it (not queued)."""
        chunk["_run"] = self.run_id
        if self.step:
            chunk["_step"] = self.step
        if content and self.attempt_id:
            chunk["_attempt"] = self.attempt_id
        if self.budget is not None and not self.is_ending:
            self.budget.admit(chunk, self._message_so_far)  # raises ResponseTooLargeError: the run fails, partial kept
        if content and not self.has_first_token:
            self.has_first_token = True
            metrics.record_first_token(self.run)
        self.acc.apply(chunk)
        self.last_event_at = asyncio.get_running_loop().time()
        return chunk

    def _message_so_far(self) -> dict[str, Any]:
        return self.acc.message

    async def flush(self) -> int:
        """Store every queued chunk; return the writer's last sequence (the commit's stream_sequence)."""
        return await self.writer.flush()

    # --- the run -------------------------------------------------------------------------

    async def run_forever(self) -> str:
        """Run to a terminal or suspended state; return the final run status (or ``superseded``)."""
        renewer = asyncio.create_task(self._renew_lease())
        try:
            try:
                return await self._body()
            finally:
                # What follows is this task's own ending: a lease the renewer finds lost meanwhile
                # (the run ended elsewhere) must not cancel it again mid-settle, which left it "abandoned".
                renewer.cancel()
        except asyncio.CancelledError:
            if self.is_cancel_requested:
                return await self._ending(self._end_cancelled())
            self.writer.discard()
            if self.is_lease_lost:
                return await self._ending(self._settle_after_fence())
            # The process is going away: leave the run to the relaunch scan.
            raise
        except RunSupersededError:
            self.writer.discard()
            logger.info("run %s superseded or ended elsewhere; stopping", self.run_id)
            return await self._ending(self._settle_after_fence())
        except Exception as exc:
            if self.is_cancel_coming:  # the Stop's provider cancel ended the stream before the Stop reached the task
                try:
                    await asyncio.sleep(STOP_FOLLOWS_SECONDS)
                except asyncio.CancelledError:
                    return await self._ending(self._end_cancelled())
            return await self._ending(self._end_failed(exc))
        finally:
            await outlasts_cancel(self.agent.provider.aclose())

    async def _ending(self, coro: Any) -> str:
        """Run one of the task's endings to its end, whatever cancel reaches the task meanwhile; return its status.

        The ending answers every cancel: a second Stop (or a lease loss, an abandon) landing
        while it writes would leave the run live, its stream ``active`` with no writer
        (:func:`~helix_django.deadlines.outlasts_cancel`). A fenced ending reports ``superseded``.
        """
        return await outlasts_cancel(self._guard(coro))

    async def _guard(self, coro: Any) -> str:
        try:
            return await coro
        except RunSupersededError:
            self.writer.discard()
            return RunStatus.SUPERSEDED

    async def _body(self) -> str:
        # One loop round first: whoever opened the run (a send's response, already planned)
        # sends its first byte before the run's first step. A Stop that came
        # before the run's task started is seen here (cancels.stop_started_task).
        await asyncio.sleep(0)
        if self.is_cancel_requested:
            raise asyncio.CancelledError()
        self.budget = ResponseBudget(self.acc.message)
        if not self._has_context:  # one thread hop: the status write and the read of the conversation
            rows = await abegin_streaming(self.run_id, self.run.session_id, self.run.start_message_count)
            self.context = to_provider_messages(rows)
        if self.approved:
            await self._run_approved()
        while self.step < self.agent.max_steps:
            self.step += 1
            result = await self._run_step()
            if not result.is_suspended and result.finish_reason != "tool-calls":
                return await self._complete(result.finish_reason, step_done=True)  # commits the step too
            await self._commit_step()
            if result.is_suspended:
                return await self._suspend()
            await acheck_session_budgets(self.run.session_id)  # past a budget: ends failed, partial kept
        return await self._complete("length")

    async def _run_approved(self) -> None:
        await store.aupdate_run(self.run_id, status=RunStatus.TOOLING)
        for tool_obj, arguments, call_id in self.approved:
            ctx = self._tool_context(call_id)
            outcome = await run_approved(tool_obj, arguments, ctx, tool_obj.key_for(arguments, ctx))
            self._emit_outcome(call_id, outcome)
        await store.aupdate_run(self.run_id, status=RunStatus.STREAMING)

    def _tool_context(self, call_id: str) -> ToolContext:
        return ToolContext(
            run_id=self.run_id,
            session_id=self.run.session_id,
            tool_call_id=call_id,
            turn_message_id=self.run.turn_message_id,
            user=self.user,
            step=self.step,
        )

    def provider_messages(self) -> list[dict[str, Any]]:
        """Return the model context of the next call: committed rows + the response message so far."""
        current = to_provider_messages([self.acc.message], keep_partial_id=self.acc.message["id"])
        messages = self.context + current
        if self.add_continue_instruction and messages and messages[-1]["role"] == "assistant":
            if not messages[-1].get("tool_calls"):
                messages = [*messages, {"role": "user", "content": CONTINUE_INSTRUCTION}]
        return messages

    async def _run_step(self) -> StepResult:
        """Stream one step (retrying a retryable provider failure as a new attempt) and run its tools.

        The step ends with ``finish-step``; the caller commits it (:meth:`_commit_step`, or
        with the run's terminal commit when the run completes with it).
        """
        number = 0
        while True:
            number += 1
            resumed, self.resumption = self.resumption, None
            before = copy.deepcopy(self.acc) if resumed is None else resumed.before
            previous_attempt, self.attempt_id = self.attempt_id, resumed.attempt_id if resumed else new_id("att")
            if number > 1:
                self.acc = before
                self.emit(attempt_superseded(self, previous_attempt))
                before = copy.deepcopy(self.acc)
            if resumed is None:  # a re-attached attempt's start-step is stored already
                self.emit({"type": "start-step"}, content=True)
            self.stage = "streaming"
            try:
                self.streaming = AttemptStreamer(self, number, resumed)
                result = await self.streaming.stream()
                self.streaming = None
                self.meter.add_reported(result.usage, chars_of(self.acc.parts))
                break
            except ProviderError as exc:
                if not exc.is_retryable or number >= self.agent.max_attempts:
                    raise
                logger.info("run %s step %s attempt %s failed (retryable); retrying", self.run_id, self.step, number)
                self.meter.add_unreported(chars_of(self.acc.parts) - chars_of(before.parts))  # its text, unreported
                self.acc = before
        await self._run_tools(result)
        self.emit({"type": "finish-step"}, content=True)
        return result

    async def _commit_step(self) -> None:
        """Flush, commit the finished step, then write ``helix-step-committed`` naming its checkpoint."""
        sequence = await self.flush()
        message = self.acc.snapshot()
        usage = self.meter.record(chars_of(message["parts"]))
        checkpoint = await store.acommit_step(
            self.run_id, response_message=message, stream_sequence=sequence, step_count=self.step, usage=usage
        )
        self.emit(self.step_committed(checkpoint.id))

    def step_committed(self, checkpoint_id: int | None) -> dict[str, Any]:
        """Return the ``helix-step-committed`` chunk of the current step (its checkpoint's id)."""
        return {
            "type": "helix-step-committed",
            "step": self.step,
            "committedAttemptId": self.attempt_id,
            "checkpointId": checkpoint_id,
        }

    async def _run_tools(self, result: StepResult) -> None:
        if not result.tool_calls:
            return
        self.stage = "tooling"
        await store.aupdate_run(self.run_id, status=RunStatus.TOOLING)
        for call in result.tool_calls:
            tool_obj = self.agent.tools.get(call.name)
            arguments, error = parse_arguments(tool_obj, call.arguments)
            if arguments is None:
                self.emit(
                    {
                        "type": "tool-input-error",
                        "toolCallId": call.id,
                        "toolName": call.name,
                        "input": call.arguments,
                        "errorText": error,
                    },
                    content=True,
                )
                continue
            self.emit(
                {"type": "tool-input-available", "toolCallId": call.id, "toolName": call.name, "input": arguments},
                content=True,
            )
            assert tool_obj is not None
            outcome = await execute_call(tool_obj, arguments, self._tool_context(call.id))
            self._emit_outcome(call.id, outcome)
            result.is_suspended = result.is_suspended or outcome.kind.startswith("pending")
        if not result.is_suspended:
            await store.aupdate_run(self.run_id, status=RunStatus.STREAMING)

    def _emit_outcome(self, call_id: str, outcome: Any) -> None:
        if outcome.kind == "output":
            self.emit({"type": "tool-output-available", "toolCallId": call_id, "output": outcome.output})
        elif outcome.kind == "error":
            self.emit({"type": "tool-output-error", "toolCallId": call_id, "errorText": outcome.error_text})
        elif outcome.kind == "pending_approval":
            self.emit(
                {"type": "tool-approval-request", "approvalId": f"{self.run_id}::{call_id}", "toolCallId": call_id}
            )

    async def _renew_lease(self) -> None:
        seen = 0.0
        while True:
            await asyncio.sleep(helix_settings.LEASE_RENEW_SECONDS)
            held = await store.arenew_lease(self.run_id, self.owner, helix_settings.LEASE_SECONDS)
            if held and self.last_event_at > seen:
                seen = self.last_event_at
                try:
                    await store.aupdate_run(self.run_id)
                except RunSupersededError:
                    held = False
            if self.is_ending:
                return
            if not held:
                logger.info("run %s lost its lease; stopping", self.run_id)
                self.is_lease_lost = True
                if self.task is not None:
                    self.task.cancel()
                return
