"""The resume planner, table-tested without servers or a database: one row per seed path.

Each row gives what the reads returned (the run's facts, the stream's info) and what the
request asked (cursor, replay prefix, message id), and the plan the planner must return.
Row ids name the section of seed 002 (or docs/transport.md, "Cursors") each rule comes from.
"""

from __future__ import annotations

import pytest

from helix_django.errors import NotResumableError, StreamDropError
from helix_django.streams.base import ACTIVE, ENDED, FAILED, PAUSED, StreamInfo
from helix_django.transport.planner import (
    Path,
    Plan,
    ResumeAsk,
    RunFacts,
    StreamFailedResponse,
    ended_replay_sends,
    live_replay_is_empty,
    plan_ended,
    plan_live,
    plan_start,
)

RUN = "run_current"
OTHER_RUN = "run_other"
START = 10
"""The current run's start sequence: the stream's sequence before its first chunk."""


def live(kind: str = "send", status: str = "running") -> RunFacts:
    return RunFacts(RUN, status, kind, START, "msg_resp", is_live=True, is_terminal=False)


def ended(status: str = "completed", kind: str = "send") -> RunFacts:
    return RunFacts(RUN, status, kind, START, "msg_resp", is_live=False, is_terminal=True)


def info(status: str, head: int, run_id: str = RUN, error: dict | None = None) -> StreamInfo:
    return StreamInfo("sess", status, head, run_id, error=error)


START_ROWS = [
    pytest.param(ResumeAsk(), None, Plan(Path.NOTHING), id="002 How handleChatStream resumes: no run, 204"),
    pytest.param(
        ResumeAsk(replay_prefix=True, existing_message_id="msg_old"),
        None,
        Plan(Path.PREFIX, message_id="msg_old"),
        id="002 C-1: a replay prefix is planned even before any run",
    ),
    pytest.param(
        ResumeAsk(cursor=12, replay_prefix=True, existing_message_id="msg_old"),
        live(),
        Plan(Path.PREFIX, message_id="msg_old"),
        id="002 C-1: the replay prefix wins over a cursor",
    ),
    pytest.param(
        ResumeAsk(replay_prefix=True),
        None,
        Plan(Path.NOTHING),
        id="002 C-1: a replay prefix without a message id is no prefix",
    ),
    pytest.param(
        ResumeAsk(), live(), Plan(Path.WAIT_LIVE), id="002 How handleChatStream resumes: path 5, attach to a live run"
    ),
    pytest.param(
        ResumeAsk(cursor=3),
        live(),
        Plan(Path.WAIT_LIVE),
        id="002 The run-start window: a live run is waited for before its stream is read",
    ),
    pytest.param(
        ResumeAsk(),
        live(kind="tool_result"),
        Plan(Path.PREFIX, message_id="msg_resp"),
        id="002 C-1: a live continuation without cursor rebuilds its whole message",
    ),
    pytest.param(
        ResumeAsk(),
        live(kind="continue"),
        Plan(Path.PREFIX, message_id="msg_resp"),
        id="002 C-1: a live continue without cursor rebuilds its whole message",
    ),
    pytest.param(
        ResumeAsk(cursor=12),
        live(kind="tool_result"),
        Plan(Path.WAIT_LIVE),
        id="002 How handleChatStream resumes: a continuation with a cursor resumes from it",
    ),
    pytest.param(
        ResumeAsk(), ended(), Plan(Path.NOTHING), id="Cursors: none, finished run, 204 (the snapshot holds it)"
    ),
    pytest.param(
        ResumeAsk(cursor=12),
        ended(),
        Plan(Path.READ_ENDED),
        id="002 How handleChatStream resumes: path 6, a finished run is replayed from the stream",
    ),
]


@pytest.mark.parametrize(("ask", "run", "expected"), START_ROWS)
def test_the_first_decision_needs_no_stream_read(ask, run, expected):
    assert plan_start(ask, run) == expected


LIVE_ROWS = [
    pytest.param(
        ResumeAsk(),
        live(),
        info(ACTIVE, 30),
        Plan(Path.REPLAY_LIVE, from_sequence=START),
        id="Cursors: none, live run, replayed from its start",
    ),
    pytest.param(
        ResumeAsk(cursor=20),
        live(),
        info(ACTIVE, 30),
        Plan(Path.REPLAY_LIVE, from_sequence=20, cursor=20),
        id="Cursors: inside the live run, the chunks after it",
    ),
    pytest.param(
        ResumeAsk(cursor=30),
        live(),
        info(ACTIVE, 30),
        Plan(Path.REPLAY_LIVE, from_sequence=30, cursor=30),
        id="Cursors: at the head of a live run, a stream that waits",
    ),
    pytest.param(
        ResumeAsk(cursor=4),
        live(),
        info(ACTIVE, 30),
        Plan(Path.REPLAY_LIVE, from_sequence=START, cursor=START),
        id="002 How handleChatStream resumes: a stale cursor is clamped to the run's start",
    ),
    pytest.param(
        ResumeAsk(cursor=20),
        live(status="suspended_client_tool"),
        info(PAUSED, 30),
        Plan(Path.REPLAY_LIVE, from_sequence=20, cursor=20),
        id="002 Tool results for a call in an earlier message: a run paused for the browser is replayed",
    ),
]


@pytest.mark.parametrize(("ask", "run", "stream", "expected"), LIVE_ROWS)
def test_a_live_runs_replay_starts_where_the_cursor_says(ask, run, stream, expected):
    assert plan_live(ask, run, stream) == expected


def test_cursors_beyond_a_live_runs_head_are_cursor_ahead():
    """Cursors: beyond the head (live), 409 state_not_resumable / cursor_ahead + headSequence."""
    plan = plan_live(ResumeAsk(cursor=31), live(), info(ACTIVE, 30))
    assert plan.path is Path.REFUSE
    assert isinstance(plan.error, NotResumableError)
    assert plan.status == 409
    assert plan.error.to_body()["cause"] == "cursor_ahead"
    assert plan.error.to_body()["headSequence"] == 30


@pytest.mark.parametrize("cursor", [None, 20], ids=["no cursor", "a cursor"])
def test_endings_a_stream_fenced_by_a_recovery_is_a_retryable_drop(cursor):
    """docs/transport.md Endings: a fence still standing, 503 transport_stream_drop / run_recovering."""
    plan = plan_live(ResumeAsk(cursor=cursor), live(), info(PAUSED, 30))
    assert plan.path is Path.REFUSE
    assert isinstance(plan.error, StreamDropError)
    assert plan.status == 503
    assert plan.error.to_body()["cause"] == "run_recovering"


ENDED_ROWS = [
    pytest.param(
        ResumeAsk(cursor=20),
        ended(),
        info(ENDED, 30),
        Plan(Path.REPLAY_ENDED, from_sequence=20, cursor=20),
        id="Cursors: inside a finished run, the rest then its ending",
    ),
    pytest.param(
        ResumeAsk(cursor=3),
        ended(),
        info(ENDED, 30),
        Plan(Path.REPLAY_ENDED, from_sequence=START, cursor=START),
        id="Cursors: below the current run's start, the current run replayed whole",
    ),
    pytest.param(
        ResumeAsk(cursor=30),
        ended(),
        info(ENDED, 30),
        Plan(Path.REPLAY_ENDED, from_sequence=30, cursor=30, at_head=True),
        id="Cursors: at a finished run's end, its ending is checked for (204 when held)",
    ),
    pytest.param(
        ResumeAsk(cursor=20),
        ended(),
        info(ENDED, 30, run_id=OTHER_RUN),
        Plan(Path.NOTHING),
        id="002 How handleChatStream resumes: the run wrote nothing to the stream, 204",
    ),
    pytest.param(
        ResumeAsk(cursor=20),
        ended(status="cancelled"),
        info(ACTIVE, 30),
        Plan(Path.WAIT_END),
        id="002 Resync: a run ended elsewhere is waited for until its stream closes",
    ),
    pytest.param(
        ResumeAsk(cursor=20),
        ended(status="cancelled"),
        info(PAUSED, 30, run_id=OTHER_RUN),
        Plan(Path.NOTHING),
        id="002 Resync: another run's open stream is not waited for",
    ),
]


@pytest.mark.parametrize(("ask", "run", "stream", "expected"), ENDED_ROWS)
def test_a_finished_runs_resume(ask, run, stream, expected):
    assert plan_ended(ask, run, stream, session_id="sess", stream_id="sess") == expected


def test_a_stream_still_open_after_the_wait_is_answered_from_what_it_holds():
    """002 Resync: the wait is bounded; a stream still open after it is planned as it stands."""
    plan = plan_ended(
        ResumeAsk(cursor=20), ended(status="cancelled"), info(ACTIVE, 30), session_id="s", stream_id="s", waited=True
    )
    assert plan == Plan(Path.REPLAY_ENDED, from_sequence=20, cursor=20)


def test_at_the_head_of_a_stream_still_open_after_the_wait_the_client_holds_everything():
    """Cursors: at the head of a stream not ended (its close failed), 204."""
    plan = plan_ended(
        ResumeAsk(cursor=30), ended(status="cancelled"), info(PAUSED, 30), session_id="s", stream_id="s", waited=True
    )
    assert plan == Plan(Path.NOTHING)


@pytest.mark.parametrize(
    "stream",
    [None, info(ENDED, 30, run_id="")],
    ids=["Cursors: finished run, its stream expired, stream_expired", "Cursors: its stream purged, stream_expired"],
)
def test_a_finished_runs_missing_stream_is_stream_expired(stream):
    plan = plan_ended(ResumeAsk(cursor=20), ended(), stream, session_id="s", stream_id="s")
    assert plan.path is Path.REFUSE
    assert isinstance(plan.error, NotResumableError)
    assert plan.status == 409
    assert plan.error.to_body()["cause"] == "stream_expired"


def test_cursors_beyond_a_finished_runs_head_are_cursor_ahead():
    """Cursors: beyond the head (finished), 409 cursor_ahead + headSequence."""
    plan = plan_ended(ResumeAsk(cursor=31), ended(), info(ENDED, 30), session_id="s", stream_id="s")
    assert isinstance(plan.error, NotResumableError)
    assert plan.error.to_body()["headSequence"] == 30


def test_wire_errors_a_failed_stream_is_stream_failed_with_the_runs_code():
    """002 Wire errors, chat resume: 409 stream_failed with the run's code, sessionId and streamId."""
    failed = info(FAILED, 30, error={"code": "run_interrupted", "retryable": True})
    plan = plan_ended(ResumeAsk(cursor=20), ended(status="failed"), failed, session_id="sess", stream_id="sess")
    assert plan.path is Path.REFUSE
    assert isinstance(plan.error, StreamFailedResponse)
    assert plan.status == 409
    body = plan.error.to_body()
    assert (body["error"], body["code"], body["retryable"], body["sessionId"]) == (
        "stream_failed",
        "run_interrupted",
        True,
        "sess",
    )


@pytest.mark.parametrize(
    ("status", "has_visible_backlog", "empty"),
    [
        (ACTIVE, False, False),
        (ENDED, False, True),
        (PAUSED, False, True),
        (ENDED, True, False),
    ],
    ids=[
        "Cursors: at the head of a live run, the stream waits",
        "002 Resync: ended since read live, planned again",
        "002 Tool results for a call in an earlier message: paused with nothing after the cursor, 204",
        "Cursors: ended with a backlog, sent",
    ],
)
def test_a_live_replay_read_nothing_only_from_a_stream_no_longer_active(status, has_visible_backlog, empty):
    assert live_replay_is_empty(info(status, 30), has_visible_backlog=has_visible_backlog) is empty


@pytest.mark.parametrize(
    ("at_head", "has_visible_backlog", "holds_run_end", "sends"),
    [
        (False, True, False, True),
        (False, False, False, False),
        (True, False, True, False),
        (True, False, False, True),
    ],
    ids=[
        "Cursors: inside a finished run, the rest is sent",
        "Cursors: inside a finished run with nothing visible left, 204",
        "Cursors: at a finished run's end holding its ending, 204",
        "docs/transport.md Endings: a stream ended without the run's end is told from the run",
    ],
)
def test_a_finished_runs_replay_is_sent_or_204(at_head, has_visible_backlog, holds_run_end, sends):
    plan = Plan(Path.REPLAY_ENDED, from_sequence=20, cursor=20, at_head=at_head)
    assert ended_replay_sends(plan, has_visible_backlog=has_visible_backlog, holds_run_end=holds_run_end) is sends
