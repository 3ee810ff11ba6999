"""Request keys (all five rows of 002's table), racing sends and superseded runs."""

from __future__ import annotations

import asyncio

import pytest

from helix_django import store
from helix_django.errors import (
    AlreadyRunningError,
    RequestAlreadyCompletedError,
    RequestKeyConflictError,
    RunSupersededError,
    StreamFenceError,
    ValidationError,
)
from helix_django.models import Message, Run
from helix_django.streams import get_stream_manager
from tests.runtime.conftest import agent, rows, stream_chunks, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

KEY = "key-0001-abcdef"


async def counts(session_id: str) -> tuple[int, int, int]:
    info = await get_stream_manager().get_info(session_id)
    return (
        await Run.objects.filter(session_id=session_id).acount(),
        await Message.objects.filter(session_id=session_id).acount(),
        info.head_sequence if info else 0,
    )


async def test_row_1_no_run_yet_is_a_normal_keyed_send(executor, session, use_agents):
    use_agents(default=agent())
    message = user_message("hello", "u-1")
    handle = await executor.execute(session, [message], request_key=KEY)
    assert not handle.is_duplicate
    run = await Run.objects.aget(pk=handle.run_id)
    assert run.request_key == KEY and len(run.input_hash) == 64
    await executor.wait(handle.run_id, 10)


async def test_row_2_live_run_attaches_to_the_original_stream(executor, session, use_agents):
    use_agents(default=agent({"PACE_TPS": 100}))
    message = user_message("a long answer please", "u-1")
    original = await executor.execute(session, [message], request_key=KEY)
    before = await counts(session.id)
    again = await executor.execute(session, [dict(message)], request_key=KEY)
    assert again.is_duplicate and again.run_id == original.run_id
    assert again.response_message_id == original.response_message_id
    assert again.from_sequence == original.from_sequence == 0
    assert again.run_status in ("starting", "streaming")
    assert (await counts(session.id))[:2] == before[:2]  # nothing written
    await executor.cancel(session=session, run_id=original.run_id)


async def test_row_3_finished_latest_run_is_a_terminal_replay(executor, session, use_agents):
    use_agents(default=agent())
    message = user_message("hello", "u-1")
    original = await executor.execute(session, [message], request_key=KEY)
    await executor.wait(original.run_id, 10)
    before = await counts(session.id)
    again = await executor.execute(session, [message], request_key=KEY)
    assert again.is_duplicate and again.run_id == original.run_id
    assert again.run_status == "completed" and again.from_sequence == original.from_sequence
    assert await counts(session.id) == before


async def test_row_4_a_later_turn_exists(executor, session, use_agents):
    use_agents(default=agent())
    message = user_message("hello", "u-1")
    first = await executor.execute(session, [message], request_key=KEY)
    await executor.wait(first.run_id, 10)
    later = await executor.execute(session, [user_message("next", "u-2")], request_key="key-0002-abcdef")
    await executor.wait(later.run_id, 10)
    before = await counts(session.id)
    with pytest.raises(RequestAlreadyCompletedError) as caught:
        await executor.execute(session, [message], request_key=KEY)
    assert caught.value.to_body()["code"] == "state_request_already_completed"
    assert caught.value.to_body()["runId"] == first.run_id and caught.value.status == 409
    assert await counts(session.id) == before


async def test_row_5_other_input_conflicts_and_writes_nothing(executor, session, use_agents):
    use_agents(default=agent())
    first = await executor.execute(session, [user_message("hello", "u-1")], request_key=KEY)
    await executor.wait(first.run_id, 10)
    before = await counts(session.id)
    with pytest.raises(RequestKeyConflictError) as caught:
        await executor.execute(session, [user_message("something else", "u-9")], request_key=KEY)
    assert caught.value.to_body() == {
        "error": "This request key was used for a different request",
        "code": "state_request_key_conflict",
        "retryable": False,
        "runId": first.run_id,
    }
    assert await counts(session.id) == before


async def test_malformed_key_is_a_validation_error_that_does_not_echo_it(executor, session, use_agents):
    use_agents(default=agent())
    with pytest.raises(ValidationError) as caught:
        await executor.execute(session, [user_message("hi")], request_key="bad key <script>")
    body = caught.value.to_body()
    assert body["code"] == "validation_error" and caught.value.status == 400
    assert "script" not in str(body)
    assert await counts(session.id) == (0, 0, 0)


async def test_concurrent_duplicate_sends_with_one_key_make_one_run(executor, session, use_agents):
    use_agents(default=agent({"PACE_TPS": 200}))
    message = user_message("once only", "u-1")
    handles = await asyncio.gather(*(executor.execute(session, [dict(message)], request_key=KEY) for _ in range(4)))
    assert len({h.run_id for h in handles}) == 1
    assert sorted(h.is_duplicate for h in handles) == [False, True, True, True]
    assert await Run.objects.filter(session_id=session.id).acount() == 1
    assert [m["id"] for m in await rows(session.id)] == ["u-1"]
    await executor.wait(handles[0].run_id, 20)


async def test_two_sends_racing_on_one_session_start_exactly_one_run(executor, session, use_agents):
    use_agents(default=agent({"PACE_TPS": 200}))
    results = await asyncio.gather(
        executor.execute(session, [user_message("first", "u-1")]),
        executor.execute(session, [user_message("second", "u-2")]),
        return_exceptions=True,
    )
    started = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, BaseException)]
    assert len(started) == 1 and len(refused) == 1
    assert isinstance(refused[0], AlreadyRunningError)
    assert refused[0].to_body() == {
        "error": "A run is already active on this session",
        "code": "state_already_running",
        "retryable": True,
    }
    assert await Run.objects.filter(session_id=session.id).acount() == 1
    assert len(await rows(session.id)) == 1  # the refused message was never persisted
    await executor.cancel(session=session, run_id=started[0].run_id)


async def test_superseded_run_late_writes_never_reach_readers(executor, session, use_agents):
    use_agents(default=agent({"PACE_TPS": 150}))
    old = await executor.execute(session, [user_message("first turn", "u-1")])
    await asyncio.sleep(0.1)
    new = await executor.regenerate(session=session, supersede_live=True)
    assert await executor.wait(old.run_id, 10) == "superseded"
    assert (await Run.objects.aget(pk=old.run_id)).status == "superseded"

    manager = get_stream_manager()
    with pytest.raises(StreamFenceError):
        await manager.append(session.stream_id, old.run_id, [{"type": "text-delta", "id": "x", "delta": "late"}])
    with pytest.raises(RunSupersededError):
        await store.acommit_step(
            old.run_id,
            response_message={"id": "m", "role": "assistant", "parts": []},
            stream_sequence=999,
            step_count=9,
        )
    with pytest.raises(StreamFenceError):
        await manager.end_stream(session.stream_id, old.run_id)
    with pytest.raises(RunSupersededError):
        await store.acommit_terminal(old.run_id, "completed", response_message=None, stream_sequence=999)

    assert await executor.wait(new.run_id, 20) == "completed"
    chunks = await stream_chunks(session.id, after=new.from_sequence)
    assert chunks and {c["_run"] for _s, c in chunks} == {new.run_id}
    info = await manager.get_info(session.stream_id)
    assert (info.status, info.run_id) == ("ended", new.run_id)
    assert (await Run.objects.aget(pk=new.run_id)).status == "completed"
