"""Provider failures, drops, retried attempts and cancellation."""

from __future__ import annotations

import asyncio

import pytest

from helix_django.models import Run
from helix_django.protocol import CONTENT_TYPES
from helix_django.runtime.providers.scripted import default_reply, tokenize
from helix_django.snapshot import abuild_snapshot
from helix_django.streams import get_stream_manager
from tests.runtime import toolbox
from tests.runtime.conftest import accumulate, agent, rows, run_chunks, stream_chunks, text, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

QUESTION = "Explain partial output please"


async def test_provider_failure_after_40_percent_keeps_partial_text_flagged(executor, session, use_agents):
    use_agents(default=agent({"FAIL_AT_FRACTION": 0.4}))
    handle = await executor.execute(session, [user_message(QUESTION)])
    assert await executor.wait(handle.run_id, 20) == "failed"

    tokens = tokenize(default_reply(QUESTION))
    expected = "".join(tokens[: int(len(tokens) * 0.4)])
    run = await Run.objects.aget(pk=handle.run_id)
    assert run.status == "failed"
    assert (run.error_code, run.error_category, run.error_retryable) == ("provider_error", "provider", False)
    assert run.error_message == "The model provider failed"
    assert run.partial_chars == len(expected) and run.interrupted_stage == "streaming"

    reply = (await rows(session.id))[1]
    assert text(reply) == expected and 0 < len(expected) < len(default_reply(QUESTION))
    assert reply["metadata"]["helix"] == {"runId": run.id, "status": "failed", "partial": True}
    chunks = run_chunks(await stream_chunks(session.id), run.id)
    assert reply == accumulate(chunks, run.response_message_id)
    assert [c["type"] for c in chunks][-3:] == ["text-end", "message-metadata", "helix-run-end"]
    assert chunks[-1]["status"] == "failed"

    info = await get_stream_manager().get_info(session.stream_id)
    assert info.status == "failed" and info.error["code"] == "provider_error"
    all_chunks = await stream_chunks(session.id)
    assert all_chunks[-1][1]["type"] == "error"

    snapshot = await abuild_snapshot(session.id)
    assert snapshot["status"] == "failed" and snapshot["runStatus"] == "failed"
    assert snapshot["errorDetail"] == {
        "code": "provider_error",
        "category": "provider",
        "retryable": False,
        "message": "The model provider failed",
    }
    assert snapshot["messages"][1]["metadata"]["helix"]["partial"] is True


async def test_partial_output_is_left_out_of_the_next_model_context(executor, session, use_agents):
    toolbox.RecordingProvider.requests = []
    recording = {"BACKEND": f"{toolbox.PATH}.RecordingProvider", "OPTIONS": {"FAIL_AT_FRACTION": 0.5}}
    use_agents(default={**agent(), "PROVIDER": recording})
    failed = await executor.execute(session, [user_message("first")])
    await executor.wait(failed.run_id, 20)
    use_agents(default={**agent(), "PROVIDER": {**recording, "OPTIONS": {}}})
    second = await executor.execute(session, [user_message("second")])
    assert await executor.wait(second.run_id, 20) == "completed"
    assert toolbox.RecordingProvider.requests[-1].messages == [
        {"role": "user", "content": "first"},
        {"role": "user", "content": "second"},
    ]
    assert len(await rows(session.id)) == 4  # the partial answer is still kept


async def test_a_dropped_stream_interrupts_the_run(executor, session, use_agents):
    use_agents(default=agent({"DROP_AFTER_CHUNKS": 5}))
    handle = await executor.execute(session, [user_message(QUESTION)])
    assert await executor.wait(handle.run_id, 20) == "interrupted"
    run = await Run.objects.aget(pk=handle.run_id)
    assert (run.status, run.error_code, run.error_retryable) == ("interrupted", "run_interrupted", True)
    reply = (await rows(session.id))[1]
    assert text(reply) == "".join(tokenize(default_reply(QUESTION))[:5])
    assert reply["metadata"]["helix"]["status"] == "interrupted"
    snapshot = await abuild_snapshot(session.id)
    assert snapshot["status"] == "failed" and snapshot["errorDetail"]["code"] == "run_interrupted"


async def test_retried_attempt_gets_a_new_id_and_supersedes_the_first(executor, session, use_agents):
    options = {"FAIL_AFTER_CHUNKS": 4, "FAIL_RETRYABLE": True, "FAIL_ATTEMPTS": 1}
    use_agents(default=agent(options, MAX_ATTEMPTS=2))
    handle = await executor.execute(session, [user_message(QUESTION)])
    assert await executor.wait(handle.run_id, 20) == "completed"
    chunks = run_chunks(await stream_chunks(session.id), handle.run_id)
    starts = [c for c in chunks if c["type"] == "start-step"]
    assert len(starts) == 2 and starts[0]["_attempt"] != starts[1]["_attempt"]
    marker = next(c for c in chunks if c["type"] == "data-attempt-superseded")
    assert marker["data"] == {
        "reason": "attempt_superseded",
        "runId": handle.run_id,
        "agentId": "default",
        "step": 1,
        "attemptId": starts[1]["_attempt"],
        "supersededAttemptId": starts[0]["_attempt"],
    }
    committed = next(c for c in chunks if c["type"] == "helix-step-committed")
    assert committed["committedAttemptId"] == starts[1]["_attempt"]
    reply = (await rows(session.id))[1]
    assert text(reply) == default_reply(QUESTION)  # the superseded attempt's 4 tokens are gone
    # A replay drops the superseded attempt's content, and then builds the committed message.
    superseded = starts[0]["_attempt"]
    replay = [c for c in chunks if not (c.get("_attempt") == superseded and c["type"] in CONTENT_TYPES)]
    assert reply == accumulate(replay, handle.response_message_id)


async def test_cancel_during_streaming_is_cancelled_not_failed_and_never_resumed(executor, session, use_agents):
    # Slow enough that the cancel lands mid-answer, even on a loaded machine.
    use_agents(default=agent({"PACE_TPS": 10}))
    handle = await executor.execute(session, [user_message(QUESTION)])
    reader = await get_stream_manager().create_resumable_reader(session.stream_id, from_sequence=0)
    deltas = 0
    async for _seq, chunk in reader:
        deltas += chunk["type"] == "text-delta"
        if deltas == 3:
            break
    await reader.close()
    run = await executor.cancel(session=session, run_id=handle.run_id)
    assert run.status == "cancelled" and run.cancel_requested_at is not None
    assert run.error_code == "" and run.provider_cancel_result == ""  # no durable operation to cancel
    reply = (await rows(session.id))[1]
    assert reply["metadata"]["helix"] == {
        "runId": run.id,
        "status": "cancelled",
        "partial": True,
        "cancelledBy": "user",
    }
    assert 3 <= len(tokenize(text(reply))) < len(tokenize(default_reply(QUESTION)))

    info = await get_stream_manager().get_info(session.stream_id)
    assert (info.status, info.end_status) == ("ended", "cancelled")
    chunks = run_chunks(await stream_chunks(session.id), run.id)
    assert {k: v for k, v in chunks[-1].items() if k != "_at"} == {
        "type": "helix-run-end",
        "status": "cancelled",
        "_run": run.id,
        "_step": 1,
    }
    assert not any(c["type"] == "error" for _s, c in await stream_chunks(session.id))
    snapshot = await abuild_snapshot(session.id)
    assert snapshot["status"] == "ended" and snapshot["runStatus"] == "cancelled"
    assert snapshot["cancelledBy"] == "user"  # the owner's cancel (issue 17: who stopped it)
    assert "errorDetail" not in snapshot

    # Nothing resumes it: the relaunch scan leaves it alone, no task runs it, a second cancel is a no-op.
    from helix_django.recovery.scan import arecover

    await arecover()
    await asyncio.sleep(0.3)
    assert not executor.is_local(run.id)
    assert (await Run.objects.aget(pk=run.id)).status == "cancelled"
    assert await Run.objects.filter(session_id=session.id).acount() == 1
    assert (await executor.cancel(session=session, run_id=run.id)).status == "cancelled"


async def test_cancel_stops_a_hanging_provider(executor, session, use_agents):
    use_agents(default=agent({"HANG_AFTER_CHUNKS": 2}))
    handle = await executor.execute(session, [user_message(QUESTION)])
    await asyncio.sleep(0.2)
    assert executor.is_local(handle.run_id)
    run = await asyncio.wait_for(executor.cancel(session=session, run_id=handle.run_id), 10)
    assert run.status == "cancelled"
    assert text((await rows(session.id))[1]) == "".join(tokenize(default_reply(QUESTION))[:2])


async def test_a_provider_that_stops_sending_counts_as_a_drop(executor, session, use_agents):
    use_agents(default=agent({"HANG_AFTER_CHUNKS": 3}, IDLE_TIMEOUT_SECONDS=0.3))
    handle = await executor.execute(session, [user_message(QUESTION)])
    assert await executor.wait(handle.run_id, 10) == "interrupted"
    run = await Run.objects.aget(pk=handle.run_id)
    assert (run.error_code, run.interrupted_stage) == ("run_interrupted", "streaming")
    assert text((await rows(session.id))[1]) == "".join(tokenize(default_reply(QUESTION))[:3])
