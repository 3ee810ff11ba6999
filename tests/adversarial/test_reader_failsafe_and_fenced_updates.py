"""Adversarial: a reader closed from another task, run_finished receivers, fenced updates during a supersede, admin title edits, lost wake-ups (one fail-safe timer per reader)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest
from django.db import connection

from helix_django import store
from helix_django.errors import RunSupersededError
from helix_django.models import ChatSession, Run
from helix_django.signals import run_finished
from tests.runtime.conftest import _close_worker_thread_connections, agent, executor, session, use_agents, user_message  # noqa: F401
from tests.streams.helpers import chunk, parked

pytestmark = pytest.mark.django_db(transaction=True)


async def test_close_from_another_task_ends_a_parked_reader(manager):
    """close() cancels the reader's fail-safe timer: it must also end the wait that timer was to wake.

    Nothing is written after the park, so no write wakes the reader. Before the fix the
    parked ``__anext__`` never returned (its only other wake-up was the cancelled timer),
    and a close() landing during the read before a park left that park to the fail-safe.
    """
    await manager.claim_stream("s1", "run_a", epoch=1)
    await manager.append("s1", "run_a", [chunk(1)])
    reader = await manager.create_resumable_reader("s1", from_sequence=0)
    reader.fail_safe_seconds = 3600
    assert (await anext(reader))[0] == 1
    waiting = asyncio.ensure_future(anext(reader))
    await parked(manager, "s1")
    await asyncio.sleep(0.2)  # the task reads the head (redis) and parks
    assert not waiting.done()
    await reader.close()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(waiting, 3)
    assert manager.notifier.waiter_count("s1") == 0


ENDINGS = {
    "completed": ({}, None),
    "completed_durable": ({"DURABLE": True, "CACHE_ALIAS": "default"}, None),
    "failed": ({"FAIL_AT_FRACTION": 0.4}, None),
    "interrupted": ({"DROP_AFTER_CHUNKS": 5}, None),
    "cancelled": ({"HANG_AFTER_CHUNKS": 2}, "cancel"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("ending", sorted(ENDINGS))
async def test_run_finished_receivers_see_every_field_a_fresh_read_sees(ending, executor, session, use_agents):  # noqa: F811
    """``run_finished`` gets the Run its terminal commit left in memory (no re-read): every
    column, not only those the terminal UPDATE sets, must equal the row as committed."""
    options, action = ENDINGS[ending]
    use_agents(default=agent(options))
    received: list = []

    async def receiver(sender, run, status, **kwargs):
        received.append((status, {f.attname: getattr(run, f.attname) for f in Run._meta.concrete_fields}))

    run_finished.connect(receiver, dispatch_uid="test-session5-fields")
    try:
        handle = await executor.execute(session, [user_message("What is a checkpoint?")])
        if action == "cancel":
            await asyncio.sleep(0.2)
            await asyncio.wait_for(executor.cancel(session=session, run_id=handle.run_id), 10)
        await executor.wait(handle.run_id, 20)
    finally:
        run_finished.disconnect(dispatch_uid="test-session5-fields")
    fresh = await Run.objects.aget(pk=handle.run_id)
    [(status, seen)] = received
    assert status == fresh.status == ending.split("_")[0]
    assert seen == {f.attname: getattr(fresh, f.attname) for f in Run._meta.concrete_fields}


@pytest.mark.timeout(60)
def test_update_run_waiting_on_a_supersede_in_flight_is_fenced():
    """update_run is fenced: while a start_run that supersedes the run holds its rows
    (superseded, not yet committed), update_run waits, then finds the run superseded and
    writes nothing."""
    store.get_or_create_session("s5-race")
    first = store.start_run(store.RunStartRequest(session_id="s5-race", input_messages=[_user("u1")])).run
    superseded, outcome = threading.Event(), {}
    run_table = Run._meta.db_table

    def hold_after_the_supersede(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if sql.startswith(f'UPDATE "{run_table}"') and "superseded" in (params or ()):
            superseded.set()
            time.sleep(0.5)  # the transaction stays open, the row locked, while update_run waits
        return result

    def supersede():
        try:
            with connection.execute_wrapper(hold_after_the_supersede):
                request = store.RunStartRequest(session_id="s5-race", input_messages=[_user("u2")], supersede_live=True)
                outcome["second"] = store.start_run(request).run.id
        finally:
            connection.close()

    def update():
        superseded.wait(10)
        try:
            store.update_run(first.id, status="streaming", provider_operation_id="op-late")
            outcome["update"] = "updated"
        except RunSupersededError:
            outcome["update"] = "fenced"
        finally:
            connection.close()

    threads = [threading.Thread(target=supersede), threading.Thread(target=update)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    # By role, not by order: which thread records first after the lock is released is the scheduler's choice.
    second_id, verdict = outcome["second"], outcome["update"]
    assert verdict == "fenced"
    first.refresh_from_db()
    assert (first.status, first.provider_operation_id) == ("superseded", "")
    assert ChatSession.objects.get(pk="s5-race").current_run_id == second_id
    store.commit_terminal(second_id, "cancelled", response_message=None, stream_sequence=0)  # no executor runs it


def _user(message_id: str) -> dict:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": "hello"}]}


def test_an_admin_title_edit_never_writes_back_a_stale_current_run(rf):
    """The admin loads a session, a send moves its current run, then the admin saves the title.

    A full save wrote back the current run and message count it had loaded: the new run stayed
    live but no longer current (its writes were then refused as superseded), and the turn's
    messages fell outside the session's count.
    """
    from django.contrib import admin

    store.get_or_create_session("s5-admin")
    first = store.start_run(store.RunStartRequest(session_id="s5-admin", input_messages=[_user("u1")])).run
    store.commit_terminal(first.id, "completed", response_message=None, stream_sequence=0)
    loaded = ChatSession.objects.get(pk="s5-admin")  # the change view's object
    second = store.start_run(store.RunStartRequest(session_id="s5-admin", input_messages=[_user("u2")])).run
    loaded.title = "Renamed"
    model_admin = admin.site._registry[ChatSession]
    model_admin.save_model(rf.post("/"), loaded, form=None, change=True)
    fresh = ChatSession.objects.get(pk="s5-admin")
    assert (fresh.title, fresh.current_run_id, fresh.message_count) == ("Renamed", second.id, 2)
    store.update_run(second.id, status="streaming")  # still current: its writes are allowed
    store.commit_step(second.id, response_message=_assistant("a2"), stream_sequence=0, step_count=1)
    store.commit_terminal(second.id, "cancelled", response_message=None, stream_sequence=0)


def _assistant(message_id: str) -> dict:
    return {"id": message_id, "role": "assistant", "parts": [{"type": "text", "text": "hi", "state": "done"}]}


@pytest.mark.redis
@pytest.mark.timeout(60)
async def test_a_reader_whose_wake_ups_are_lost_still_sees_every_chunk_within_one_fail_safe_period():
    """Another process writes without a broadcast reaching this one (a lost wake-up): each park,
    including the first after the shared timer fired between waits, wakes within the period."""
    from django.test import override_settings

    from helix_django.streams.database import DatabaseStreamManager
    from tests.scale.settings import redis_channel_layer

    other = DatabaseStreamManager("default", {})  # the in-memory layer: it publishes nothing
    with override_settings(CHANNEL_LAYERS=redis_channel_layer(f"helix-test-{uuid.uuid4().hex}")):
        web = DatabaseStreamManager("default", {})
    period, slack = 0.3, 0.25
    loop = asyncio.get_running_loop()
    try:
        await other.claim_stream("s1", "run_a", epoch=1)
        reader = await web.create_resumable_reader("s1", from_sequence=0)
        reader.fail_safe_seconds = period
        arrived: dict[int, float] = {}

        async def consume():
            async for sequence, _chunk in reader:
                arrived[sequence] = loop.time()
                if sequence == 3:
                    await asyncio.sleep(period + 0.1)  # the shared timer fires while no wait is parked

        task = asyncio.ensure_future(consume())
        written: dict[int, float] = {}
        for n, pause in enumerate([0.05, 0.45, 0.1, 0.65, 0.02, 0.35, 0.2], start=1):
            await asyncio.sleep(pause)
            await other.append("s1", "run_a", [chunk(n)])
            written[n] = loop.time()
        await asyncio.sleep(0.1)
        await other.end_stream("s1", "run_a")
        ended = loop.time()
        await asyncio.wait_for(task, 5)
        assert sorted(arrived) == list(range(1, 8))
        late = {n: round(arrived[n] - written[n], 3) for n in written if arrived[n] - written[n] > period + slack}
        assert late == {}
        assert loop.time() - ended < period + slack and reader.last_info.status == "ended"
    finally:
        await web.notifier.remote.aclose()
