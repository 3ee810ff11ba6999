"""The chat route's resume planner: what to answer, decided from what the reads returned, with no I/O.

Each function takes the parsed request (:class:`ResumeAsk`), the run's facts
(:class:`RunFacts`) and, once read, the stream's :class:`~helix_django.streams.base.StreamInfo`,
and returns a frozen :class:`Plan`: the path taken, where a replay starts, and the typed
refusal if any. :mod:`helix_django.transport.resume` does the reads, the waits and the
streaming around these decisions. The rules (002, "How handleChatStream resumes", "The
run-start window", C-1; docs/transport.md, "Cursors"):

- a replay prefix asked for (``X-Helix-Replay-Prefix`` + ``X-Existing-Message-Id``):
  the C-1 replay of that message (:attr:`Path.PREFIX`);
- no run: ``204`` (:attr:`Path.NOTHING`);
- a live run: without a cursor, a run continuing an earlier message replays that message's
  committed prefix plus the tail (:attr:`Path.PREFIX`); otherwise wait until the run holds
  the stream (:attr:`Path.WAIT_LIVE`), then :func:`plan_live`;
- a finished run without a cursor: ``204`` (the snapshot holds it); with one, read the
  stream's info (:attr:`Path.READ_ENDED`), then :func:`plan_ended`.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from django.utils.translation import gettext_lazy

from helix_django.errors import HelixError, NotResumableError, StreamDropError, StreamFailedError
from helix_django.models import RunStatus
from helix_django.streams.base import ACTIVE, ENDED, FAILED, PAUSED, StreamInfo

#: Run kinds whose response message existed before the run (it continues that message).
CONTINUATION_KINDS = frozenset({"tool_result", "continue"})


class Path(enum.Enum):
    """Which way a resume is answered."""

    NOTHING = "nothing"
    """``204``: no run, or the client holds everything."""
    PREFIX = "prefix"
    """C-1: a message's committed parts, then the tail after the same snapshot's cursor."""
    WAIT_LIVE = "wait_live"
    """A live run: wait until it holds the stream's claim, then :func:`plan_live`."""
    REPLAY_LIVE = "replay_live"
    """A live run's chunks from :attr:`Plan.from_sequence`, then live, then its ending."""
    READ_ENDED = "read_ended"
    """A finished run with a cursor: read the stream's info, then :func:`plan_ended`."""
    WAIT_END = "wait_end"
    """A run ended in the database whose stream is still open: wait for its close, then plan again."""
    REPLAY_ENDED = "replay_ended"
    """A finished run's chunks after :attr:`Plan.from_sequence`, then its ending."""
    REFUSE = "refuse"
    """A typed refusal (:attr:`Plan.error`)."""


class StreamFailedResponse(StreamFailedError):
    """409 ``stream_failed`` with the reference's body (002, "Wire errors", chat resume)."""

    def __init__(self, *, session_id: str, stream_id: str, error: dict[str, Any] | None) -> None:
        super().__init__("stream_failed")
        self.session_id, self.stream_id, self.error_body = session_id, stream_id, error or {}

    def to_body(self) -> dict[str, Any]:
        """Return ``{error: 'stream_failed', code, retryable, sessionId, streamId, message, errorDetail?}``."""
        body: dict[str, Any] = {
            "error": "stream_failed",
            "code": self.error_body.get("code") or "stream_failed",
            "retryable": bool(self.error_body.get("retryable", False)),
            "sessionId": self.session_id,
            "streamId": self.stream_id,
            "message": str(gettext_lazy("The stream failed")),
        }
        if self.error_body.get("code"):
            body["errorDetail"] = {
                k: self.error_body[k] for k in ("code", "retryable", "cause") if k in self.error_body
            }
        return body


@dataclasses.dataclass(frozen=True)
class ResumeAsk:
    """What a resume request asks for (parsed from its headers or body)."""

    cursor: int | None = None
    """The client's cursor (``X-Resume-From-Sequence``, ``Last-Event-ID``); None: none sent."""
    replay_prefix: bool = False
    """``X-Helix-Replay-Prefix: 1``: the client removed the message from its seed (C-1)."""
    existing_message_id: str | None = None
    """``X-Existing-Message-Id``: the message the client resumes into."""

    @classmethod
    def of(cls, request: Any) -> ResumeAsk:
        """Return the ask of a :class:`~helix_django.transport.chat_request.ChatRequest`."""
        return cls(request.cursor, bool(request.replay_prefix), request.existing_message_id)


@dataclasses.dataclass(frozen=True)
class RunFacts:
    """What the planner needs of the session's current run."""

    id: str
    status: str
    kind: str
    start_sequence: int
    """The stream's sequence before the run's first chunk."""
    response_message_id: str
    is_live: bool
    is_terminal: bool

    @classmethod
    def of(cls, run: Any) -> RunFacts:
        """Return the facts of a :class:`~helix_django.models.Run` row."""
        return cls(
            run.id,
            run.status,
            run.kind,
            run.start_sequence,
            run.response_message_id,
            run.is_live,
            run.is_terminal,
        )


@dataclasses.dataclass(frozen=True)
class Plan:
    """One decision of the planner: the path, where a replay starts, the refusal."""

    path: Path
    from_sequence: int | None = None
    """Where the replay starts (the chunks after it), clamped to the run's start."""
    cursor: int | None = None
    """The client's cursor after clamping, where it sent one (what it holds: the replay's filter)."""
    message_id: str | None = None
    """For :attr:`Path.PREFIX`: the message replayed."""
    at_head: bool = False
    """For :attr:`Path.REPLAY_ENDED`: the cursor is at the stream's head."""
    error: HelixError | None = None
    """For :attr:`Path.REFUSE`: the typed refusal to raise."""

    @property
    def status(self) -> int:
        """The HTTP status this plan answers with (before its reads): 204, 200 or the refusal's."""
        if self.error is not None:
            return self.error.status
        return 204 if self.path is Path.NOTHING else 200


NOTHING = Plan(Path.NOTHING)


def recovering_drop() -> StreamDropError:
    """Return the retryable drop of a reader whose run a recovery fenced (``cause: run_recovering``)."""
    return StreamDropError(gettext_lazy("The run is being recovered; resume again"), cause="run_recovering")


def cursor_ahead(cursor: int, info: StreamInfo) -> NotResumableError | None:
    """Return the 409 ``state_not_resumable`` / ``cursor_ahead`` of a cursor beyond the stream's head, or None."""
    if cursor > info.head_sequence:
        return NotResumableError(cause="cursor_ahead", headSequence=info.head_sequence)
    return None


def plan_start(ask: ResumeAsk, run: RunFacts | None) -> Plan:
    """Decide a resume before any stream read (see the module docstring)."""
    if ask.replay_prefix and ask.existing_message_id:
        return Plan(Path.PREFIX, message_id=ask.existing_message_id)
    if run is None:
        return NOTHING
    if run.is_live:
        if ask.cursor is None and run.kind in CONTINUATION_KINDS:
            return Plan(Path.PREFIX, message_id=run.response_message_id)
        return Plan(Path.WAIT_LIVE)
    if ask.cursor is None:
        return NOTHING
    return Plan(Path.READ_ENDED)


def plan_live(ask: ResumeAsk, run: RunFacts, info: StreamInfo) -> Plan:
    """Decide the replay of a live run from the stream ``info`` read once the run held its claim.

    A stream paused while the run is not waiting for the browser is a recovery's fence: 503
    ``transport_stream_drop`` / ``run_recovering`` (come back). A cursor beyond the head:
    409 ``cursor_ahead``. Otherwise the run's chunks from the cursor clamped to the run's
    start (from the start without a cursor).
    """
    if info.status == PAUSED and run.status != RunStatus.SUSPENDED_CLIENT_TOOL:
        return Plan(Path.REFUSE, error=recovering_drop())
    if ask.cursor is None:
        return Plan(Path.REPLAY_LIVE, from_sequence=run.start_sequence)
    ahead = cursor_ahead(ask.cursor, info)
    if ahead is not None:
        return Plan(Path.REFUSE, error=ahead)
    cursor = max(ask.cursor, run.start_sequence)
    return Plan(Path.REPLAY_LIVE, from_sequence=cursor, cursor=cursor)


def plan_ended(
    ask: ResumeAsk, run: RunFacts, info: StreamInfo | None, *, session_id: str, stream_id: str, waited: bool = False
) -> Plan:
    """Decide the resume of a finished run (``ask.cursor`` set) from the stream ``info`` (None: no stream).

    ``waited``: ``info`` was read after waiting for the stream's close (:attr:`Path.WAIT_END`).
    The stream expired or purged: 409 ``stream_expired``; a cursor beyond the head: 409
    ``cursor_ahead``; the run wrote nothing to the stream, or the cursor is at the head of a
    stream not ended: 204; a failed stream: 409 ``stream_failed``; otherwise the chunks after
    the cursor clamped to the run's start (:attr:`Plan.at_head`: none, the ending only).
    """
    assert ask.cursor is not None  # plan_start reads an ended run's stream only for a cursor
    if (
        not waited
        and run.is_terminal
        and info is not None
        and info.run_id == run.id
        and info.status in (ACTIVE, PAUSED)
    ):
        return Plan(Path.WAIT_END)
    if info is None or not info.run_id:  # expired (TTL) or purged: the snapshot still has the conversation
        return Plan(Path.REFUSE, error=NotResumableError(cause="stream_expired"))
    ahead = cursor_ahead(ask.cursor, info)
    if ahead is not None:
        return Plan(Path.REFUSE, error=ahead)
    cursor = max(ask.cursor, run.start_sequence)
    at_head = cursor >= info.head_sequence
    if info.run_id != run.id or (at_head and info.status != ENDED):
        return NOTHING  # the run wrote nothing to the stream, or the client holds all of it
    if info.status == FAILED:
        return Plan(
            Path.REFUSE, error=StreamFailedResponse(session_id=session_id, stream_id=stream_id, error=info.error)
        )
    return Plan(Path.REPLAY_ENDED, from_sequence=cursor, cursor=cursor, at_head=at_head)


def live_replay_is_empty(info: StreamInfo, *, has_visible_backlog: bool) -> bool:
    """Whether a live run's replay read nothing to send from a stream no longer active (it ended or paused)."""
    return info.status != ACTIVE and not has_visible_backlog


def ended_replay_sends(plan: Plan, *, has_visible_backlog: bool, holds_run_end: bool) -> bool:
    """Whether a finished run's replay (:attr:`Path.REPLAY_ENDED`) is sent, else answered 204.

    At the head, the client read every chunk: it holds the ending too if the run's own end is
    among them (``holds_run_end``); a stream ended without it is told from the run (``abort``
    + ``[DONE]`` for a cancelled one), never a 204. Elsewhere: sent where it has a visible chunk.
    """
    if plan.at_head:
        return not holds_run_end
    return has_visible_backlog
