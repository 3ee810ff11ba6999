"""ASGI sends and asyncio tasks of opening a resume, counted to its first chunk frame (issue 23).

Daphne's cost of a response is per send, and each task is a trip round the event loop.
A resume's headers go in ``http.response.start``; the ``: stream-open`` comment and the
frames replayed so far go in one ``http.response.body`` (three sends before: the comment
had its own body; on the raw stream route every replayed chunk had its own too). The
planning and the response share one disconnect watcher, so an open starts two tasks (the
planning's and the watcher), not three (the planning's watcher was cancelled and a second
one started for the response).

Every resume route is counted: the chat route's GET and a resume POST (the trailing
message is the session's), the AI SDK's ``GET <prefix>chat/<id>/stream``, and the raw
stream route with a cursor.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.testing import ApplicationCommunicator
from django.test import override_settings

from helix_django.transport.wire_ui import STREAM_OPEN
from tests.transport.conftest import agent_settings, new_session_id, send_body, user_message
from tests.transport.test_thread_hops_per_resume_open import _scope, _token

pytestmark = pytest.mark.django_db(transaction=True)
JSON = [(b"content-type", b"application/json")]


class TaskCounter:
    """Names of the coroutines of the tasks created on ``loop`` while installed (a run's own excluded)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.created = loop, []
        self._original = loop.get_task_factory()

    def __enter__(self) -> TaskCounter:
        def factory(loop, coro, **kwargs):
            task = asyncio.Task(coro, loop=loop, **kwargs)
            if not task.get_name().startswith("helix-run"):
                self.created.append(coro.__qualname__)
            return task

        self.loop.set_task_factory(factory)
        return self

    def __exit__(self, *exc) -> None:
        self.loop.set_task_factory(self._original)


async def _live_run(application, key: str):
    """Start a run that stays live and quiet; return ``(session id, its send's communicator, its send body)``."""
    sid = new_session_id()
    path = f"/helix/api/sessions/{sid}/chat"
    body = json.dumps(send_body(sid, [user_message("hi")])).encode()
    send = ApplicationCommunicator(application, _scope("POST", path, key, JSON))
    await send.send_input({"type": "http.request", "body": body, "more_body": False})
    while b"text-delta" not in (await send.receive_output(10)).get("body", b""):
        pass
    return sid, send, body


async def _open(application, scope: dict, body: bytes = b"") -> tuple[list[dict], list[str]]:
    """Open one resume; return its messages up to its first chunk frame, and the tasks its opening started."""
    resume = ApplicationCommunicator(application, scope)
    messages: list[dict] = []
    with TaskCounter(asyncio.get_running_loop()) as counter:
        await resume.send_input({"type": "http.request", "body": body, "more_body": False})
        while True:
            messages.append(await resume.receive_output(10))
            chunk = messages[-1].get("body", b"")
            if chunk.startswith(b"id: ") or b"\nid: " in chunk:
                break
        await asyncio.sleep(0.05)  # parked: a response starts nothing more while idle
    await resume.send_input({"type": "http.disconnect"})
    await resume.wait(5)
    return messages, counter.created


def _resume_scope(route: str, sid: str, key: str) -> tuple[dict, bool]:
    """The scope of a resume by ``route``, and whether it carries the send's body (a resume POST)."""
    if route == "chat GET":
        return _scope("GET", f"/helix/api/sessions/{sid}/chat", key), False
    if route == "chat POST":
        return _scope("POST", f"/helix/api/sessions/{sid}/chat", key, JSON), True
    if route == "AI SDK GET":
        return _scope("GET", f"/helix/api/chat/{sid}/stream", key), False
    return _scope("GET", f"/helix/api/sessions/{sid}/stream", key, [(b"last-event-id", b"1")]), False


async def _resume_open_of_a_live_run(route: str) -> tuple[list[dict], list[str]]:
    """Open a resume by ``route`` of a run that hangs after its first chunks; return its messages and tasks."""
    from tests.asgi import application

    key = await _token()
    with override_settings(HELIX=agent_settings(TEXT="one two three four five six", HANG_AFTER_CHUNKS=3)):
        sid, send, body = await _live_run(application, key)
        scope, with_body = _resume_scope(route, sid, key)
        opened = await _open(application, scope, body if with_body else b"")
        await send.send_input({"type": "http.disconnect"})
        await send.wait(5)
    return opened


@pytest.mark.parametrize("route", ["chat GET", "chat POST", "AI SDK GET", "raw stream"])
async def test_a_resume_open_sends_its_headers_then_one_body_with_every_replayed_frame(route):
    messages, _tasks = await _resume_open_of_a_live_run(route)
    assert [m["type"] for m in messages] == ["http.response.start", "http.response.body"]
    opening = messages[1]["body"]
    assert opening.startswith(STREAM_OPEN)
    assert opening.count(b"id: ") >= 3, opening  # the replayed chunks so far (start, start-step, text...)


@pytest.mark.parametrize("route", ["chat GET", "chat POST", "AI SDK GET"])
async def test_a_chat_resume_open_starts_its_planning_and_one_disconnect_watcher(route):
    _messages, tasks = await _resume_open_of_a_live_run(route)
    server_task = "ProtocolTypeRouter.__call__"  # the request's own task (the server starts it)
    # A POST that may be a send admits in a shielded task (a run it commits is opened even if the
    # request is cancelled); whether the session holds its message is known only in that hop.
    admitting = ["completes_despite_cancel.<locals>.run"] if route == "chat POST" else []
    assert sorted(tasks) == sorted([server_task, "plan_chat", "wait_for_disconnect", *admitting]), tasks
