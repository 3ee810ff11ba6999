"""``manage.py helix_purge``: the RETENTION policy removes only what ended, counts it, never touches live runs."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.utils import timezone

from helix_django import store
from helix_django.models import ChatSession, Checkpoint, Message, Run, ToolExecution
from helix_django.retention import purge
from helix_django.snapshot import build_snapshot
from helix_django.streams import get_stream_manager
from tests.recovery.factories import InFlight

pytestmark = pytest.mark.django_db(transaction=True)


def finished(session_id: str, *, text: str = "A finished answer", age: timedelta = timedelta(0)) -> InFlight:
    """A session whose current run completed (terminal checkpoint, stream ended), last active ``age`` ago."""
    flight = InFlight(session_id)
    flight.stream_text(text)
    run = flight.run
    message = {"id": run.response_message_id, "role": "assistant", "parts": [{"type": "text", "text": text}]}
    store.commit_terminal(flight.run_id, "completed", response_message=message, stream_sequence=flight.sequence)
    async_to_sync(get_stream_manager().end_stream)(session_id, flight.run_id)
    then = timezone.now() - age
    ChatSession.objects.filter(pk=session_id).update(updated_at=then)
    Run.objects.filter(pk=flight.run_id).update(finished_at=then)
    return flight


def chunks(session_id: str) -> int:
    return len(async_to_sync(get_stream_manager().read_all)(session_id))


def retention(settings, **policy) -> None:
    settings.HELIX = {**getattr(settings, "HELIX", {}), "RETENTION": policy}


def test_chunks_of_ended_idle_sessions_are_purged_and_counted(settings):
    retention(settings, CHUNKS_AFTER_HOURS=24)
    old = finished("s-old", age=timedelta(days=2))
    finished("s-recent", age=timedelta(hours=1))
    live = InFlight("s-live")
    live.stream_text("still writing")
    ChatSession.objects.filter(pk="s-live").update(updated_at=timezone.now() - timedelta(days=3))
    before = {sid: chunks(sid) for sid in ("s-old", "s-recent", "s-live")}
    assert all(before.values())

    dry = purge(dry_run=True)
    assert (dry.streams, dry.sessions, dry.runs) == (1, 0, 0)
    assert chunks("s-old") == before["s-old"]
    report = purge()
    assert report.streams == 1
    assert {sid: chunks(sid) for sid in before} == {**before, "s-old": 0}
    snapshot = build_snapshot("s-old")
    assert [m["parts"][0]["text"] for m in snapshot["messages"]][-1] == "A finished answer"
    assert purge().streams == 0  # a purged stream is not counted again
    assert Run.objects.get(pk=old.run_id).status == "completed"


def test_old_ended_runs_go_and_the_conversation_rows_they_wrote_stay(settings):
    retention(settings, CHUNKS_AFTER_HOURS=None, RUNS={"completed": {"AFTER_DAYS": 30, "KEEP_MESSAGES": True}})
    first = finished("s-turns", text="first answer", age=timedelta(days=40))
    ToolExecution.objects.create(
        run_id=first.run_id, tool_call_id="call_1", name="lookup", arguments={}, effect="read_only", status="succeeded"
    )
    second = finished("s-turns", text="second answer", age=timedelta(days=40))
    assert first.run_id != second.run_id
    latest = Checkpoint.objects.filter(session_id="s-turns").order_by("-id").first()

    report = purge()
    assert (report.runs, report.tool_executions, report.sessions) == (1, 1, 0)
    assert report.checkpoints >= 1
    assert not Run.objects.filter(pk=first.run_id).exists()
    assert not ToolExecution.objects.filter(run_id=first.run_id).exists()
    assert Run.objects.filter(pk=second.run_id).exists()  # the current run stays
    assert Checkpoint.objects.filter(pk=latest.pk).exists()
    texts = [m["parts"][0]["text"] for m in build_snapshot("s-turns")["messages"] if m["role"] == "assistant"]
    assert texts[-1] == "second answer"
    assert purge().runs == 0


def test_whole_conversations_go_when_messages_are_not_kept(settings):
    retention(settings, CHUNKS_AFTER_HOURS=48, RUNS={"completed": {"AFTER_DAYS": 7, "KEEP_MESSAGES": False}})
    finished("s-gone", age=timedelta(days=8))
    finished("s-stays", age=timedelta(days=1))
    rows = Message.objects.filter(session_id="s-gone").count()
    dry = purge(dry_run=True)
    report = purge()
    assert dry.lines() == [line.replace("purged", "would purge") for line in report.lines()]
    assert (report.sessions, report.runs, report.messages) == (1, 1, rows)
    assert not ChatSession.objects.filter(pk="s-gone").exists()
    assert chunks("s-gone") == 0  # the stream manager purged the deleted session's stream
    assert ChatSession.objects.filter(pk="s-stays").exists() and chunks("s-stays") > 0


def test_batches_walk_every_candidate_and_the_command_prints_counts(settings):
    retention(settings, CHUNKS_AFTER_HOURS=1, BATCH_SIZE=2)
    for i in range(5):
        finished(f"s-batch-{i}", age=timedelta(hours=5))
    out = StringIO()
    call_command("helix_purge", "--dry-run", stdout=out)
    assert "would purge streams: 5" in out.getvalue()
    assert all(chunks(f"s-batch-{i}") for i in range(5))
    out = StringIO()
    call_command("helix_purge", stdout=out)
    assert out.getvalue().splitlines() == [
        "purged streams: 5",
        "purged sessions: 0",
        "purged runs: 0",
        "purged tool executions: 0",
        "purged checkpoints: 0",
        "purged messages: 0",
    ]
    assert not any(chunks(f"s-batch-{i}") for i in range(5))
