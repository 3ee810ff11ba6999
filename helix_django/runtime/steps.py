"""One LLM attempt: provider events -> UI chunks, with recovery of a cut durable operation.

The provider's operation id is stored on the run the moment it arrives, before the next
event is handled (000, "If the provider returns a durable response/operation identifier
early enough, persist it immediately"). When the stream ends without a finish and the
run has an operation id, the attempt asks the provider what happened, using only the
capabilities it declares: ``stream_from`` (replay after the last position), then
``retrieve`` (poll the final state). Without either, the drop is a retryable
ProviderError with cause ``stream_dropped`` (the run is then interrupted).

An attempt re-attached after its process was gone (:class:`Resumption`,
:mod:`helix_django.runtime.reattach`) goes straight to that recovery: ``stream_from(op, 0)``
replays the operation from its start and the characters of text and reasoning the
attempt's stream already holds are skipped, per kind (an operation's events are fixed once
generated, so the skip is exact whatever the chunk boundaries); tool calls dedupe by id.
Without a usable replay, ``retrieve`` gives the rest after the streamed prefix.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, Protocol

from helix_django import store
from helix_django.deadlines import idle_deadline
from helix_django.errors import ProviderError
from helix_django.protocol import MessageAccumulator
from helix_django.runtime.agents import Agent
from helix_django.runtime.providers.base import (
    Finish,
    OperationStarted,
    Progress,
    ProviderEvent,
    ProviderRequest,
    ReasoningDelta,
    TextDelta,
    ToolCall,
)

#: Bound on polling ``retrieve`` for an operation that is still in progress after a drop.
RETRIEVE_DEADLINE_SECONDS = 120.0
RETRIEVE_POLL_SECONDS = 0.25


@dataclasses.dataclass
class StepResult:
    """The outcome of a step's successful attempt."""

    finish_reason: str = "stop"
    tool_calls: list[ToolCall] = dataclasses.field(default_factory=list)
    usage: dict[str, int] = dataclasses.field(default_factory=dict)
    is_suspended: bool = False
    """Some tool call waits for the browser or for an approval."""


@dataclasses.dataclass
class Resumption:
    """An attempt of a run whose process was gone, re-attached to its durable operation here."""

    attempt_id: str
    step: int
    operation_id: str
    before: MessageAccumulator
    """The response message without this attempt's chunks (a retry of the step starts from it)."""
    text: str = ""
    """The attempt's text its stream holds (the replay skips as many characters)."""
    reasoning: str = ""
    open_parts: dict[str, str] = dataclasses.field(default_factory=dict)
    """``{"text"|"reasoning": part id}`` of the attempt's parts left open (their deltas continue them)."""
    part_count: int = 0
    """Parts the attempt started (the next one is ``{attempt_id}-{part_count + 1}``)."""


class LoopRounds:
    """Whether the event loop went round (ran its other ready callbacks) since :meth:`arm`.

    :meth:`arm` schedules one plain callback (``call_soon``); it has run once the loop
    went round, which it does whenever the task suspended meanwhile. The run so yields
    after a provider event only when the provider handed it over without suspending: a
    paced provider's delta costs one step of the run's task, not two (a step resumes
    the whole await chain of the run, several times a plain callback's cost).
    """

    __slots__ = ("_loop", "went_round")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.went_round = True

    def arm(self) -> None:
        """Start watching: :attr:`went_round` is False until the loop's next round."""
        self.went_round = False
        self._loop.call_soon(self._mark)

    def _mark(self) -> None:
        self.went_round = True


class AttemptHost(Protocol):
    """What an attempt needs from the run it streams for (:class:`~helix_django.runtime.agent.RunLoop`)."""

    run_id: str
    attempt_id: str
    agent: Agent
    step: int

    def provider_messages(self) -> list[dict[str, Any]]:
        """Return the conversation in the provider's message shape."""

    def emit(self, chunk: dict[str, Any], *, content: bool = False) -> None:
        """Write one UI chunk to the run's stream (``content``: part of the response message)."""


def attempt_superseded(loop: AttemptHost, superseded_attempt_id: str) -> dict[str, Any]:
    """Return the ``data-attempt-superseded`` chunk of the loop's new attempt replacing ``superseded_attempt_id``."""
    data = {"reason": "attempt_superseded", "runId": loop.run_id, "agentId": loop.agent.name, "step": loop.step}
    return {
        "type": "data-attempt-superseded",
        "data": {**data, "attemptId": loop.attempt_id, "supersededAttemptId": superseded_attempt_id},
    }


class AttemptStreamer:
    """Streams one attempt of the loop's current step into the loop's writer."""

    def __init__(self, loop: AttemptHost, number: int, resumed: Resumption | None = None) -> None:
        self.loop = loop
        self.number = number
        self.provider = loop.agent.provider
        self.operation_id = ""
        self.position = 0
        self.texts: list[str] = []
        """The attempt's text deltas so far (joined when read: appending copied the whole text per delta)."""
        self.reasonings: list[str] = []
        self.calls: list[ToolCall] = []
        self._open: dict[str, str] = {}
        self._parts = 0
        self._skip = {"text": 0, "reasoning": 0}
        """Characters per kind a replay from the operation's start skips (the stream holds them)."""
        self.resumed = resumed
        if resumed is not None:
            self.operation_id = resumed.operation_id
            self.texts, self.reasonings = [resumed.text], [resumed.reasoning]
            self._open, self._parts = dict(resumed.open_parts), resumed.part_count
            self._skip = {"text": len(resumed.text), "reasoning": len(resumed.reasoning)}

    async def stream(self) -> StepResult:
        """Run the attempt; raise ProviderError on failure (``stream_dropped`` for an unrecoverable cut)."""
        if self.resumed is not None:  # re-attached: the rest of the operation (module docstring)
            ended = await self._recover()
            self._close_all()
            return StepResult(ended.reason, self.calls, dict(ended.usage))
        loop = self.loop
        request = ProviderRequest(
            model=loop.agent.model,
            system=loop.agent.system_prompt,
            messages=loop.provider_messages(),
            tools=loop.agent.tool_specs(),
            run_id=loop.run_id,
            attempt_id=loop.attempt_id,
            options={"attempt_number": self.number},
        )
        finish: Finish | None = None
        events = self.provider.stream(request)
        idle = self.loop.agent.idle_timeout_seconds
        clock = asyncio.get_running_loop()
        try:
            try:
                # One idle deadline touched at each event, not a wait_for per event (on 3.11 a
                # task each, and a cancel landing as the event arrives could be lost in it).
                rounds = LoopRounds(clock)
                async with idle_deadline(idle) as deadline:
                    async for event in events:
                        finish = await self._apply(event) or finish
                        deadline.touch()
                        # A burst of events (a fast model, a buffered network read) never
                        # holds the event loop: the other requests and streams go between.
                        # A provider that waited for this event already gave the loop back.
                        if not rounds.went_round:
                            await asyncio.sleep(0)
                        rounds.arm()
            except asyncio.TimeoutError:
                # A provider that stopped sending is a cut stream, not a finished answer.
                raise ProviderError(retryable=True, cause="stream_dropped") from None
        except ProviderError as exc:
            # Once the operation exists, a retryable failure of its stream is a cut, not its outcome.
            if not self.operation_id or not exc.is_retryable:
                raise
        finally:
            closer = getattr(events, "aclose", None)
            if closer is not None:
                await closer()
        if finish is None:
            finish = await self._recover()
        self._close_all()
        return StepResult(finish.reason, self.calls, dict(finish.usage))

    # --- events --------------------------------------------------------------------------

    def _open_part(self, kind: str) -> str:
        other = "text" if kind == "reasoning" else "reasoning"
        if other in self._open:
            self._close(other)
        if kind not in self._open:
            self._parts += 1
            part_id = f"{self.loop.attempt_id}-{self._parts}"
            self._open[kind] = part_id
            self.loop.emit({"type": f"{kind}-start", "id": part_id}, content=True)
        return self._open[kind]

    def _close(self, kind: str) -> None:
        part_id = self._open.pop(kind, None)
        if part_id is not None:
            self.loop.emit({"type": f"{kind}-end", "id": part_id}, content=True)

    def _close_all(self) -> None:
        self._close("reasoning")
        self._close("text")

    async def _apply(self, event: ProviderEvent) -> Finish | None:
        if isinstance(event, TextDelta):
            if event.text:
                self.texts.append(event.text)
                self.loop.emit({"type": "text-delta", "id": self._open_part("text"), "delta": event.text}, content=True)
        elif isinstance(event, ReasoningDelta):
            if event.text:
                self.reasonings.append(event.text)
                part_id = self._open_part("reasoning")
                self.loop.emit({"type": "reasoning-delta", "id": part_id, "delta": event.text}, content=True)
        elif isinstance(event, ToolCall):
            if all(call.id != event.id for call in self.calls):
                self.calls.append(event)
        elif isinstance(event, OperationStarted):
            self.operation_id = event.operation_id
            self.position = max(self.position, event.sequence)
            await store.aupdate_run(self.loop.run_id, provider_operation_id=event.operation_id)
        elif isinstance(event, Progress):
            self.position = max(self.position, event.sequence)
        elif isinstance(event, Finish):
            return event
        return None

    # --- recovery of a cut stream --------------------------------------------------------

    async def _recover(self) -> Finish:
        if self.operation_id and self.provider.supports_stream_from:
            finish = await self._replay_tail()
            if finish is not None:
                return finish
        if self.operation_id and self.provider.supports_retrieve:
            return await self._poll_result()
        raise ProviderError(retryable=True, cause="stream_dropped")

    async def _replay_tail(self) -> Finish | None:
        finish: Finish | None = None
        try:
            async for event in self.provider.stream_from(self.operation_id, self.position):
                unseen = self._unseen(event)
                if unseen is not None:
                    finish = await self._apply(unseen) or finish
        except ProviderError:
            return None
        return finish

    def _unseen(self, event: ProviderEvent) -> ProviderEvent | None:
        """Return what of a replayed ``event`` the stream does not hold yet (None: all of it is there)."""
        kind = "text" if isinstance(event, TextDelta) else "reasoning" if isinstance(event, ReasoningDelta) else ""
        if not kind or not self._skip[kind]:
            return event
        assert isinstance(event, TextDelta | ReasoningDelta)
        seen = min(self._skip[kind], len(event.text))
        self._skip[kind] -= seen
        rest = event.text[seen:]
        return type(event)(rest) if rest else None

    async def _poll_result(self) -> Finish:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RETRIEVE_DEADLINE_SECONDS
        while True:
            result = await self.provider.retrieve(self.operation_id)
            if result.status != "in_progress" or loop.time() > deadline:
                break
            await asyncio.sleep(RETRIEVE_POLL_SECONDS)
        if result.status != "completed":
            raise ProviderError(retryable=True, cause="stream_dropped")
        streamed = {"reasoning": "".join(self.reasonings), "text": "".join(self.texts)}
        for kind, full in (("reasoning", result.reasoning), ("text", result.text)):
            seen = streamed[kind]
            rest = full[len(seen) :] if full.startswith(seen) else ""
            if rest:
                await self._apply(ReasoningDelta(rest) if kind == "reasoning" else TextDelta(rest))
        for call in result.tool_calls:
            await self._apply(call)
        return Finish(result.finish_reason, result.usage)
