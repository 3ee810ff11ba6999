"""Snapshots: status table, fenced passes, deadline, missing session (002, "Snapshots")."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from helix_django import snapshot as snapshot_module
from helix_django import store
from helix_django.errors import HistoryIncompleteError, ProviderError, ValidationError
from helix_django.models import Run, RunStatus
from helix_django.snapshot import abuild_snapshot, derive_status
from helix_django.streams import get_stream_manager
from helix_django.streams.base import StreamInfo

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


def info(status: str) -> StreamInfo:
    return StreamInfo("s", status, 10, "run_x", 1)


@pytest.mark.parametrize(
    ("run_status", "stream_status", "expected"),
    [
        (RunStatus.STARTING, None, "active"),
        (RunStatus.STARTING, "ended", "active"),
        (RunStatus.STARTING, "failed", "active"),
        (RunStatus.STREAMING, "active", "active"),
        (RunStatus.TOOLING, "active", "active"),
        (RunStatus.RECOVERING, "active", "active"),
        (RunStatus.STREAMING, "paused", "paused"),
        (RunStatus.SUSPENDED_CLIENT_TOOL, "paused", "paused"),
        (RunStatus.SUSPENDED_CLIENT_TOOL, "active", "paused"),
        (RunStatus.FAILED, "failed", "failed"),
        (RunStatus.INTERRUPTED, "failed", "failed"),
        (RunStatus.COMPLETED, "ended", "ended"),
        (RunStatus.COMPLETED, "active", "ended"),
        (RunStatus.SUPERSEDED, "active", "ended"),
        (RunStatus.CANCELLED, "ended", "ended"),
        (None, None, "ended"),
        (None, "failed", "failed"),
    ],
)
async def test_status_table(run_status, stream_status, expected):
    run = Run(id="run_x", status=run_status) if run_status else None
    assert derive_status(run, info(stream_status) if stream_status else None) == expected


def user(text, mid):
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]}


def answer(mid, text):
    return {"id": mid, "role": "assistant", "parts": [{"type": "text", "text": text, "state": "done"}]}


async def live_session(text="hello"):
    await store.aget_or_create_session("s1")
    manager = get_stream_manager()
    result = await store.astart_run(store.RunStartRequest(session_id="s1", input_messages=[user(text, "u1")]))
    run = result.run
    await manager.claim_stream("s1", run.id, epoch=result.checkpoint.id)
    seqs = await manager.append("s1", run.id, [{"type": "start", "messageId": run.response_message_id}])
    return manager, run, seqs[-1]


async def test_missing_session_is_none():
    assert await abuild_snapshot("nope") is None


async def test_live_run_in_start_window_is_active_with_input_cursor():
    await store.aget_or_create_session("s1")
    result = await store.astart_run(store.RunStartRequest(session_id="s1", input_messages=[user("hi", "u1")]))
    snap = await abuild_snapshot("s1")
    assert snap["status"] == "active"
    assert snap["streamSequence"] == 0
    assert snap["resumeMessageId"] == result.run.response_message_id
    assert [m["id"] for m in snap["messages"]] == ["u1"]
    assert snap["checkpointId"] == result.checkpoint.id
    assert snap["latestTruncateCheckpointId"] is None
    assert "errorDetail" not in snap


async def test_snapshot_after_step_and_failure():
    manager, run, seq = await live_session()
    await store.acommit_step(
        run.id, response_message=answer(run.response_message_id, "part"), stream_sequence=seq, step_count=1
    )
    snap = await abuild_snapshot("s1")
    assert snap["status"] == "active"
    assert snap["streamSequence"] == seq
    assert snap["stepCount"] == 1
    assert snap["messages"][-1]["parts"][0]["text"] == "part"
    await store.acommit_terminal(
        run.id,
        "failed",
        response_message=answer(run.response_message_id, "part"),
        stream_sequence=seq,
        error=ProviderError(),
    )
    await manager.fail_stream("s1", run.id, ProviderError().to_body())
    snap = await abuild_snapshot("s1")
    assert snap["status"] == "failed"
    assert "resumeMessageId" not in snap
    assert snap["errorDetail"] == {
        "code": "provider_error",
        "category": "provider",
        "retryable": False,
        "message": "The model provider failed",
    }
    assert snap["messages"][-1]["metadata"]["helix"]["partial"] is True
    assert snap["runStatus"] == "failed"


async def test_an_append_landing_mid_read_does_not_change_the_view(monkeypatch):
    manager, run, seq = await live_session()
    original = snapshot_module._read_body

    def read_body_then_append(session_id):
        result = original(session_id)
        # The default (database) manager's own write path, run in the same thread as the read.
        manager._append_sync("s1", run.id, [{"type": "text-start", "id": "t"}])
        return result

    monkeypatch.setattr(snapshot_module, "_read_body", read_body_then_append)
    snap = await abuild_snapshot("s1")
    assert snap["streamSequence"] == 0
    assert [m["id"] for m in snap["messages"]] == ["u1"]
    assert (await manager.get_info("s1")).head_sequence == seq + 1


async def test_a_step_commit_landing_mid_read_is_not_mixed_in(monkeypatch):
    manager, run, seq = await live_session()
    await store.acommit_step(
        run.id, response_message=answer(run.response_message_id, "one"), stream_sequence=seq, step_count=1
    )
    original = snapshot_module._read_body
    calls = []

    def read_body_with_commit(session_id):
        checkpoint, rows = original(session_id)
        if not calls:
            calls.append(1)
            store.commit_step(
                run.id,
                response_message=answer(run.response_message_id, "one two"),
                stream_sequence=seq + 5,
                step_count=2,
            )
            # Rows read after the commit, checkpoint read before it: the row is newer than the checkpoint.
            _newer_checkpoint, rows = original(session_id)
        return checkpoint, rows

    monkeypatch.setattr(snapshot_module, "_read_body", read_body_with_commit)
    snap = await abuild_snapshot("s1")
    assert calls == [1]
    assert snap["stepCount"] == 2
    assert snap["streamSequence"] == seq + 5
    assert snap["messages"][-1]["parts"][0]["text"] == "one two"


async def test_an_unstable_tuple_three_times_raises_retryable(monkeypatch):
    await live_session()
    original = snapshot_module._read_body
    passes = []

    def read_body_and_supersede(session_id):
        passes.append(1)
        store.start_run(
            store.RunStartRequest(session_id="s1", input_messages=[], supersede_live=True, kind="regenerate")
        )
        return original(session_id)

    monkeypatch.setattr(snapshot_module, "_read_body", read_body_and_supersede)
    with pytest.raises(HistoryIncompleteError) as excinfo:
        await abuild_snapshot("s1")
    assert len(passes) == 3
    assert excinfo.value.cause == "snapshot_unstable"
    assert excinfo.value.is_retryable
    assert excinfo.value.status == 503


async def test_the_deadline_bounds_the_whole_read(monkeypatch):
    await live_session()
    original = snapshot_module._read_body

    def slow(session_id):
        import time

        time.sleep(2.5)
        return original(session_id)

    monkeypatch.setattr(snapshot_module, "_read_body", slow)
    with pytest.raises(HistoryIncompleteError) as excinfo:
        await abuild_snapshot("s1", deadline_ms=2000)
    assert excinfo.value.cause == "snapshot_unstable"
    assert "deadline@getCurrentRun" in excinfo.value.message
    assert (await abuild_snapshot("s1", deadline_ms=float("inf")))["status"] == "active"


@pytest.mark.parametrize("bad", [-1, 2_147_483_648, float("-inf")])
async def test_deadline_outside_range_is_a_validation_error(bad):
    await store.aget_or_create_session("s1")
    with pytest.raises(ValidationError):
        await abuild_snapshot("s1", deadline_ms=bad)


async def test_corrupt_rows_are_typed(monkeypatch):
    await live_session()
    await sync_to_async(
        lambda: (
            __import__("helix_django.models", fromlist=["Message"])
            .Message.objects.filter(ui_id="u1")
            .update(position=None)
        )
    )()
    with pytest.raises(HistoryIncompleteError) as excinfo:
        await abuild_snapshot("s1")
    assert excinfo.value.cause == "short_read"
