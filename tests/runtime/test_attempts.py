"""Regenerate (a new attempt from the last safe checkpoint) and Continue."""

from __future__ import annotations

import pytest

from helix_django.errors import AlreadyRunningError, RunNotActionableError
from helix_django.models import Checkpoint, Message, Run
from helix_django.runtime.context import CONTINUE_INSTRUCTION
from helix_django.snapshot import abuild_snapshot
from tests.runtime import toolbox
from tests.runtime.conftest import accumulate, agent, rows, run_chunks, stream_chunks, text, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


async def test_regenerate_creates_attempt_2_and_keeps_attempt_1(executor, session, use_agents):
    use_agents(default=agent({"TEXT": "First answer."}))
    first = await executor.execute(session, [user_message("Question?", "u-q")])
    await executor.wait(first.run_id, 10)
    first_reply = (await rows(session.id))[1]

    use_agents(default=agent({"TEXT": "Second answer."}))
    second = await executor.regenerate(session=session)
    assert await executor.wait(second.run_id, 10) == "completed"
    assert second.response_message_id != first.response_message_id

    runs = [r async for r in Run.objects.filter(session_id=session.id).order_by("created_at")]
    assert [(r.attempt, r.kind, r.turn_message_id, r.status) for r in runs] == [
        (1, "send", "u-q", "completed"),
        (2, "regenerate", "u-q", "completed"),
    ]
    # Attempt 1's answer stays auditable: archived, not deleted.
    archived = await Message.objects.aget(session_id=session.id, ui_id=first.response_message_id)
    assert archived.position is None and archived.archived_at is not None
    assert archived.to_ui_message() == first_reply
    messages = await rows(session.id)
    assert [m["id"] for m in messages] == ["u-q", second.response_message_id]
    assert text(messages[1]) == "Second answer."

    truncate = await Checkpoint.objects.aget(session_id=session.id, kind="truncate")
    run_start = await Checkpoint.objects.aget(run_id=second.run_id, kind="run_start")
    assert (truncate.message_count, run_start.message_count) == (1, 1)
    chunks = run_chunks(await stream_chunks(session.id), second.run_id)
    assert [c["type"] for c in chunks][:4] == ["helix-run-start", "start", "data-stream-resync", "start-step"]
    assert chunks[0]["kind"] == "regenerate" and chunks[0]["attempt"] == 2
    resyncs = [c for c in chunks if c["type"] == "data-stream-resync"]
    assert len(resyncs) == 1
    assert resyncs[0]["data"] == {
        "checkpointId": run_start.id,
        "stepCount": 0,
        "messageCount": 1,
        "fromSequence": second.from_sequence,
        "reason": "retry",
        "runId": second.run_id,
        "truncateCheckpointId": truncate.id,
    }
    assert messages[1] == accumulate(chunks, second.response_message_id)
    snapshot = await abuild_snapshot(session.id)
    assert snapshot["latestTruncateCheckpointId"] == truncate.id
    assert snapshot["messages"] == messages


async def test_regenerate_is_refused_while_a_run_executes(executor, session, use_agents):
    use_agents(default=agent({"PACE_TPS": 100}))
    first = await executor.execute(session, [user_message("slow")])
    with pytest.raises(AlreadyRunningError):
        await executor.regenerate(session=session)
    await executor.cancel(session=session, run_id=first.run_id)


async def test_regenerate_of_an_empty_session_is_not_actionable(executor, session, use_agents):
    use_agents(default=agent())
    with pytest.raises(RunNotActionableError):
        await executor.regenerate(session=session)


async def test_continue_reopens_the_partial_answer_with_an_explicit_instruction(executor, session, use_agents):
    toolbox.RecordingProvider.requests = []
    provider = {
        "BACKEND": f"{toolbox.PATH}.RecordingProvider",
        "OPTIONS": {"TEXT": "one two three four", "DROP_AFTER_CHUNKS": 2},
    }
    use_agents(default={**agent(), "PROVIDER": provider})
    first = await executor.execute(session, [user_message("count", "u-c")])
    assert await executor.wait(first.run_id, 10) == "interrupted"
    partial = (await rows(session.id))[1]
    assert text(partial) == "one two "

    use_agents(default={**agent(), "PROVIDER": {**provider, "OPTIONS": {"TEXT": "three four"}}})
    handle = await executor.continue_run(session=session, run_id=first.run_id)
    assert await executor.wait(handle.run_id, 10) == "completed"
    assert handle.response_message_id == first.response_message_id
    assert toolbox.RecordingProvider.requests[-1].messages == [
        {"role": "user", "content": "count"},
        {"role": "assistant", "content": "one two "},
        {"role": "user", "content": CONTINUE_INSTRUCTION},
    ]
    messages = await rows(session.id)
    assert len(messages) == 2
    reply = messages[1]
    assert text(reply) == "one two three four"
    assert reply["metadata"]["helix"] == {"runId": handle.run_id, "status": "completed", "partial": False}
    chunks = run_chunks(await stream_chunks(session.id), handle.run_id)
    assert chunks[0]["kind"] == "continue" and chunks[1] == {
        "type": "start",
        "messageId": first.response_message_id,
        "_run": handle.run_id,
    }
    assert reply == accumulate(chunks, first.response_message_id, parts=partial["parts"], metadata=partial["metadata"])
    continued = await Run.objects.aget(pk=handle.run_id)
    assert (continued.kind, continued.attempt, continued.turn_message_id) == ("continue", 2, "u-c")


async def test_continue_of_a_completed_run_is_not_actionable(executor, session, use_agents):
    use_agents(default=agent())
    first = await executor.execute(session, [user_message("hi")])
    await executor.wait(first.run_id, 10)
    with pytest.raises(RunNotActionableError):
        await executor.continue_run(session=session, run_id=first.run_id)


async def test_continue_is_refused_once_the_continuation_was_invalidated(executor, session, use_agents):
    use_agents(default=agent({"DROP_AFTER_CHUNKS": 3}))
    first = await executor.execute(session, [user_message("count")])
    assert await executor.wait(first.run_id, 10) == "interrupted"
    await Run.objects.filter(pk=first.run_id).aupdate(is_continuation_valid=False)  # the history was edited
    with pytest.raises(RunNotActionableError) as caught:
        await executor.continue_run(session=session, run_id=first.run_id)
    assert caught.value.cause == "continuation_invalid"
    handle = await executor.regenerate(session=session)  # Regenerate stays available
    assert await executor.wait(handle.run_id, 10) == "interrupted"
