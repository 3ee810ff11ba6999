"""Runs on task workers (django-tasks-db ``db_worker`` subprocesses): hand-off, races, a killed worker."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.testing import ApplicationCommunicator
from django.test import override_settings
from django_tasks_db.models import DBTaskResult

from helix_django import store
from helix_django.models import Message, Run
from helix_django.recovery.scan import arecover
from helix_django.runtime.executor import get_executor
from helix_django.runtime.launchers.tasks import TasksLauncher
from helix_django.runtime.tasks_executor import TasksExecutor, execute_run
from helix_django.streams import get_stream_manager
from tests.conftest import redis_url
from tests.scale.settings import redis_channel_layer
from tests.scale.workers import Worker

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SCRIPTED = "helix_django.runtime.providers.scripted.ScriptedProvider"
EXECUTOR = "helix_django.runtime.tasks_executor.TasksExecutor"
REPLY = " ".join(f"word{i}" for i in range(60))


def helix(**options) -> dict:
    return {
        "EXECUTOR": EXECUTOR,
        "AGENTS": {
            "default": {
                "PROVIDER": {"BACKEND": SCRIPTED, "OPTIONS": {"TEXT": REPLY, **options}},
                "MODEL": "scripted-1",
                "SYSTEM_PROMPT": "You are a test assistant.",
                "TOOLS": [],
            }
        },
        "FLUSH_INTERVAL_MS": 2,
        "LEASE_SECONDS": 2,
        "LEASE_RENEW_SECONDS": 0.5,
    }


def user_message(text: str) -> dict:
    return {"id": f"u-{time.monotonic_ns()}", "role": "user", "parts": [{"type": "text", "text": text}]}


def worker_of(config: dict, prefix: str, *, batch: bool = False) -> Worker:
    env = {"HELIX_TEST_LAYER_PREFIX": prefix, "HELIX_TEST_REDIS_URL": redis_url()}
    return Worker(config, batch=batch, env=env, settings_module="tests.scale.settings").start()


async def run_chunks(session_id: str, run_id: str) -> list[tuple[int, dict]]:
    return [(s, c) for s, c in await get_stream_manager().read_all(session_id) if c.get("_run") == run_id]


def deltas(chunks: list[tuple[int, dict]]) -> str:
    return "".join(c["delta"] for _s, c in chunks if c["type"] == "text-delta")


async def wait_for(predicate, timeout: float = 60, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await predicate()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def layer_prefix():
    return f"helix-test-{uuid.uuid4().hex}"


@pytest.fixture
def tasks_helix(layer_prefix):
    """Apply ``helix(**options)`` and a shared channel layer in this process; return the dict for the workers.

    Workers write in other processes: the web process learns of their writes through the layer.
    """
    overrides = []

    def apply(**options) -> dict:
        value = helix(**options)
        override = override_settings(HELIX=value, CHANNEL_LAYERS=redis_channel_layer(layer_prefix))
        override.enable()
        overrides.append(override)
        return value

    yield apply
    for override in reversed(overrides):
        override.disable()


async def test_the_web_process_only_commits_and_claims_then_one_of_two_racing_workers_executes(
    tasks_helix, layer_prefix
):
    config = tasks_helix()
    executor = get_executor()
    assert isinstance(executor.launcher, TasksLauncher)
    session, _ = await store.aget_or_create_session("sess-race")
    handle = await executor.execute(session=session, messages=[user_message("hello")])
    try:
        # Readable at once: the opening chunks are in the stream, nothing else ran here.
        opening = await run_chunks(session.id, handle.run_id)
        assert [c["type"] for _s, c in opening] == ["helix-run-start", "start"]
        run = await Run.objects.aget(pk=handle.run_id)
        assert (run.status, run.lease_owner) == ("starting", executor.owner)
        # The same run handed out twice (a duplicate enqueue): two workers race for it.
        await execute_run.aenqueue(handle.run_id, executor.owner, {"approved": []})
        workers = [worker_of(config, layer_prefix, batch=True) for _ in range(2)]
        for worker in workers:
            assert await asyncio.to_thread(worker.wait, 120) == 0, worker.log_text()
        results = sorted([r.return_value async for r in DBTaskResult.objects.all()])
        assert results == ["completed", "skipped"]
        chunks = await run_chunks(session.id, handle.run_id)
        assert deltas(chunks) == REPLY
        assert [c["type"] for _s, c in chunks].count("finish") == 1
        sequences = [s for s, _c in chunks]
        assert sequences == sorted(set(sequences))
        run = await Run.objects.aget(pk=handle.run_id)
        assert run.status == "completed"
        assert run.lease_owner == ""
        message = await Message.objects.aget(session_id=session.id, ui_id=run.response_message_id)
        assert "".join(p.get("text", "") for p in message.parts if p["type"] == "text") == REPLY
    finally:
        await asyncio.to_thread(executor.close)  # not on a running loop: channels_redis flushes on loop.close()


async def test_a_worker_killed_mid_run_is_not_executed_twice_and_the_scan_interrupts_it(tasks_helix, layer_prefix):
    config = tasks_helix(PACE_TPS=20)
    executor = get_executor()
    session, _ = await store.aget_or_create_session("sess-kill")
    handle = await executor.execute(session=session, messages=[user_message("hello")])
    worker = worker_of(config, layer_prefix)
    try:

        async def some_text():
            return len([1 for _s, c in await run_chunks(session.id, handle.run_id) if c["type"] == "text-delta"]) >= 5

        await wait_for(some_text, what="the worker's first deltas")
        worker.kill()
        head = (await get_stream_manager().get_info(session.id)).head_sequence
        written = deltas(await run_chunks(session.id, handle.run_id))
        assert 0 < len(written) < len(REPLY)
        # Its lease expires; a fresh worker finds nothing to do (the task is not retried).
        await asyncio.sleep(2.5)
        again = worker_of(config, layer_prefix, batch=True)
        assert await asyncio.to_thread(again.wait, 120) == 0, again.log_text()
        assert (await get_stream_manager().get_info(session.id)).head_sequence == head
        run = await Run.objects.aget(pk=handle.run_id)
        assert run.status in ("starting", "streaming")
        # The relaunch scan marks it interrupted with its partial output, kept as partial.
        report = await arecover()
        assert report.counts.get("interrupted") == 1
        run = await Run.objects.aget(pk=handle.run_id)
        assert run.status == "interrupted"
        assert run.partial_chars == len(written)
        message = await Message.objects.aget(session_id=session.id, ui_id=run.response_message_id)
        assert "".join(p.get("text", "") for p in message.parts if p["type"] == "text") == written
        statuses = await sync_to_async(lambda: sorted(DBTaskResult.objects.values_list("status", flat=True)))()
        assert statuses == ["RUNNING"]  # the killed execution, never run again
    finally:
        worker.stop()
        await asyncio.to_thread(executor.close)  # not on a running loop: channels_redis flushes on loop.close()


def test_a_tasks_executor_without_cross_process_wake_ups_is_reported(caplog, layer_prefix):
    with caplog.at_level("WARNING", logger="helix_django.runtime.tasks_executor"):
        TasksExecutor().close()
    assert "no shared channel layer" in caplog.text
    caplog.clear()
    with override_settings(CHANNEL_LAYERS=redis_channel_layer(layer_prefix), HELIX=helix()):
        with caplog.at_level("WARNING", logger="helix_django.runtime.tasks_executor"):
            TasksExecutor().close()
    assert "no shared channel layer" not in caplog.text


async def test_a_send_through_the_chat_route_commits_claims_and_hands_off_in_one_hop_of_its_own(tasks_helix):
    from tests.transport.conftest import chat_scope
    from tests.transport.test_thread_hops_per_send_and_delta import HopCounter, _token

    tasks_helix()
    executor = get_executor()
    from tests.asgi import application

    sid = f"chat_{uuid.uuid4().hex[:16]}"
    scope, body = chat_scope(await _token(), sid, [user_message("hello")])
    communicator = ApplicationCommunicator(application, scope)
    try:
        with HopCounter(asyncio.get_running_loop()) as counter:
            await communicator.send_input({"type": "http.request", "body": body, "more_body": False})
            start = await communicator.receive_output(10)
            assert start["status"] == 200
            while b"id: " not in (await communicator.receive_output(10)).get("body", b""):  # may follow ": stream-open"
                pass
            before = [name for name, _task in counter.hops]
        await communicator.send_input({"type": "http.disconnect"})
        await communicator.wait(5)
        # The route's one hop (middleware, authentication, the run-start commit with the
        # claim), then the hand-off's enqueue (the tasks backend's database); nothing runs here.
        assert before[0] == "_admit" and "start_run" not in before, before
        run = await Run.objects.aget(session_id=sid)
        assert (run.status, run.lease_owner) == ("starting", executor.owner)
        enqueued = [r.args_kwargs["args"][:2] async for r in DBTaskResult.objects.all()]
        assert enqueued == [[run.id, executor.owner]]
        opening = await run_chunks(sid, run.id)
        assert [c["type"] for _s, c in opening] == ["helix-run-start", "start"]
    finally:
        await asyncio.to_thread(executor.close)
