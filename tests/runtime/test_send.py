"""A plain send: persisted before inference, streamed, committed; the handle is readable at once."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from helix_django.models import Checkpoint, Run
from helix_django.runtime.executor import RunHandle
from helix_django.runtime.providers.scripted import default_reply, tokenize
from helix_django.signals import run_finished
from helix_django.snapshot import abuild_snapshot
from helix_django.streams import get_stream_manager
from tests.runtime.conftest import accumulate, agent, rows, run_chunks, stream_chunks, text, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


async def test_plain_send_streams_and_commits_the_reply(executor, session, use_agents):
    use_agents(default=agent())
    handle = await executor.execute(session, [user_message("What is a checkpoint?", "u-1")])
    assert isinstance(handle, RunHandle)
    assert handle.from_sequence == 0 and not handle.is_duplicate
    # The stream is claimed and readable when execute() returns.
    info = await get_stream_manager().get_info(session.stream_id)
    assert info.run_id == handle.run_id and info.status == "active" and info.head_sequence >= 2

    reader = await get_stream_manager().create_resumable_reader(
        session.stream_id, from_sequence=handle.from_sequence, wait_for_live=True
    )
    seen = [chunk async for _seq, chunk in reader]
    assert await executor.wait(handle.run_id, 10) in (None, "completed")

    types = [c["type"] for c in seen]
    assert types[:3] == ["helix-run-start", "start", "start-step"]
    assert types[-4:] == ["finish-step", "finish", "helix-step-committed", "helix-run-end"]
    assert seen[0] == {
        "type": "helix-run-start",
        "runId": handle.run_id,
        "kind": "send",
        "attempt": 1,
        "messageId": handle.response_message_id,
        "_run": handle.run_id,
    }
    assert seen[2]["_attempt"].startswith("att_") and seen[2]["_step"] == 1
    assert all(c["_run"] == handle.run_id for c in seen)

    run = await Run.objects.aget(pk=handle.run_id)
    assert run.status == "completed" and run.provider == "scripted" and run.step_count == 1
    messages = await rows(session.id)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    reply = messages[1]
    assert text(reply) == default_reply("What is a checkpoint?")
    assert reply["metadata"]["helix"] == {"runId": run.id, "status": "completed", "partial": False}
    tokens = len(tokenize(default_reply("What is a checkpoint?")))  # deltas may be coalesced into fewer chunks
    assert reply["metadata"]["usage"] == {"inputTokens": 10, "outputTokens": tokens}
    # The committed message is exactly what a client builds from the same chunks.
    assert reply == accumulate(seen, handle.response_message_id)

    snapshot = await abuild_snapshot(session.id)
    assert snapshot["status"] == "ended" and snapshot["messages"] == messages
    last_cp = await Checkpoint.objects.filter(session_id=session.id).order_by("-id").afirst()
    assert last_cp.kind == "terminal"
    assert snapshot["streamSequence"] == last_cp.stream_sequence


async def test_a_client_that_goes_away_does_not_stop_the_run(executor, session, use_agents):
    use_agents(default=agent({"PACE_TPS": 400}))
    handle = await executor.execute(session, [user_message("Tell me about leases")])
    reader = await get_stream_manager().create_resumable_reader(session.stream_id, from_sequence=0)
    async for _seq, chunk in reader:
        if chunk["type"] == "text-delta":
            break
    await reader.close()  # the client disconnects mid-reply
    assert await executor.wait(handle.run_id, 20) == "completed"
    run = await Run.objects.aget(pk=handle.run_id)
    assert run.status == "completed"
    assert run.lease_owner == "" and run.last_event_at is not None


async def test_lease_is_held_and_renewed_while_streaming(executor, session, use_agents):
    use_agents(default=agent({"PACE_TPS": 60}))
    handle = await executor.execute(session, [user_message("A slow question")])
    first = await Run.objects.aget(pk=handle.run_id)
    assert first.lease_owner == executor.owner
    await asyncio.sleep(0.6)
    later = await Run.objects.aget(pk=handle.run_id)
    assert later.lease_owner == executor.owner
    assert later.lease_expires_at > first.lease_expires_at
    assert later.last_event_at > first.last_event_at
    await executor.cancel(session=session, run_id=handle.run_id)


async def test_second_turn_uses_the_committed_history(executor, session, use_agents):
    use_agents(default=agent())
    first = await executor.execute(session, [user_message("first question", "u-a")])
    await executor.wait(first.run_id, 10)
    second = await executor.execute(session, [user_message("second question", "u-b")])
    assert second.from_sequence > first.from_sequence
    await executor.wait(second.run_id, 10)
    messages = await rows(session.id)
    assert [m["id"] for m in messages][::2] == ["u-a", "u-b"]
    assert "second question" in text(messages[3])
    chunks = await stream_chunks(session.id, after=second.from_sequence)
    assert {c["_run"] for _s, c in chunks} == {second.run_id}
    assert run_chunks(chunks, second.run_id)[0]["type"] == "helix-run-start"


async def test_a_run_started_from_sync_code_outlives_the_callers_loop(executor, session, use_agents):
    """A management command or WSGI admin view starts runs through async_to_sync's short-lived loop."""
    from asgiref.sync import async_to_sync

    use_agents(default=agent({"PACE_TPS": 300}))

    def sync_caller():
        return async_to_sync(executor.execute)(session, [user_message("from a management command")])

    handle = await asyncio.to_thread(sync_caller)  # its event loop is gone when this returns
    assert executor.is_local(handle.run_id)
    assert await executor.wait(handle.run_id, 20) == "completed"
    assert (await Run.objects.aget(pk=handle.run_id)).status == "completed"


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_runs_work_on_every_stream_manager(executor, session, use_agents, backend):
    """The runtime only talks to the stream manager interface: the same run on memory and Redis."""
    import uuid

    from django.test import override_settings

    managers = {
        "memory": {"BACKEND": "helix_django.streams.memory.MemoryStreamManager", "OPTIONS": {}},
        "redis": {
            "BACKEND": "helix_django.streams.redis.RedisStreamManager",
            "OPTIONS": {"CONNECTION_ALIAS": "helix", "KEY_PREFIX": f"helix-test:{uuid.uuid4().hex}", "stream_ttl": 600},
        },
    }
    use_agents(default=agent({"FAIL_AT_FRACTION": 0.5}))
    from helix_django.conf import helix_settings

    with override_settings(HELIX={**helix_settings.user_settings, "STREAM_MANAGERS": {"default": managers[backend]}}):
        handle = await executor.execute(session, [user_message("Which backend?")])
        assert await executor.wait(handle.run_id, 20) == "failed"
        chunks = run_chunks(await stream_chunks(session.id), handle.run_id)
        info = await get_stream_manager().get_info(session.stream_id)
        assert info.status == "failed" and info.error["code"] == "provider_error"
        reply = (await rows(session.id))[1]
        assert reply == accumulate(chunks, handle.response_message_id)
        assert reply["metadata"]["helix"]["partial"] is True
        snapshot = await abuild_snapshot(session.id)
        assert snapshot["status"] == "failed" and snapshot["messages"] == await rows(session.id)
        await get_stream_manager().aclose()


async def test_run_started_does_not_hold_up_the_handle_and_a_failing_receiver_is_logged(
    executor, session, use_agents, caplog
):
    from helix_django.signals import run_started

    use_agents(default=agent())
    received = []
    gate = asyncio.Event()  # awaited on the runner loop, where the signal is sent

    async def failing_receiver(sender, run, **kwargs):
        await gate.wait()
        received.append((run.id, run.status))
        raise RuntimeError("receiver broke")

    run_started.connect(failing_receiver, dispatch_uid="test-failing-receiver")
    try:
        handle = await asyncio.wait_for(executor.execute(session, [user_message("hi")]), 10)
        assert received == []  # the receiver still waits: execute() returned without it
        executor.runner.loop.call_soon_threadsafe(gate.set)
        assert await executor.wait(handle.run_id, 10) == "completed"
        for _ in range(250):
            if received:
                break
            await asyncio.sleep(0.02)
        assert received == [(handle.run_id, "streaming")]  # its task starts with the commit (issue 23)
        assert any("run_started receiver failed" in r.getMessage() for r in caplog.records)
    finally:
        run_started.disconnect(dispatch_uid="test-failing-receiver")


async def test_run_finished_gets_the_committed_run_without_reading_it_again(executor, session, use_agents):
    """The run's end sends ``run_finished`` with the Run its terminal commit wrote: no query of the
    run table between that commit and the signal, so a client's next send (sent on ``[DONE]``) does
    not wait behind it on the ORM's thread. The built-in receivers (telemetry) are coroutines:
    ``asend`` awaits them on the run's loop, no thread hop."""
    use_agents(default=agent())
    statements: list[str] = []
    received: list[tuple[str, str, object, int]] = []

    def record(execute, sql, params, many, context):
        statements.append(sql)
        return execute(sql, params, many, context)

    async def receiver(sender, run, status, **kwargs):
        received.append((run.status, status, run.finished_at, len(statements)))

    def install():
        connection.execute_wrappers.append(record)

    def uninstall():
        connection.execute_wrappers.remove(record)

    await sync_to_async(install)()
    run_finished.connect(receiver, dispatch_uid="test-run-finished-committed")
    try:
        handle = await executor.execute(session, [user_message("Hello?")])
        assert await executor.wait(handle.run_id, 10) in (None, "completed")
    finally:
        run_finished.disconnect(dispatch_uid="test-run-finished-committed")
        await sync_to_async(uninstall)()
    [(run_status, status, finished_at, seen)] = received
    assert (run_status, status) == ("completed", "completed") and finished_at is not None
    run_table = Run._meta.db_table
    terminal = max(i for i, sql in enumerate(statements[:seen]) if sql.startswith(f'UPDATE "{run_table}"'))
    reads = [sql for sql in statements[terminal + 1 : seen] if f'FROM "{run_table}"' in sql]
    assert reads == []
    assert all(asyncio.iscoroutinefunction(r) for r in run_finished._live_receivers(Run)[1])
