"""Executor edges: bad input is typed and loses nothing; edits; detached cancels; lost leases."""

from __future__ import annotations

import asyncio

import pytest

from helix_django import store
from helix_django.errors import RunNotActionableError, RunNotFoundError, ValidationError
from helix_django.models import Run, ToolExecution
from helix_django.runtime.agents import UnknownAgentError
from helix_django.runtime.executor import get_executor
from helix_django.snapshot import abuild_snapshot
from helix_django.streams import get_stream_manager
from tests.runtime import toolbox
from tests.runtime.conftest import agent, rows, text, user_message
from tests.streams.helpers import record_batches

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


@pytest.mark.parametrize(
    ("messages", "kwargs"),
    [
        ([], {}),
        ("hello", {}),
        ([{"role": "user", "parts": []}], {}),
        ([{"id": "u1", "role": "robot", "parts": []}], {}),
        ([{"id": "u1", "role": "user", "parts": "text"}], {}),
        ([{"id": "x" * 300, "role": "user", "parts": []}], {}),
        ([user_message("hi")], {"trigger": "something-else"}),
    ],
)
async def test_malformed_requests_are_validation_errors_and_write_nothing(
    executor, session, use_agents, messages, kwargs
):
    use_agents(default=agent())
    with pytest.raises(ValidationError) as caught:
        await executor.execute(session, messages, **kwargs)
    assert caught.value.to_body()["code"] == "validation_error"
    assert await Run.objects.filter(session_id=session.id).acount() == 0
    assert await get_stream_manager().get_info(session.stream_id) is None


async def test_unknown_agent_is_a_typed_error(executor, use_agents):
    use_agents(default=agent())
    session, _ = await store.aget_or_create_session("sess-agentless", agent="nobody")
    with pytest.raises(UnknownAgentError) as caught:
        await executor.execute(session, [user_message("hi")])
    assert caught.value.to_body() == {
        "error": "Unknown agent",
        "code": "validation_error",
        "retryable": False,
        "cause": "agent_unknown",
    }


async def test_a_trailing_assistant_message_without_pending_tools_is_refused(executor, session, use_agents):
    use_agents(default=agent())
    stray = {"id": "a-1", "role": "assistant", "parts": [{"type": "text", "text": "hi"}]}
    with pytest.raises(ValidationError) as caught:
        await executor.execute(session, [user_message("q"), stray])
    assert caught.value.cause == "no_pending_tools"


async def test_editing_a_user_message_rewinds_to_it(executor, session, use_agents):
    use_agents(default=agent())
    first = await executor.execute(session, [user_message("typo", "u-1")])
    await executor.wait(first.run_id, 10)
    edited = user_message("fixed", "u-1b")
    handle = await executor.execute(session, [edited], message_id="u-1")
    await executor.wait(handle.run_id, 10)
    messages = await rows(session.id)
    assert [m["id"] for m in messages] == ["u-1b", handle.response_message_id]
    assert "fixed" in text(messages[1])
    snapshot = await abuild_snapshot(session.id)
    assert snapshot["latestTruncateCheckpointId"] is not None


async def test_cancel_of_a_suspended_run_ends_it_cancelled(executor, session, use_agents):
    steps = [{"TOOL_CALLS": [{"id": "c-1", "name": "pick_color", "arguments": {"prompt": "x"}}]}, {"TEXT": "ok"}]
    use_agents(default=agent({"STEPS": steps}, tools=[f"{toolbox.PATH}.pick_color"]))
    first = await executor.execute(session, [user_message("pick")])
    assert await executor.wait(first.run_id, 10) == "suspended_client_tool"
    run = await executor.cancel(session=session, run_id=first.run_id)
    assert run.status == "cancelled" and run.cancel_requested_at is not None
    info = await get_stream_manager().get_info(session.stream_id)
    assert (info.status, info.end_status) == ("ended", "cancelled")
    reply = (await rows(session.id))[1]
    assert reply["metadata"]["helix"] == {
        "runId": run.id,
        "status": "cancelled",
        "partial": True,
        "cancelledBy": "user",
    }
    assert (await ToolExecution.objects.aget(run=run)).status == "awaiting_client"
    with pytest.raises(RunNotActionableError):
        await executor.submit_tool_results(session=session, run_id=run.id, results=[{"toolCallId": "c-1", "output": 1}])


async def test_cancel_errors_are_typed(executor, session, use_agents):
    use_agents(default=agent())
    with pytest.raises(RunNotFoundError):
        await executor.cancel(session=session, run_id="run_missing")
    done = await executor.execute(session, [user_message("hi")])
    await executor.wait(done.run_id, 10)
    with pytest.raises(RunNotActionableError):
        await executor.cancel(session=session, run_id=done.run_id)


async def test_a_run_that_loses_its_lease_stops_writing(executor, session, use_agents):
    use_agents(default=agent({"PACE_TPS": 10}))  # a reply far longer than a lease renewal
    handle = await executor.execute(session, [user_message("long")])
    # Another process takes the run over (its lease expired there, say).
    await Run.objects.filter(pk=handle.run_id).aupdate(lease_owner="other-process")
    assert await executor.wait(handle.run_id, 10) == "abandoned"
    run = await Run.objects.aget(pk=handle.run_id)
    assert run.is_live and run.lease_owner == "other-process"


async def test_get_executor_returns_one_configured_instance(use_agents):
    use_agents(default=agent())
    assert get_executor() is get_executor()
    assert type(get_executor().launcher).__name__ == "LocalLauncher"
    assert get_executor().supports_request_key is True


async def test_wait_reports_unknown_runs_as_none(executor):
    assert await executor.wait("run_elsewhere", 1) is None
    assert not executor.is_local("run_elsewhere") and not executor.abandon("run_elsewhere")
    await asyncio.sleep(0)


async def test_a_new_message_while_client_tools_wait_supersedes_the_suspended_run(executor, session, use_agents):
    steps = [{"TOOL_CALLS": [{"id": "c-1", "name": "pick_color", "arguments": {"prompt": "x"}}]}, {"TEXT": "ok"}]
    use_agents(default=agent({"STEPS": steps}, tools=[f"{toolbox.PATH}.pick_color"]))
    first = await executor.execute(session, [user_message("pick")])
    assert await executor.wait(first.run_id, 10) == "suspended_client_tool"
    use_agents(default=agent({"TEXT": "Never mind then."}, tools=[f"{toolbox.PATH}.pick_color"]))
    second = await executor.execute(session, [user_message("forget it")])
    assert await executor.wait(second.run_id, 10) == "completed"
    assert (await Run.objects.aget(pk=first.run_id)).status == "superseded"
    assert [m["role"] for m in await rows(session.id)] == ["user", "assistant", "user", "assistant"]


async def test_a_send_after_a_dead_run_retires_it_as_interrupted(executor, session, use_agents):
    use_agents(default=agent({"PACE_TPS": 20}))  # still answering when its process "dies"
    first = await executor.execute(session, [user_message("long")])
    await asyncio.sleep(0.1)
    assert executor.abandon(first.run_id)  # the process "died"
    await executor.wait(first.run_id, 10)
    use_agents(default=agent())
    second = await executor.execute(session, [user_message("again")])
    assert await executor.wait(second.run_id, 10) == "completed"
    dead = await Run.objects.aget(pk=first.run_id)
    assert (dead.status, dead.error_code, dead.interrupted_stage) == ("interrupted", "run_interrupted", "streaming")
    assert (await rows(session.id))[1]["metadata"]["helix"]["partial"] is True
    # Retired, it is resolved by the send that followed it: the admin counts it as no longer open.
    assert (dead.recovery_action, dead.resolved_by) == ("follow_up", second.run_id)


async def test_a_new_run_stores_its_opening_chunks_with_its_claim(executor, session, use_agents):
    use_agents(default=agent({"PACE_TPS": 5, "TEXT": "slow reply"}))
    manager = get_stream_manager()
    batches = record_batches(manager)
    claims = []
    original = manager.claim_and_append

    async def recording(stream_id, run_id, *, epoch, chunks):
        claims.append([chunk["type"] for chunk in chunks])
        return await original(stream_id, run_id, epoch=epoch, chunks=chunks)

    transactions = manager.transactions
    joined = transactions.claim if transactions is not None else None

    def recording_joined(stream_id, run_id, epoch, chunks):  # the claim made inside the run-start commit
        claims.append([chunk["type"] for chunk in chunks])
        return joined(stream_id, run_id, epoch, chunks)

    manager.claim_and_append = recording
    if transactions is not None:
        transactions.claim = recording_joined
    try:
        handle = await executor.execute(session, [user_message("hi")])
        # One write before the caller's first byte: the claim carries the opening chunks (the
        # run's task, started with the commit, may have flushed its own first chunks since).
        assert claims == [["helix-run-start", "start"]]
        assert [chunk["type"] for batch in batches for chunk in batch][:1] in ([], ["start-step"])
        assert [c["type"] for _s, c in await manager.read_all(session.stream_id)][:2] == ["helix-run-start", "start"]
    finally:
        del manager.append_soon, manager.claim_and_append
        if transactions is not None:
            del transactions.claim
    await executor.cancel(session=session, run_id=handle.run_id)


async def test_a_send_while_another_process_runs_is_refused(executor, session, use_agents):
    from helix_django.errors import AlreadyRunningError
    from helix_django.runtime.executor import LocalExecutor

    use_agents(default=agent({"PACE_TPS": 100}))
    first = await executor.execute(session, [user_message("long")])
    other = LocalExecutor()  # another process: its lease is not expired, so the run is alive
    try:
        with pytest.raises(AlreadyRunningError):
            await other.execute(session, [user_message("again")])
        # A cancel from that other process ends the run here too: cancelled, never failed.
        run = await other.cancel(session=session, run_id=first.run_id)
        assert run.status == "cancelled"
        assert await executor.wait(first.run_id, 10) == "cancelled"
        info = await get_stream_manager().get_info(session.stream_id)
        assert (info.status, info.end_status) == ("ended", "cancelled")
    finally:
        other.close()


async def test_a_database_failure_before_the_run_start_commit_is_retryable_and_typed(
    executor, session, use_agents, monkeypatch
):
    """Fault injection: the database refuses the run-start commit (an outage cannot be staged here)."""
    from django.db import OperationalError

    from helix_django import store as store_module
    from helix_django.errors import HistoryIncompleteError

    async def refuse(request):
        raise OperationalError("database is locked: secret detail")

    use_agents(default=agent())
    monkeypatch.setattr(store_module, "astart_run", refuse)
    with pytest.raises(HistoryIncompleteError) as caught:
        await executor.execute(session, [user_message("hi")])
    body = caught.value.to_body()
    assert (body["code"], body["retryable"], body["cause"], caught.value.status) == (
        "state_history_incomplete",
        True,
        "store_error",
        503,
    )
    assert "secret" not in str(body)


async def test_a_failure_after_the_run_start_commit_is_never_retryable(executor, session, use_agents, monkeypatch):
    """Fault injection: the stream backend fails the claim after the run was committed."""
    from helix_django.errors import FrameworkInternalError, StreamConnectionError

    async def broken_claim(*args, **kwargs):
        raise StreamConnectionError(cause="claim")

    use_agents(default=agent())  # (re)builds the stream managers: patch the one in use after it
    monkeypatch.setattr(get_stream_manager(), "claim_and_append", broken_claim)
    # A stream backend apart from the store's database (Redis): its claim follows the commit.
    monkeypatch.setattr(get_stream_manager(), "transactions", None)
    with pytest.raises(FrameworkInternalError) as caught:
        await executor.execute(session, [user_message("hi")])
    assert caught.value.status == 500 and caught.value.to_body()["retryable"] is False
    run = await Run.objects.aget(session_id=session.id)
    assert run.status == "failed" and run.error_code == "transport_stream_connection"
    assert [m["role"] for m in await rows(session.id)] == ["user"]  # the turn is kept: a re-send is not needed


async def test_a_claim_refused_inside_the_run_start_commit_leaves_nothing(executor, session, use_agents, monkeypatch):
    """The database manager claims inside the run-start transaction: a refused claim rolls the whole start back."""
    from helix_django.errors import AlreadyRunningError, StreamFenceError

    def refused(*args, **kwargs):
        raise StreamFenceError(cause="stale_claim")

    use_agents(default=agent())
    monkeypatch.setattr(get_stream_manager().transactions, "claim", refused)
    with pytest.raises(AlreadyRunningError):
        await executor.execute(session, [user_message("hi")])
    assert not await Run.objects.filter(session_id=session.id).aexists()
    assert await rows(session.id) == []  # nothing of the turn was committed: the client may send it again


@pytest.mark.parametrize("joined", [True, False])
async def test_a_run_that_fails_after_claiming_its_stream_fails_the_stream(
    executor, session, use_agents, monkeypatch, joined
):
    """Review finding: a failure after the joined claim left the stream active, claimed by a failed run."""
    from helix_django.runtime import starts as executor_module

    use_agents(default=agent())
    manager = get_stream_manager()
    if not joined:
        monkeypatch.setattr(manager, "transactions", None)
    original = executor_module.RunLoop

    def broken(*args, **kwargs):
        raise RuntimeError("the run loop could not be built")

    if joined:
        monkeypatch.setattr(executor_module, "RunLoop", broken)
    else:  # after the claim: a superseded run's chunks moved our start, and that update fails
        monkeypatch.setattr(executor_module, "RunLoop", original)
        monkeypatch.setattr(manager, "claim_and_append", _claim_behind_a_newer_head(manager.claim_and_append))
        monkeypatch.setattr(executor_module.store, "aupdate_run", _fail)
    with pytest.raises(Exception):  # noqa: B017 - FrameworkInternalError, or the RuntimeError itself
        await executor.execute(session, [user_message("hi")])
    run = await Run.objects.aget(session_id=session.id)
    info = await manager.get_info(session.stream_id)
    assert run.status == "failed"
    assert info is not None and info.status == "failed" and info.run_id == run.id  # readers end, typed


def _claim_behind_a_newer_head(claim):
    async def claiming(*args, **kwargs):
        claimed, sequences = await claim(*args, **kwargs)
        return claimed.with_head(claimed.head_sequence + 100), sequences

    return claiming


async def _fail(*args, **kwargs):
    raise RuntimeError("the start-sequence update failed")
