"""Adversarial races on the optimistic send start (LocalExecutor._start_send): dead, suspended and live runs.

Two sends that both find the session's run dead (or waiting for client tools) both retry:
exactly one run starts, the other gets ``state_already_running``, and nothing is stored twice.
"""

from __future__ import annotations

import asyncio
import datetime

import pytest
from django.utils import timezone

from helix_django.errors import AlreadyRunningError
from helix_django.models import Message, Run
from helix_django.runtime.executor import LocalExecutor, RunHandle
from tests.runtime import toolbox
from tests.runtime.conftest import (  # noqa: F401 - fixtures
    _close_worker_thread_connections,
    agent,
    executor,
    rows,
    run_chunks,
    session,
    stream_chunks,
    use_agents,
    user_message,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


async def dead_run(executor, session) -> str:  # noqa: F811
    """Start a slow run, then let this "process" die under it; return the run id (still live in the store).

    It dies once part of its answer is stored, so retiring it keeps a partial message (a
    fixed sleep was too short on a loaded machine: no answer row, one history row missing).
    """
    first = await executor.execute(session, [user_message("long")])
    await answered_in_part(session, first.run_id)
    assert executor.abandon(first.run_id)
    assert await executor.wait(first.run_id, 10) == "abandoned"  # its task ended, the run did not
    assert (await Run.objects.aget(pk=first.run_id)).is_live
    return first.run_id


async def answered_in_part(session, run_id: str, timeout_seconds: float = 10) -> None:  # noqa: F811
    """Wait until the stream holds a text delta of ``run_id``."""
    deadline = asyncio.get_running_loop().time() + timeout_seconds
    while not any(c["type"] == "text-delta" for c in run_chunks(await stream_chunks(session.stream_id), run_id)):
        assert asyncio.get_running_loop().time() < deadline, "the run wrote no answer"
        await asyncio.sleep(0.02)


# The winner's answer lasts about half a second: it is still live when the loser retries its start
# (a send after the winner ended would rightly start a run of its own).
WINNER = {"TEXT": "fine, this answer takes a moment", "PACE_TPS": 12}


def one_winner(results: list) -> RunHandle:
    handles = [r for r in results if isinstance(r, RunHandle)]
    refusals = [r for r in results if isinstance(r, AlreadyRunningError)]
    assert len(handles) == 1 and len(refusals) == len(results) - 1, results
    assert refusals == [] or refusals[0].to_body()["code"] == "state_already_running"
    return handles[0]


async def test_two_sends_after_a_dead_run_start_one_run(executor, session, use_agents):  # noqa: F811
    use_agents(default=agent({"PACE_TPS": 20}))  # still answering when its process "dies"
    dead = await dead_run(executor, session)
    use_agents(default=agent(WINNER))
    results = await asyncio.gather(
        executor.execute(session, [user_message("a")]),
        executor.execute(session, [user_message("b")]),
        return_exceptions=True,
    )
    won = one_winner(results)
    assert await executor.wait(won.run_id, 10) == "completed"
    assert (await Run.objects.aget(pk=dead)).status == "interrupted"
    assert await Run.objects.filter(session_id=session.id).acount() == 2
    history = await rows(session.id)
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]


async def test_two_processes_racing_after_an_expired_lease_start_one_run(session, use_agents):  # noqa: F811
    use_agents(default=agent({"PACE_TPS": 20}))  # still answering when its process "dies"
    first, second, third = LocalExecutor(), LocalExecutor(), LocalExecutor()
    try:
        dead = await dead_run(first, session)
        past = timezone.now() - datetime.timedelta(seconds=30)
        await Run.objects.filter(pk=dead).aupdate(lease_expires_at=past)  # the dead process's lease ran out
        use_agents(default=agent(WINNER))
        results = await asyncio.gather(
            second.execute(session, [user_message("a")]),
            third.execute(session, [user_message("b")]),
            return_exceptions=True,
        )
        won = one_winner(results)
        winner = second if results[0] is won else third
        assert await winner.wait(won.run_id, 10) == "completed"
        assert (await Run.objects.aget(pk=dead)).status == "interrupted"
        assert await Run.objects.filter(session_id=session.id).acount() == 2
        assert await Message.objects.filter(session_id=session.id, role="user").acount() == 2
    finally:
        for ex in (first, second, third):
            ex.close()


async def test_two_sends_while_client_tools_wait_supersede_it_once(executor, session, use_agents):  # noqa: F811
    steps = [{"TOOL_CALLS": [{"id": "c-1", "name": "pick_color", "arguments": {"prompt": "x"}}]}, {"TEXT": "ok"}]
    use_agents(default=agent({"STEPS": steps}, tools=[f"{toolbox.PATH}.pick_color"]))
    first = await executor.execute(session, [user_message("pick")])
    assert await executor.wait(first.run_id, 10) == "suspended_client_tool"
    use_agents(default=agent(WINNER, tools=[f"{toolbox.PATH}.pick_color"]))
    results = await asyncio.gather(
        executor.execute(session, [user_message("forget it")]),
        executor.execute(session, [user_message("no, really")]),
        return_exceptions=True,
    )
    won = one_winner(results)
    assert await executor.wait(won.run_id, 10) == "completed"
    assert (await Run.objects.aget(pk=first.run_id)).status == "superseded"
    assert await Run.objects.filter(session_id=session.id).acount() == 2
    history = await rows(session.id)
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]


async def test_a_keyed_send_racing_its_duplicate_after_a_dead_run_gets_one_run(executor, session, use_agents):  # noqa: F811
    use_agents(default=agent({"PACE_TPS": 20}))  # still answering when its process "dies"
    dead = await dead_run(executor, session)
    use_agents(default=agent({"TEXT": "fine", "PACE_TPS": 50}))
    message = user_message("keyed")
    results = await asyncio.gather(
        executor.execute(session, [message], request_key="0f8e2b3c-4d5a-4b6c-8d7e-9f0a1b2c3d4e"),
        executor.execute(session, [message], request_key="0f8e2b3c-4d5a-4b6c-8d7e-9f0a1b2c3d4e"),
        return_exceptions=True,
    )
    assert all(isinstance(r, RunHandle) for r in results), results
    assert results[0].run_id == results[1].run_id
    assert sorted(r.is_duplicate for r in results) == [False, True]
    assert await executor.wait(results[0].run_id, 10) == "completed"
    assert (await Run.objects.aget(pk=dead)).status == "interrupted"
    assert await Run.objects.filter(session_id=session.id).acount() == 2


async def test_a_send_while_the_run_executes_here_is_refused_and_retires_nothing(executor, session, use_agents):  # noqa: F811
    use_agents(default=agent({"PACE_TPS": 20}))
    first = await executor.execute(session, [user_message("long")])
    with pytest.raises(AlreadyRunningError) as caught:
        await executor.execute(session, [user_message("again")])
    assert caught.value.to_body()["code"] == "state_already_running"
    run = await Run.objects.aget(pk=first.run_id)
    assert run.is_live and executor.is_local(first.run_id)
    await executor.cancel(session=session, run_id=first.run_id)
    assert await executor.wait(first.run_id, 10) == "cancelled"


async def test_three_keyed_duplicates_on_an_idle_session_share_one_run(executor, session, use_agents):  # noqa: F811
    use_agents(default=agent({"TEXT": "fine", "PACE_TPS": 50}))
    message = user_message("keyed")
    key = "7c1d2e3f-4a5b-4c6d-8e7f-0a1b2c3d4e5f"
    results = await asyncio.gather(
        *(executor.execute(session, [message], request_key=key) for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, RunHandle) for r in results), results
    assert len({r.run_id for r in results}) == 1 and [r.is_duplicate for r in results].count(False) == 1
    assert await executor.wait(results[0].run_id, 10) == "completed"
    assert await Message.objects.filter(session_id=session.id, role="user").acount() == 1


async def test_two_regenerates_after_a_dead_run_start_one_run_and_the_other_gets_a_typed_conflict(
    executor,  # noqa: F811
    session,  # noqa: F811
    use_agents,  # noqa: F811
):
    from helix_django.errors import HelixError

    use_agents(default=agent({"PACE_TPS": 20}))  # still answering when its process "dies"
    dead = await dead_run(executor, session)
    use_agents(default=agent(WINNER))
    results = await asyncio.gather(
        executor.regenerate(session=session),
        executor.regenerate(session=session),
        return_exceptions=True,
    )
    handles = [r for r in results if isinstance(r, RunHandle)]
    refusals = [r for r in results if isinstance(r, HelixError)]
    assert len(handles) == 1 and len(refusals) == 1, results
    # The loser's retire found the run already retired: a 409 about the run start, never "superseded".
    assert refusals[0].to_body()["code"] in ("state_already_running", "state_run_start_conflict"), results
    assert await executor.wait(handles[0].run_id, 10) == "completed"
    assert (await Run.objects.aget(pk=dead)).status == "interrupted"


async def test_a_send_blocked_by_a_run_that_ends_before_the_current_run_is_read_starts(
    executor,  # noqa: F811
    session,  # noqa: F811
    use_agents,  # noqa: F811
    monkeypatch,
):
    """The blocking run ends between the refused run-start commit and the read of the
    session's current run: the send is tried again and starts (it used to get a 409)."""
    use_agents(default=agent({"PACE_TPS": 5}))  # still answering when the cancel comes, on a loaded machine
    blocking = await executor.execute(session, [user_message("long")])
    launch = executor.starts.launch

    async def ending_the_blocking_run_after_a_refusal(*args, **kwargs):
        try:
            return await launch(*args, **kwargs)
        except AlreadyRunningError:
            # The blocking run ends now, before the send reads the session's current run.
            await executor.cancel(session=session, run_id=blocking.run_id)
            assert await executor.wait(blocking.run_id, 10) == "cancelled"
            raise

    monkeypatch.setattr(executor.starts, "launch", ending_the_blocking_run_after_a_refusal)
    use_agents(default=agent({"TEXT": "fine"}))
    handle = await executor.execute(session, [user_message("next")])
    assert await executor.wait(handle.run_id, 10) == "completed"
    assert await Run.objects.filter(session_id=session.id).acount() == 2
