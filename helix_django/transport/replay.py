"""Turn a session stream's stored chunks into the AI SDK chunks one response sends.

Rules (002, "Retried attempts", "Superseded runs", "Tool results for a call in an
earlier message", C-1):

- **Runs.** A response follows one run: chunks of an earlier run are skipped; when a
  newer run starts on the stream (it superseded ours) the response follows it, since
  both write to the same session stream. The followed run's ``helix-run-end`` is the
  terminal, told truthfully (000, "the UI must distinguish a completed answer
  from partial output"; 002, "Wire errors"): ``completed`` and ``suspended`` end with
  ``[DONE]``; ``cancelled`` sends one ``abort`` chunk, then ``[DONE]``; ``failed`` and
  ``interrupted`` (any other status) end with the typed ``error`` chunk that follows
  it, or, when the stream holds none, with :func:`ending_error_body`.
- **Attempts.** Per step, the winning attempt is the one ``helix-step-committed`` names
  (when it streamed in the step), else the one that started last. Content chunks of
  any other attempt are dropped; tool results pass through. A
  ``data-attempt-superseded`` is forwarded only when this client was sent content of
  the superseded attempt (in this response, or at or below its cursor).
- **Tool results elsewhere.** A tool result is forwarded only for a call the response
  message owns (its input was sent, or the client holds the message that has it);
  any other becomes one ``data-tool-output-elsewhere`` per call.
- **Start.** With a replayed prefix the tail's ``start`` for the same message is not
  repeated (its metadata becomes a ``message-metadata`` chunk).
- Internal ``helix-*`` chunks and the reserved ``_run``/``_attempt``/``_step`` keys
  never reach the client.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from helix_django.errors import RunInterruptedError, StreamFailedError
from helix_django.protocol import ATTEMPT_KEY, CONTENT_TYPES, RUN_KEY, STEP_KEY, TOOL_RESULT_TYPES, to_ui_chunk
from helix_django.transport.wire_ui import error_ui_chunk

Chunk = dict[str, Any]
TOOL_INPUT_TYPES = frozenset(
    {"tool-input-start", "tool-input-delta", "tool-input-available", "tool-input-error", "tool-approval-request"}
)
DONE, ERROR = "done", "error"
#: ``helix-run-end`` statuses that end a response with ``[DONE]`` (every other one is an error).
CLEAN_END_STATUSES = frozenset({"completed", "suspended", "cancelled"})
ABORT_CHUNK: Chunk = {"type": "abort"}
"""The UI chunk of a cancelled run (ai@6.0.0 parses ``abort`` as a strict object: no ``reason``)."""


class AttemptTracker:
    """Which LLM attempt of each step wins, from the step markers seen so far."""

    def __init__(self) -> None:
        self.started: dict[Any, list[str]] = {}
        self.step_of: dict[str, Any] = {}
        self.committed: dict[Any, str] = {}
        self.first_content_at: dict[str, int] = {}
        """The first sequence with content of each attempt (not every one: a replay of a long run kept them all)."""

    def observe(self, sequence: int, chunk: Chunk) -> None:
        """Record a start-step, a step commit, or content of an attempt at ``sequence``."""
        kind = chunk.get("type")
        attempt = chunk.get(ATTEMPT_KEY)
        if kind == "start-step" and attempt:
            step = chunk.get(STEP_KEY)
            self.step_of.setdefault(attempt, step)
            attempts = self.started.setdefault(step, [])
            if attempt not in attempts:
                attempts.append(attempt)
        elif kind == "helix-step-committed":
            self.committed[chunk.get("step")] = chunk.get("committedAttemptId") or ""
        if attempt and kind in CONTENT_TYPES:
            self.first_content_at.setdefault(attempt, sequence)

    def winner(self, step: Any) -> str | None:
        """Return the winning attempt of ``step`` (None when no attempt is known)."""
        attempts = self.started.get(step)
        if not attempts:
            return None
        committed = self.committed.get(step)
        if committed and committed in attempts:
            return committed
        return attempts[-1]

    def is_superseded(self, chunk: Chunk) -> bool:
        """Whether ``chunk`` is content of an attempt that lost its step."""
        attempt = chunk.get(ATTEMPT_KEY)
        if not attempt or chunk.get("type") not in CONTENT_TYPES:
            return False
        step = chunk.get(STEP_KEY)
        if step is None:
            step = self.step_of.get(attempt)
        winner = self.winner(step)
        return winner is not None and winner != attempt


class ResponseFilter:
    """Stateful converter for one response (see the module docstring).

    ``run_id`` is the run to follow (None: the first run seen). ``owned_tool_call_ids``
    are the calls of the message the client already holds. ``cursor`` is the last
    sequence the client holds (content at or below it was sent to it earlier).
    ``dedupe_start_for`` is the message id whose ``start`` was already sent (prefix).
    ``tool_names`` maps call ids to tool names for the elsewhere markers.
    """

    def __init__(
        self,
        *,
        run_id: str | None,
        owned_tool_call_ids: Iterable[str] = (),
        cursor: int | None = None,
        dedupe_start_for: str | None = None,
        tool_names: dict[str, str] | None = None,
    ) -> None:
        self.run_id = run_id
        # Sets as dicts (keys only): an empty dict is 64 bytes, an empty set 216, and an idle
        # response keeps its filter (idle memory per open response).
        self.owned: dict[str, None] = dict.fromkeys(owned_tool_call_ids)
        self.cursor = cursor
        self.dedupe_start_for = dedupe_start_for
        self.tool_names = dict(tool_names or {})
        self.attempts = AttemptTracker()
        self.sent_attempts: dict[str, None] = {}
        self.elsewhere_sent: dict[str, None] = {}
        self.terminal: str | None = None
        """``done`` (a real terminal: send ``[DONE]``) or ``error`` (an error chunk was sent)."""
        self.expect_error = False
        """The followed run ended failed or interrupted: its ``error`` chunk is the terminal."""
        self.end_status: str | None = None
        """The status of the followed run's ``helix-run-end`` (None: not seen)."""
        self.last_end_at: int | None = None
        """The sequence of the followed run's last ``helix-run-end`` the prescan saw: an earlier
        end (and the ``error`` chunk after it) was overridden by a later ending of the run (a
        paused run then cancelled, an interrupted one completed by *Check status*)."""
        self._seen_run = run_id is None

    def prescan(self, chunks: Iterable[tuple[int, Chunk]]) -> None:
        """Learn attempts, owned calls and tool names from the run's chunks before sending any.

        Call with every chunk of the run from its start (also those at or below the
        cursor, which the client already holds).
        """
        for sequence, chunk in chunks:
            if self.run_id is not None and chunk.get(RUN_KEY) not in (None, self.run_id):
                continue
            self.attempts.observe(sequence, chunk)
            self._learn_tool(chunk, owned=self.cursor is not None and sequence <= self.cursor)
            if chunk.get("type") == "helix-run-end" and chunk.get(RUN_KEY) in (None, self.run_id):
                self.last_end_at = sequence
        if self.cursor is not None:
            for attempt, first in self.attempts.first_content_at.items():
                if first <= self.cursor:
                    self.sent_attempts[attempt] = None

    def _learn_tool(self, chunk: Chunk, *, owned: bool) -> None:
        call_id = chunk.get("toolCallId")
        if call_id and chunk.get("type") in TOOL_INPUT_TYPES:
            if chunk.get("toolName"):
                self.tool_names[call_id] = chunk["toolName"]
            if owned:
                self.owned[call_id] = None

    def _follows(self, chunk: Chunk) -> bool:
        run = chunk.get(RUN_KEY)
        if run is None:
            return self._seen_run
        if self.run_id is None:
            self.run_id = run
        if run == self.run_id:
            self._seen_run = True
            return True
        if self._seen_run and chunk.get("type") == "helix-run-start":
            self.run_id = run  # a newer run superseded ours: the client keeps the session stream
            self.attempts = AttemptTracker()
            return True
        return False

    def accept(self, sequence: int, chunk: Chunk) -> list[Chunk]:
        """Return the AI SDK chunks to send for one stored chunk (possibly none)."""
        if self.terminal is not None:
            return []
        kind = chunk.get("type", "")
        if kind in ("error", "helix-run-end") and self.last_end_at is not None and sequence < self.last_end_at:
            return []  # an ending the run's later ending overrode: only its last one is told
        if kind == "error":
            self.terminal = ERROR
            return [error_ui_chunk(chunk)]
        # After the run's end nothing of it is sent, only the error that follows.
        if self.expect_error or not self._follows(chunk):
            return []
        self.attempts.observe(sequence, chunk)
        if kind == "helix-run-end":
            return self._run_end(chunk)
        if self._is_dropped(chunk, kind):
            return []
        return self._sent(chunk, kind)

    def _run_end(self, chunk: Chunk) -> list[Chunk]:
        """The run's ``helix-run-end``: ``abort`` for a cancel, nothing for a clean end; an unclean end waits.

        An unclean end (failed, interrupted) is told by the ``error`` chunk that follows it.
        """
        self.end_status = str(chunk.get("status") or "completed")  # every ending writes one; none: a clean end
        if self.end_status not in CLEAN_END_STATUSES:
            self.expect_error = True
            return []
        self.terminal = DONE
        return [dict(ABORT_CHUNK)] if self.end_status == "cancelled" else []

    def _is_dropped(self, chunk: Chunk, kind: str) -> bool:
        """Whether ``chunk`` belongs to a superseded attempt, or announces the supersession of one never sent."""
        if self.attempts.is_superseded(chunk):
            return True
        if kind == "data-attempt-superseded":
            data = chunk.get("data") or {}
            return data.get("supersededAttemptId") not in self.sent_attempts
        return False

    def _sent(self, chunk: Chunk, kind: str) -> list[Chunk]:
        """The UI chunks of a content chunk of the followed run (a held ``start`` becomes its metadata)."""
        if kind == "start" and self.dedupe_start_for and chunk.get("messageId") == self.dedupe_start_for:
            metadata = chunk.get("messageMetadata")
            return [{"type": "message-metadata", "messageMetadata": metadata}] if metadata else []
        if kind in TOOL_RESULT_TYPES:
            call_id = chunk.get("toolCallId", "")
            if call_id not in self.owned:
                return self._elsewhere(call_id)
        self._learn_tool(chunk, owned=True)
        ui = to_ui_chunk(chunk)
        if ui is None:
            return []
        attempt = chunk.get(ATTEMPT_KEY)
        if attempt and kind in CONTENT_TYPES:
            self.sent_attempts[attempt] = None
        return [ui]

    def _elsewhere(self, call_id: str) -> list[Chunk]:
        if call_id in self.elsewhere_sent:
            return []
        self.elsewhere_sent[call_id] = None
        data: dict[str, Any] = {
            "reason": "tool_output_elsewhere",
            "toolCallId": call_id,
            "toolName": self.tool_names.get(call_id, ""),
        }
        if self.run_id:
            data["runId"] = self.run_id
        return [{"type": "data-tool-output-elsewhere", "id": f"{self.run_id or ''}:{call_id}", "data": data}]


def ending_error_body(end_status: str, run_id: str | None) -> dict[str, Any]:
    """Return the typed body for a run that ended ``end_status`` without a stored ``error`` chunk.

    ``interrupted`` -> ``run_interrupted`` (retryable: the user may continue or regenerate);
    any other status (``failed``...) -> ``stream_failed`` (not retryable). Shape: the flat
    wire body ``{error, code, retryable, runId?}`` (STYLE, "Errors").
    """
    extra = {"runId": run_id} if run_id else {}
    if end_status == "interrupted":
        return RunInterruptedError(**extra).to_body()
    return StreamFailedError(**extra).to_body()


def tool_call_ids(message: dict[str, Any] | None) -> list[str]:
    """Return the tool call ids of a UIMessage's tool parts."""
    if not message:
        return []
    return [p["toolCallId"] for p in message.get("parts", []) if isinstance(p, dict) and p.get("toolCallId")]


def tool_names_of(messages: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Map tool call ids to tool names over UIMessages (``tool-<name>`` or ``dynamic-tool``)."""
    names: dict[str, str] = {}
    for message in messages:
        for part in message.get("parts", []):
            if isinstance(part, dict) and part.get("toolCallId"):
                kind = part.get("type", "")
                names[part["toolCallId"]] = part.get("toolName") or kind.removeprefix("tool-")
    return names
