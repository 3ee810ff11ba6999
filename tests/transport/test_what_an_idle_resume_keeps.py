"""What an open, idle resume keeps in memory, counted (issue 23: idle memory per open response).

An idle response is the server's task parked in a chain of coroutines, each keeping its
frame, plus the objects those frames hold. Counted here:

- the chain is the protocol router, the route, the response: the HTTP URL router returns
  the route's coroutine instead of awaiting it, and the pump runs in the response's own
  frame (two coroutine frames fewer, about 550 bytes);
- no ``ResponsePlan``, no routed scope (the router's copy, with its ``url_route``) and no
  ``asyncio.Lock`` outlive the planning (the frames hold what
  they send; sends are ordered without a lock);
- the replay filter keeps no empty sets (dicts as sets: 64 bytes each, not 216) and one
  sequence per attempt, not one per content chunk (a long replay kept them all).
"""

from __future__ import annotations

import asyncio
import gc
import json
import tracemalloc

import pytest
from channels.testing import ApplicationCommunicator
from django.test import override_settings

from helix_django.transport.plan import ResponsePlan
from helix_django.transport.replay import ResponseFilter
from tests.transport.conftest import agent_settings, new_session_id, send_body, user_message
from tests.transport.test_thread_hops_per_resume_open import _first_frame, _scope, _token

JSON = [(b"content-type", b"application/json")]


def _chain(task: asyncio.Task) -> list[str]:
    """The qualified names of the coroutines ``task`` is parked in, outermost first (to the first non-coroutine)."""
    names, awaited = [], task.get_coro()
    while awaited is not None and hasattr(awaited, "cr_code"):
        names.append(awaited.__qualname__)
        awaited = awaited.cr_await
    return names


@pytest.mark.django_db(transaction=True)
async def test_an_idle_resume_is_parked_in_the_router_the_route_and_the_response_only():
    from tests.asgi import application

    key = await _token()
    sid = new_session_id()
    path = f"/helix/api/sessions/{sid}/chat"
    with override_settings(HELIX=agent_settings(TEXT="one two three four five six", HANG_AFTER_CHUNKS=3)):
        send = ApplicationCommunicator(application, _scope("POST", path, key, JSON))
        body = json.dumps(send_body(sid, [user_message("hi")])).encode()
        await send.send_input({"type": "http.request", "body": body, "more_body": False})
        while b"text-delta" not in (await send.receive_output(10)).get("body", b""):
            pass
        resume = ApplicationCommunicator(application, _scope("GET", path, key))
        await resume.send_input({"type": "http.request", "body": b"", "more_body": False})
        await _first_frame(resume)
        await asyncio.sleep(0.05)  # parked on the run's next chunk
        chain = _chain(resume.future)
        response = resume.future.get_coro().cr_await.cr_await.cr_frame.f_locals["self"]
        gc.collect()
        plans = [o for o in gc.get_objects() if isinstance(o, ResponsePlan)]
        routed_scopes = [
            o for o in gc.get_objects() if isinstance(o, dict) and "url_route" in o and o.get("path") == path
        ]
        for communicator in (resume, send):
            await communicator.send_input({"type": "http.disconnect"})
            await communicator.wait(5)
    assert chain == ["ProtocolTypeRouter.__call__", "ChatConsumer.__call__", "StreamedResponse.run"]
    assert not [name for name, value in vars(response).items() if isinstance(value, asyncio.Lock)]
    assert plans == []  # neither the route nor the frames keep the plan once it is sent
    assert routed_scopes == []  # nor the router's copy of the scope (about 1 KiB with its url_route)


def _kept_bytes(build) -> tuple[int, object]:
    """Bytes still allocated after ``build()`` (its result kept), traced by tracemalloc."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = build()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, kept
    finally:
        tracemalloc.stop()


def _run_chunks(count: int) -> list[tuple[int, dict]]:
    head = [(1, {"type": "start", "_run": "r"}), (2, {"type": "start-step", "_run": "r", "_attempt": "a", "_step": 0})]
    text = [
        (3 + i, {"type": "text-delta", "id": "t", "delta": "x", "_run": "r", "_attempt": "a", "_step": 0})
        for i in range(count)
    ]
    return head + text


def test_a_replay_filter_keeps_one_sequence_per_attempt_whatever_the_length_of_the_run():
    short, long = _run_chunks(10), _run_chunks(5000)

    def prescanned(chunks):
        def build():
            response_filter = ResponseFilter(run_id="r", cursor=chunks[-1][0])
            response_filter.prescan(chunks)
            return response_filter

        return build

    kept_short, _ = _kept_bytes(prescanned(short))
    kept_long, response_filter = _kept_bytes(prescanned(long))
    assert kept_long - kept_short < 1024, (kept_short, kept_long)  # one list entry per chunk was 8 bytes + its int
    assert list(response_filter.sent_attempts) == ["a"]  # the client holds content of attempt a


def test_a_replay_filter_keeps_no_set():
    response_filter = ResponseFilter(run_id="r", owned_tool_call_ids=["call_1"])
    response_filter.prescan(_run_chunks(3))
    kept = [name for name, value in vars(response_filter).items() if isinstance(value, (set, frozenset))]
    assert kept == [], kept  # an empty set is 216 bytes, an empty dict 64
    assert "call_1" in response_filter.owned
