"""The asyncio tasks a plain send starts up to its first chunk frame (issue 23: time to first byte).

A send's hop to the ORM's thread runs in a shielded task of its own (a run it commits is
opened even if the request is cancelled) and its response watches for the disconnect in
another. The run is opened in that shielded task, and planning the response of the run is
one bounded read, so it runs in the request's own task: each task of their own cost trips
round the event loop, during which the new run's task went first, before the response's
first byte. The run's task still starts in a fresh context: it sees none of the request's
context variables.
"""

from __future__ import annotations

import asyncio
import contextvars
import json

import pytest
from django.test import override_settings

from helix_django.runtime.agent import RunLoop
from helix_django.runtime.runner import start_task
from tests.transport.conftest import agent_settings, new_session_id, send_body, user_message
from tests.transport.test_sends_and_tasks_per_resume_open import JSON, _open
from tests.transport.test_thread_hops_per_resume_open import _scope, _token

pytestmark = pytest.mark.django_db(transaction=True)


async def _send_new_chat(text: str = "one two") -> tuple[list[dict], list[str]]:
    """POST a new chat's first message (a scripted answer of ``text``) to its first chunk frame; see ``_open``."""
    from tests.asgi import application

    key = await _token()
    sid = new_session_id()
    with override_settings(HELIX=agent_settings(TEXT=text)):
        body = json.dumps(send_body(sid, [user_message("hi")])).encode()
        return await _open(application, _scope("POST", f"/helix/api/sessions/{sid}/chat", key, JSON), body)


@pytest.mark.parametrize("history", [False, True], ids=["new chat", "next message"])
async def test_a_plain_send_plans_its_response_in_the_request_task(history):
    from tests.asgi import application

    key = await _token()
    sid = new_session_id()
    path = f"/helix/api/sessions/{sid}/chat"
    with override_settings(HELIX=agent_settings(TEXT="one two three")):
        messages = [user_message("hi")]
        if history:
            first, _tasks = await _open(
                application, _scope("POST", path, key, JSON), json.dumps(send_body(sid, messages)).encode()
            )
            messages = [
                *messages,
                {"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "one"}]},
                user_message("again"),
            ]
        body = json.dumps(send_body(sid, messages)).encode()
        opened, tasks = await _open(application, _scope("POST", path, key, JSON), body)
    assert opened[0]["type"] == "http.response.start" and opened[0]["status"] == 200, opened[0]
    # The run's own tasks (its task, its lease renewal, its announcement) are the executor's.
    assert "plan_chat" not in tasks, tasks
    assert not any("_open_started" in task for task in tasks), tasks
    assert tasks.count("wait_for_disconnect") == 1, tasks
    assert tasks.count("completes_despite_cancel.<locals>.run") == 1, tasks  # the admitting hop


REQUEST_STATE = contextvars.ContextVar("request_state", default="unset")


async def test_a_task_started_for_a_run_sees_none_of_its_starters_context():
    REQUEST_STATE.set("the request's")

    async def read() -> str:
        return REQUEST_STATE.get()

    assert await start_task(read(), name="helix-run-test") == "unset"


async def test_a_sends_run_task_sees_none_of_the_requests_context(monkeypatch):
    from helix_django.transport import chat

    seen: list[str] = []
    run_forever, admit_and_open = RunLoop.run_forever, chat._admit_and_open

    async def recording(self):
        seen.append(REQUEST_STATE.get())
        return await run_forever(self)

    async def in_request_state(*args):
        REQUEST_STATE.set("the request's")  # as the host's middleware sets a language or a urlconf
        return await admit_and_open(*args)

    monkeypatch.setattr(RunLoop, "run_forever", recording)
    monkeypatch.setattr(chat, "_admit_and_open", in_request_state)
    await _send_new_chat()
    for _ in range(100):
        if seen:
            break
        await asyncio.sleep(0.01)
    assert seen == ["unset"]


async def test_a_sends_response_goes_out_before_its_runs_first_step(monkeypatch):
    from helix_django.transport.http import StreamedResponse

    order: list[str] = []
    run_step, send_body_ = RunLoop._run_step, StreamedResponse._send_body

    async def first_step(self):
        order.append("run")
        return await run_step(self)

    async def sending(self, data, **kwargs):
        order.append("response")
        return await send_body_(self, data, **kwargs)

    monkeypatch.setattr(RunLoop, "_run_step", first_step)
    monkeypatch.setattr(StreamedResponse, "_send_body", sending)
    await _send_new_chat()
    assert order[:2] == ["response", "run"], order
