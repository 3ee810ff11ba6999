"""Event-loop work per delivered delta of a paced answer: a design invariant, counted, never timed (issue 23).

At 10 live streams a delta is a flush of its own, and each trip round the event loop
costs more CPU than its framing. Counted through the real ASGI app (channels'
ApplicationCommunicator) while a paced answer streams to the sender, a reader at the
head, on every stream manager:

- the run's task takes one step per provider event: the provider's own wait gave the
  loop back, so the run does not yield again (``LoopRounds``, helix_django/runtime/steps.py);
  two before;
- no delta's flush waits for a ``call_soon`` round of the append queue
  (``AppendQueue._drain_now`` scheduled): nothing else was ready to join it
  (helix_django/streams/database/_append_queue.py); one before each (on PostgreSQL each keeps it);
- the memory manager's flush makes no task (one before each).

Counted by wrapping the running loop's ``call_soon`` and ``create_task`` (instance
attributes, as ``test_thread_hops_per_send_and_delta.py`` wraps ``run_in_executor``):
asyncio's tasks schedule their steps through ``call_soon``.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from channels.testing import ApplicationCommunicator
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import override_settings
from rest_framework.authtoken.models import Token

from helix_django.models import Run
from tests.transport.conftest import agent_settings, chat_scope, new_session_id, user_message

pytestmark = pytest.mark.django_db(transaction=True)
WORDS = 30
PACE_TPS = 50
"""20 ms between deltas, more than FLUSH_INTERVAL_MS (15): each delta is a flush of its own."""
#: Steps of the run's task while its answer streams beside its deltas: its last step's
#: commits and the writer's last flush (a handful, whatever the answer's length).
RUN_STEPS_BESIDE_DELTAS = 12
#: Append-queue rounds beside the deltas: the run's last flush and stream end may find other callbacks ready.
ROUNDS_BESIDE_DELTAS = 2


class LoopCounter:
    """While installed: steps of each task by name, helix's own callbacks, and tasks created by helix's code."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.steps: Counter[str] = Counter()
        self.callbacks: Counter[str] = Counter()
        self.tasks: Counter[str] = Counter()
        self._call_soon, self._create_task = loop.call_soon, loop.create_task

    def __enter__(self) -> LoopCounter:
        def call_soon(callback, *args, **kwargs):
            owner = getattr(callback, "__self__", None)
            if isinstance(owner, asyncio.Task):
                self.steps[owner.get_name()] += 1
            elif (getattr(callback, "__module__", "") or "").startswith("helix_django"):
                self.callbacks[callback.__qualname__] += 1
            return self._call_soon(callback, *args, **kwargs)

        def create_task(coro, **kwargs):
            frame = getattr(coro, "cr_frame", None)
            if frame is not None and frame.f_globals.get("__name__", "").startswith("helix_django"):
                self.tasks[coro.__qualname__] += 1
            return self._create_task(coro, **kwargs)

        self.loop.call_soon, self.loop.create_task = call_soon, create_task
        return self

    def __exit__(self, *exc) -> None:
        del self.loop.call_soon, self.loop.create_task

    def run_steps(self) -> int:
        return sum(count for name, count in self.steps.items() if name.startswith("helix-run"))


async def _token() -> str:
    def create():
        user = get_user_model().objects.create_user(username="steps", password="pw-not-secret")
        return Token.objects.create(user=user).key

    return await asyncio.to_thread(create)


async def _stream_answer(manager: dict) -> tuple[LoopCounter, int]:
    """POST a new chat with a paced answer; count from its first chunk frame to ``[DONE]``; return (counts, deltas)."""
    from tests.asgi import application

    key = await _token()
    sid = new_session_id()
    scope, body = chat_scope(key, sid, [user_message("hi")])
    reply = " ".join(f"w{i}" for i in range(WORDS))
    frames: list[bytes] = []
    with override_settings(
        HELIX={**agent_settings(TEXT=reply, PACE_TPS=PACE_TPS), "STREAM_MANAGERS": {"default": manager}}
    ):
        communicator = ApplicationCommunicator(application, scope)
        await communicator.send_input({"type": "http.request", "body": body, "more_body": False})
        start = await communicator.receive_output(10)
        assert start["type"] == "http.response.start" and start["status"] == 200
        while True:
            message = await communicator.receive_output(10)
            if message.get("body", b"").startswith(b"id: "):
                break
        with LoopCounter(asyncio.get_running_loop()) as counter:
            while True:
                message = await communicator.receive_output(10)
                frames.append(message.get("body", b""))
                if b"[DONE]" in frames[-1] or not message.get("more_body"):
                    break
        await communicator.wait(5)
    assert await Run.objects.filter(session_id=sid, status="completed").aexists()
    return counter, sum(frame.count(b'"text-delta"') for frame in frames)


async def test_a_paced_delta_costs_one_step_of_the_runs_task_and_no_append_round(backend):
    counter, deltas = await _stream_answer(backend[1])
    assert deltas >= WORDS - 3, deltas  # paced slower than the flush interval: a frame per delta
    assert counter.run_steps() <= deltas + RUN_STEPS_BESIDE_DELTAS, (counter.run_steps(), deltas, counter.steps)
    # At most the run's last writes meet other callbacks ready on the loop, and wait a round for them.
    if backend[0] != "database" or connection.vendor == "sqlite":  # on PostgreSQL each flush keeps its round
        assert counter.callbacks["AppendQueue._drain_now"] <= ROUNDS_BESIDE_DELTAS, counter.callbacks
    assert counter.tasks["MemoryStreamManager.append"] == 0, counter.tasks
