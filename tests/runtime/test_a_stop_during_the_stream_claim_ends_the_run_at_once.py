"""A Stop that arrives while a run's stream claim is in flight ends the run as soon as the claim returns.

With the Redis and memory stream managers the claim (with the opening chunks) is a write
of its own after the run-start commit: the run is live and has an entry in the executor,
but no task yet. ``executor.cancel()`` took such a run for one executed elsewhere and
cancelled it detached (committed ``cancelled``, closed a stream the run did not hold yet);
then the claim returned, the run's task started and streamed its whole answer, stopped
only when its completion's fenced commit (or its lease renewal) found the run ended.
Found by a review of the fourteenth session.

The claim is held until the Stop has been recorded; then it goes on. The run must end
``cancelled`` by its own ending, before its first step: no answer text on the stream.

A Stop served by another process (an executor of its own: its own lease owner, no entry for
the run; the same database and stream manager) cancels the run detached: it closes the stream
for the run at the run's epoch, and the claim, when it lands, is refused (``run_ended``).
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from django.test import override_settings

from helix_django.conf import helix_settings
from helix_django.models import Run, RunStatus
from helix_django.runtime.executor import LocalExecutor
from helix_django.streams import get_stream_manager
from tests.runtime.conftest import agent, run_chunks, stream_chunks, user_message

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

MANAGERS = {
    "memory": {"BACKEND": "helix_django.streams.memory.MemoryStreamManager", "OPTIONS": {}},
    "redis": {
        "BACKEND": "helix_django.streams.redis.RedisStreamManager",
        "OPTIONS": {"CONNECTION_ALIAS": "helix", "KEY_PREFIX": "", "stream_ttl": 600},
    },
}


@pytest.fixture(params=sorted(MANAGERS))
def stream_manager(request, use_agents):
    """The session streams on the memory or the Redis stream manager (a key prefix of the test's own)."""
    use_agents(default=agent({"TEXT": " ".join(f"w{i}" for i in range(60))}))
    config = {**MANAGERS[request.param], "OPTIONS": dict(MANAGERS[request.param]["OPTIONS"])}
    if request.param == "redis":
        config["OPTIONS"]["KEY_PREFIX"] = f"helix-test:{uuid.uuid4().hex}"
    with override_settings(HELIX={**helix_settings.user_settings, "STREAM_MANAGERS": {"default": config}}):
        yield get_stream_manager()


class HeldClaim:
    """Holds the manager's claim (with the opening chunks) until the test lets it go."""

    def __init__(self, manager, monkeypatch) -> None:
        self.entered = asyncio.Event()
        self.released = asyncio.Event()
        claim = manager.claim_and_append

        async def held(*args, **kwargs):
            self.entered.set()
            await self.released.wait()
            return await claim(*args, **kwargs)

        monkeypatch.setattr(manager, "claim_and_append", held)


async def cancel_requested(run_id: str) -> bool:
    return await Run.objects.filter(pk=run_id, cancel_requested_at__isnull=False).aexists()


async def test_a_stop_during_the_stream_claim_ends_the_run_before_its_first_step(
    executor, session, stream_manager, monkeypatch
):
    held = HeldClaim(stream_manager, monkeypatch)
    sending = asyncio.ensure_future(executor.execute(session, [user_message("stop me as I claim")]))
    await asyncio.wait_for(held.entered.wait(), 20)
    run_id = (await Run.objects.filter(session_id=session.id).afirst()).id
    stop = asyncio.ensure_future(executor.cancel(session=session, run_id=run_id))
    for _ in range(400):
        if await cancel_requested(run_id):
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)  # whatever the Stop does before the claim returns, it has done
    held.released.set()
    handle = await asyncio.wait_for(sending, 20)
    stopped = await asyncio.wait_for(stop, 20)

    assert stopped.status == RunStatus.CANCELLED
    assert await executor.wait(handle.run_id, 20) == RunStatus.CANCELLED
    chunks = run_chunks(await stream_chunks(session.stream_id), handle.run_id)
    assert [c["type"] for c in chunks if c["type"] in ("text-delta", "start-step")] == []
    assert [c["status"] for c in chunks if c["type"] == "helix-run-end"] == ["cancelled"]
    info = await stream_manager.get_info(session.stream_id)
    assert (info.status, info.end_status, info.run_id) == ("ended", "cancelled", handle.run_id)
    await stream_manager.aclose()


@pytest.fixture(params=["database", "memory", "redis"])
def shared_manager(request, use_agents, monkeypatch):
    """The stream manager both "processes" share; the database one claims after the run-start commit here.

    Two executors in one test process stand for two processes: each has its own lease owner and
    entries, and they share the database and the stream manager (the memory manager too: it is the
    one process's, which makes it the same shared store for both executors).
    """
    use_agents(default=agent({"TEXT": " ".join(f"w{i}" for i in range(60))}))
    if request.param == "database":
        manager = get_stream_manager()
        # A stream backend apart from the run-start transaction: its claim is a write of its own.
        monkeypatch.setattr(manager, "transactions", None)
        yield manager
        return
    config = {**MANAGERS[request.param], "OPTIONS": dict(MANAGERS[request.param]["OPTIONS"])}
    if request.param == "redis":
        config["OPTIONS"]["KEY_PREFIX"] = f"helix-test:{uuid.uuid4().hex}"
    with override_settings(HELIX={**helix_settings.user_settings, "STREAM_MANAGERS": {"default": config}}):
        yield get_stream_manager()  # the test closes it (on its own loop)


async def test_a_stop_served_by_another_process_during_the_stream_claim_ends_the_run_before_its_first_step(
    executor, session, shared_manager, monkeypatch
):
    """The other process cancels the run detached while this one's claim is in flight (found by review, session 15).

    Before: the detached cancel committed ``cancelled`` but left the stream alone (the run did not
    hold it yet); then the claim landed and the run streamed its whole answer. Now the cancel closes
    the stream for the run at its epoch, so readers get its end even if the claim never comes, and
    the claim, when it lands, is refused (``run_ended``): the run never takes a step here.
    """
    manager = shared_manager
    other = LocalExecutor()
    try:
        held = HeldClaim(manager, monkeypatch)
        sending = asyncio.ensure_future(executor.execute(session, [user_message("stop me from elsewhere")]))
        await asyncio.wait_for(held.entered.wait(), 20)
        run = await Run.objects.filter(session_id=session.id).afirst()
        assert not other.is_local(run.id) and executor.is_local(run.id)
        # Readers parked in the run-start window (a resume on any process): SSE, raw stream / WebSocket.
        readers = asyncio.ensure_future(wire_endings(manager, session.stream_id, run))
        await asyncio.sleep(0.1)
        assert not readers.done()
        stopped = await asyncio.wait_for(other.cancel(session=session, run_id=run.id), 20)
        assert stopped.status == RunStatus.CANCELLED

        # The claim has not come (its process might have died): readers already get the run's end.
        info = await manager.get_info(session.stream_id)
        assert (info.status, info.end_status, info.run_id) == ("ended", "cancelled", run.id)
        ended = run_chunks(await manager.read_all(session.stream_id, after=run.start_sequence), run.id)
        assert [(c["type"], c.get("status")) for c in ended] == [("helix-run-end", "cancelled")]
        assert await asyncio.wait_for(readers, 20) == (
            [{"type": "abort"}, "[DONE]"],
            [{"type": "end", "status": "cancelled"}],
        )

        held.released.set()
        handle = await asyncio.wait_for(sending, 20)
        assert (handle.run_id, handle.run_status) == (run.id, RunStatus.CANCELLED)
        assert await executor.wait(handle.run_id, 20) == RunStatus.CANCELLED
        assert not executor.is_local(run.id)
        chunks = run_chunks(await manager.read_all(session.stream_id), handle.run_id)
        assert chunks == ended  # the refused claim stored nothing: no opening after the end, no step
        assert await manager.get_info(session.stream_id) == info
        assert (await Run.objects.aget(pk=run.id)).status == RunStatus.CANCELLED
    finally:
        other.close()
        await manager.aclose()


async def wire_endings(manager, stream_id: str, run: Run) -> tuple:
    """What a reader of the run gets from its start: the chat route's SSE frames, the raw stream's and WebSocket's."""
    from helix_django.transport.frames import stream_frames
    from helix_django.transport.plan import ResponsePlan, plan_frames
    from helix_django.transport.replay import ResponseFilter
    from tests.transport.test_plan_frames import parse

    async def reader():  # as a route opens one before the run's claim (the run-start window: wait for live)
        return await manager.create_resumable_reader(stream_id, from_sequence=run.start_sequence, wait_for_live=True)

    async def sse(reader) -> list:
        plan = ResponsePlan(reader=reader, filter=ResponseFilter(run_id=run.id), run=run)
        return parse([part async for part in plan_frames(plan)])

    async def raw(reader) -> list:
        return [frame async for frame in stream_frames(reader)]

    return tuple(await asyncio.gather(sse(await reader()), raw(await reader())))


@pytest.mark.parametrize("joined", [True, False], ids=["claim-in-the-run-start-commit", "claim-after-the-commit"])
async def test_a_stop_served_by_another_process_after_the_claim_fences_the_runs_first_writes(
    executor, session, use_agents, monkeypatch, joined
):
    """The claim landed (the database manager makes it inside the run-start commit), the task has not started.

    The other process ends the stream the run holds; the run's first write is then fenced, so
    nothing of its answer reaches the stream and the run stays ``cancelled``.
    """
    use_agents(default=agent({"TEXT": " ".join(f"w{i}" for i in range(60))}))
    manager = get_stream_manager()
    if not joined:
        monkeypatch.setattr(manager, "transactions", None)
    other = LocalExecutor()
    entered, released = asyncio.Event(), asyncio.Event()
    dispatch = executor.starts._dispatch

    async def held(*args, **kwargs):
        entered.set()
        await released.wait()
        return await dispatch(*args, **kwargs)

    monkeypatch.setattr(executor.starts, "_dispatch", held)
    try:
        sending = asyncio.ensure_future(executor.execute(session, [user_message("stop me as I start")]))
        await asyncio.wait_for(entered.wait(), 20)
        run = await Run.objects.filter(session_id=session.id).afirst()
        stopped = await asyncio.wait_for(other.cancel(session=session, run_id=run.id), 20)
        assert stopped.status == RunStatus.CANCELLED
        released.set()
        handle = await asyncio.wait_for(sending, 20)
        await executor.wait(handle.run_id, 20)
        chunks = run_chunks(await manager.read_all(session.stream_id), run.id)
        assert [c["type"] for c in chunks if c["type"] in ("text-delta", "start-step")] == []
        assert [c["status"] for c in chunks if c["type"] == "helix-run-end"] == ["cancelled"]
        info = await manager.get_info(session.stream_id)
        assert (info.status, info.end_status, info.run_id) == ("ended", "cancelled", run.id)
        assert (await Run.objects.aget(pk=run.id)).status == RunStatus.CANCELLED
    finally:
        other.close()


async def test_a_recovery_elsewhere_during_the_stream_claim_fails_the_stream_for_the_run_and_refuses_the_claim(
    executor, session, shared_manager, monkeypatch
):
    """The same close for recovery's ending (``interrupted``): readers get the run's typed error, the claim is refused."""
    from helix_django.recovery.outcomes import ainterrupt
    from helix_django.recovery.partial import arebuild_partial

    manager = shared_manager
    try:
        held = HeldClaim(manager, monkeypatch)
        sending = asyncio.ensure_future(executor.execute(session, [user_message("interrupt me from elsewhere")]))
        await asyncio.wait_for(held.entered.wait(), 20)
        run = await Run.objects.filter(session_id=session.id).afirst()
        await ainterrupt(run, await arebuild_partial(run), stage=run.status, cause="process_lost")
        info = await manager.get_info(session.stream_id)
        assert (info.status, info.run_id, info.error["code"]) == ("failed", run.id, "run_interrupted")
        held.released.set()
        handle = await asyncio.wait_for(sending, 20)
        assert handle.run_status == RunStatus.INTERRUPTED
        assert await executor.wait(handle.run_id, 20) == RunStatus.INTERRUPTED
        chunks = run_chunks(await manager.read_all(session.stream_id), run.id)
        assert [c["type"] for c in chunks] == ["helix-run-end"]  # the refused claim stored nothing
        assert await manager.get_info(session.stream_id) == info
    finally:
        await manager.aclose()
