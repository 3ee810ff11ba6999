"""The relaunch scan on runs left in flight (000, "Recovery on app relaunch")."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.core.management import CommandError, call_command

from helix_django.models import Message, Run, ToolExecution
from helix_django.recovery import inventory as inv
from helix_django.recovery.scan import arecover
from helix_django.streams import get_stream_manager
from tests.recovery.factories import InFlight

pytestmark = pytest.mark.django_db(transaction=True)


def scan(**kwargs):
    return async_to_sync(arecover)(**kwargs)


def test_live_lease_is_left_alone():
    flight = InFlight("s-live")
    flight.stream_text("Hello there")
    report = scan()
    assert report.counts == {"scanned": 0}
    assert flight.run.status == "streaming"


def test_expired_run_is_interrupted_with_partial_kept_and_stream_failed():
    flight = InFlight("s-int")
    flight.stream_text("The main difference is")
    flight.expire()
    report = scan()
    assert [(d.run_id, d.outcome, d.reason, d.stage) for d in report.decisions] == [
        (flight.run_id, "interrupted", "process_lost", "streaming")
    ]
    run = flight.run
    assert run.status == "interrupted"
    assert run.interrupted_stage == "streaming"
    assert run.partial_chars == len("The main difference is")
    assert run.error_code == "run_interrupted" and run.error_retryable is True
    assert run.lease_owner == ""
    row = Message.objects.get(session_id="s-int", position=1)
    assert row.text == "The main difference is"
    assert row.metadata["helix"] == {"runId": run.id, "status": "interrupted", "partial": True}
    info = async_to_sync(get_stream_manager().get_info)("s-int")
    assert info.status == "failed"
    assert info.error["code"] == "run_interrupted" and info.error["retryable"] is True
    assert info.error["runId"] == run.id
    last = async_to_sync(get_stream_manager().read_all)("s-int")[-1][1]
    assert last["type"] == "error" and last["helixError"]["code"] == "run_interrupted"


def test_partial_rebuilt_from_last_step_and_later_chunks():
    flight = InFlight("s-step")
    flight.stream_text("Step one.", part_id="a")
    flight.write([{"type": "text-end", "id": "a"}, {"type": "finish-step"}])
    committed = {
        "id": flight.run.response_message_id,
        "role": "assistant",
        "parts": [{"type": "step-start"}, {"type": "text", "text": "Step one.", "state": "done"}],
        "metadata": {},
    }
    flight.commit_step(committed)
    flight.stream_text(" Step two is half", part_id="b", attempt="a2")
    flight.expire()
    scan()
    row = Message.objects.get(session_id="s-step", position=1)
    texts = [p["text"] for p in row.parts if p["type"] == "text"]
    assert texts == ["Step one.", " Step two is half"]
    assert flight.run.partial_chars == len("Step one. Step two is half")


def test_disconnect_before_first_token_keeps_no_row():
    flight = InFlight("s-empty")
    flight.expire()
    Run.objects.filter(pk=flight.run_id).update(status="starting")
    report = scan()
    assert report.decisions[0].stage == "starting"
    assert flight.run.status == "interrupted"
    assert not Message.objects.filter(session_id="s-empty", position=1).exists()
    offers = inv.inventory(flight.run)
    assert offers[inv.REGENERATE].is_available
    assert not offers[inv.CONTINUE].is_available
    assert not offers[inv.KEEP_PARTIAL].is_available


def test_started_tool_becomes_unknown_and_blocks_regenerate_and_continue():
    flight = InFlight("s-tool")
    flight.stream_text("Creating the issue")
    tool = flight.tool("call_1", "create_issue", effect="side_effect", status="started", key="issue:1")
    read = flight.tool("call_2", "search_docs", effect="read_only", status="succeeded", result={"hits": 1})
    flight.expire()
    report = scan()
    assert report.decisions[0].stage == "tooling"
    assert ToolExecution.objects.get(pk=tool.pk).status == "unknown"
    assert ToolExecution.objects.get(pk=read.pk).status == "succeeded"
    offers = inv.inventory(flight.run)
    for action in (inv.REGENERATE, inv.CONTINUE):
        assert not offers[action].is_available
        assert "create_issue" in offers[action].reason and "unknown" in offers[action].reason
    assert offers[inv.KEEP_PARTIAL].is_available


def test_cancel_requested_before_death_stays_cancelled():
    from django.utils import timezone

    flight = InFlight("s-cancel")
    flight.stream_text("Partial answer")
    Run.objects.filter(pk=flight.run_id).update(cancel_requested_at=timezone.now())
    flight.expire()
    report = scan()
    assert report.decisions[0].outcome == "cancelled"
    assert flight.run.status == "cancelled"
    assert scan().counts == {"scanned": 0}
    assert flight.run.status == "cancelled"


def test_finished_output_without_terminal_commit_is_completed():
    flight = InFlight("s-done")
    flight.stream_text("All done.")
    flight.write(
        [{"type": "text-end", "id": "t1"}, {"type": "finish-step"}, {"type": "finish", "finishReason": "stop"}]
    )
    flight.expire()
    report = scan()
    assert (report.decisions[0].outcome, report.decisions[0].reason) == ("completed", "exited_normally")
    run = flight.run
    assert run.status == "completed" and run.partial_chars == 0
    row = Message.objects.get(session_id="s-done", position=1)
    assert row.text == "All done." and row.metadata["helix"]["partial"] is False
    assert async_to_sync(get_stream_manager().get_info)("s-done").status == "ended"


def test_dry_run_changes_nothing_and_command_prints_counts(capsys):
    flight = InFlight("s-dry")
    flight.stream_text("Some text")
    flight.expire()
    call_command("helix_recover", "--dry-run")
    out = capsys.readouterr().out
    assert f"{flight.run_id}: streaming -> would_recover" in out
    assert "[dry run] scanned=1 would_recover=1" in out
    assert flight.run.status == "streaming"
    call_command("helix_recover")
    out = capsys.readouterr().out
    assert "scanned=1 interrupted=1" in out
    assert flight.run.status == "interrupted"


def test_command_errors_are_typed():
    with pytest.raises(CommandError, match="--limit"):
        call_command("helix_recover", "--limit", "0")
    with pytest.raises(CommandError, match="state_run_not_found"):
        call_command("helix_recover", "--run", "run_missing")


def test_a_run_claimed_by_another_scanner_is_left_to_it():
    from helix_django import store

    flight = InFlight("s-claimed")
    flight.stream_text("text")
    flight.expire()
    assert store.claim_lease(flight.run_id, "recovery:other-host:1", 30)  # another scanner took it
    from helix_django.recovery.scan import arecover_run

    decision = async_to_sync(arecover_run)(flight.run_id)
    assert (decision.outcome, decision.reason) == ("skipped", "lease_live")
    assert scan().counts == {"scanned": 0}
    assert flight.run.status == "streaming" and flight.run.lease_owner == "recovery:other-host:1"


def test_second_scan_finds_nothing_and_writes_one_error_chunk():
    flight = InFlight("s-twice")
    flight.stream_text("text")
    flight.expire()
    assert scan().counts == {"scanned": 1, "interrupted": 1}
    assert scan().counts == {"scanned": 0}
    chunks = async_to_sync(get_stream_manager().read_all)("s-twice")
    assert [c["type"] for _s, c in chunks].count("error") == 1


def test_history_edited_before_the_turn_invalidates_continue_but_not_regenerate():
    from helix_django.models import Checkpoint

    flight = InFlight("s-edited")
    flight.stream_text("An answer to the original question")
    flight.expire()
    scan()
    run = flight.run
    assert inv.inventory(run)[inv.CONTINUE].is_available
    # an edit of the user message before the interrupted turn, committed with a newer checkpoint
    edit = Checkpoint.objects.create(session_id="s-edited", kind="step", message_count=2, stream_sequence=0)
    Message.objects.filter(session_id="s-edited", position=0).update(
        parts=[{"type": "text", "text": "An edited question"}], checkpoint_id=edit.id
    )
    offers = inv.inventory(run)
    assert not offers[inv.CONTINUE].is_available
    assert offers[inv.CONTINUE].reason == "The conversation was edited or the provider's continuation state is invalid."
    assert offers[inv.REGENERATE].is_available
    assert inv.invalidate_stale_continuations("s-edited") == 1
    assert flight.run.is_continuation_valid is False
