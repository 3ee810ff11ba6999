"""Thread hops of a chat send and of its delivered deltas: a design invariant, counted, never timed (issue 23).

A thread hop (a call run on another thread: the ORM's, the validation worker's) costs
more CPU than the transaction it carries. Counted here through the event loop's
``run_in_executor``, which asgiref's ``sync_to_async`` and the validation worker use:

- before a send's first byte (a new chat's, and the next message of a session's): 1, the
  host's middleware with authentication and the session read, then, in the same trip, the
  run-start commit with the stream claim and the opening chunks (issue 23's "one hop and
  one transaction for auth + session + run start + claim + first append");
- per send, at most 2 besides the flushes while the answer streams: that one and the
  run's last writes (issue 23's "at most 3 thread hops per send");
- while the answer streams to a reader at the head: no read of the stream reaches the
  database (the tail serves it), the response's own task makes no hop, and no flush
  leaves the event loop but the database manager's on PostgreSQL (on SQLite
  ``INLINE_WRITES``, the default, commits them on the loop).

Counted on every stream manager (database, memory, Redis) with the store on the test database.
"""

from __future__ import annotations

import asyncio
import functools

import pytest
from channels.testing import ApplicationCommunicator
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import override_settings
from rest_framework.authtoken.models import Token

from helix_django.models import Run
from tests.transport.conftest import agent_settings, chat_scope, new_session_id, user_message

pytestmark = pytest.mark.django_db(transaction=True)
READS = {"DatabaseStreamManager._read_sync", "DatabaseStreamManager._info_sync"}
#: The run's completion: one transaction with its stream (database manager), or its commits alone.
COMPLETION = {"database": "complete_in_transaction", "memory": "Completion.commit", "redis": "Completion.commit"}
REPLY = " ".join(f"w{i}" for i in range(40))


def _target(fn):
    """The function a hop runs (asgiref wraps it as the last partial of its thread handler)."""
    while isinstance(fn, functools.partial):
        fn = fn.args[-1] if fn.args and isinstance(fn.args[-1], functools.partial) else fn.func
    return getattr(fn, "__qualname__", type(fn).__qualname__)  # never repr(): a QuerySet would run


class HopCounter:
    """``(function, task name)`` of each call run through ``loop.run_in_executor`` while installed."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.hops = loop, []
        self._original = loop.run_in_executor

    def __enter__(self) -> HopCounter:
        def counting(executor, fn, *args):
            task = asyncio.current_task()
            self.hops.append((_target(fn), task.get_name() if task else ""))
            return self._original(executor, fn, *args)

        self.loop.run_in_executor = counting
        return self

    def __exit__(self, *exc) -> None:
        self.loop.run_in_executor = self._original


async def _token() -> str:
    def create():
        user = get_user_model().objects.create_user(username="hops", password="pw-not-secret")
        return Token.objects.create(user=user).key

    return await asyncio.to_thread(create)


async def _send(
    key: str,
    pace: float,
    manager: dict,
    *,
    sid: str = "",
    history: list | None = None,
    message: dict | None = None,
    request_key: str = "",
):
    """POST a chat (a new one without ``sid``); return (hops before the first chunk frame, hops after it, frames)."""
    from tests.asgi import application

    sid = sid or new_session_id()
    scope, body = chat_scope(key, sid, [*(history or []), message or user_message("hi")], request_key)
    with override_settings(
        HELIX={**agent_settings(TEXT=REPLY, PACE_TPS=pace), "STREAM_MANAGERS": {"default": manager}}
    ):
        communicator = ApplicationCommunicator(application, scope)
        with HopCounter(asyncio.get_running_loop()) as counter:
            await communicator.send_input({"type": "http.request", "body": body, "more_body": False})
            start = await communicator.receive_output(10)
            assert start["type"] == "http.response.start" and start["status"] == 200
            while True:
                message = await communicator.receive_output(10)
                chunk = message.get("body", b"")
                if chunk.startswith(b"id: ") or b"\nid: " in chunk:  # the first frame (it may follow ": stream-open")
                    break
            before = list(counter.hops)
            frames = [message["body"]]  # a replay may send the whole stream in one body
            while b"[DONE]" not in frames[-1] and message.get("more_body"):
                message = await communicator.receive_output(10)
                frames.append(message.get("body", b""))
            after = counter.hops[len(before) :]
        await communicator.wait(5)
    assert await Run.objects.filter(session_id=sid, status="completed").aexists()
    return before, after, frames


async def _runs_ended() -> None:
    """Wait for the tasks of this loop's runs (``helix-run-*``, their endings' signal receivers included).

    A reader may see a run's last frame before the run's ending sent ``run_finished``,
    whose receivers make hops of their own.
    """
    tasks = [task for task in asyncio.all_tasks() if task.get_name().startswith("helix-run")]
    if tasks:
        await asyncio.wait(tasks, timeout=10)


def _waited(before: list[tuple[str, str]]) -> list[str]:
    """The request's own hops; the run's task (helix-run-*) and its flushes run beside it."""
    return [name for name, task in before if not task.startswith("helix-run") and "append" not in name]


async def test_a_new_chat_waits_for_one_thread_hop_before_its_first_byte(backend):
    key = await _token()
    before, after, _frames = await _send(key, pace=0, manager=backend[1])
    # A small body is checked on the loop; the run-start commit (with the claim where it
    # joins it) follows the middleware in the same trip to the ORM's thread.
    assert _waited(before) == ["_admit"], _waited(before)  # ["_admit", "start_run"] before


async def test_the_next_message_of_a_session_waits_for_one_thread_hop_before_its_first_byte(backend):
    key = await _token()
    sid = new_session_id()
    await _send(key, pace=0, manager=backend[1], sid=sid)
    await _runs_ended()  # the first turn is over, its ending's receivers included
    history = [user_message("hi"), {"id": "answer-1", "role": "assistant", "parts": [{"type": "text", "text": "w0"}]}]
    before, _after, _frames = await _send(key, pace=0, manager=backend[1], sid=sid, history=history)
    # The stream head is read in that trip (database manager) or on the loop (memory, Redis).
    assert _waited(before) == ["_admit"], _waited(before)  # before: 3 (database: the head read had its own), else 2


async def test_a_keyed_send_waits_for_one_thread_hop_and_its_repeat_attaches_to_its_run(backend):
    key = await _token()
    sid, message = new_session_id(), user_message("hi")
    before, _after, _frames = await _send(
        key, pace=0, manager=backend[1], sid=sid, message=message, request_key="key-0001"
    )
    assert _waited(before) == ["_admit"], _waited(before)  # 3 before (the key's lookup had its own)
    if backend[0] == "memory":
        return  # each send's override of HELIX makes a new memory manager: the first stream is gone
    # The repeat (a client retrying after a drop) runs nothing again: it streams the same run.
    _before, _after, again = await _send(
        key, pace=0, manager=backend[1], sid=sid, message=message, request_key="key-0001"
    )
    assert await Run.objects.filter(session_id=sid).acount() == 1
    assert b"[DONE]" in b"".join(again)


async def test_a_send_makes_two_thread_hops_besides_the_flushes_of_its_answer(backend):
    key = await _token()
    before, after, _frames = await _send(key, pace=0, manager=backend[1])
    # The send's own hops, besides the flushes of its answer while it streams (one per flush,
    # or none with INLINE_WRITES): the host's middleware, the session read and the run-start
    # commit (the claim, the opening chunks, the status, the conversation), the run's last
    # writes (its last step, the terminal commit, the last chunks and the stream's end).
    per_send = [name for name, _task in before + after if "append" not in name]
    assert per_send == ["_admit", COMPLETION[backend[0]]], per_send  # 15 before issue 23, then 3


async def test_deltas_reach_a_reader_at_the_head_without_a_thread_hop(backend):
    key = await _token()
    _before, after, frames = await _send(key, pace=100, manager=backend[1])
    deltas = sum(frame.count(b'"text-delta"') for frame in frames)
    assert deltas >= 5  # the answer streamed over many frames (coalescing merges some)
    assert [name for name, _task in after if name in READS] == []
    # The response's own task (the one that authenticated) makes no hop while it delivers.
    request_task = next(task for name, task in _before if name == "_admit")
    assert [name for name, task in after if task == request_task] == []
    if backend[0] != "database" or connection.vendor == "sqlite":  # flushes stay on the loop (group_commit.py)
        assert [name for name, _task in after if "append" in name] == []
