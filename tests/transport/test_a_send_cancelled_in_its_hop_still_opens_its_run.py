"""A chat send whose request is cancelled during its thread hop still opens and finishes its run.

The hop commits the run's start (002, "The run-start window"): from then on the run must
be claimed and run, whatever happens to the request, or it would wait for the relaunch
scan. The server cancels a request's task at shutdown or once its client is long gone;
here the request is cancelled while the hop is held on the ORM's thread.
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from channels.testing import ApplicationCommunicator
from django.test import override_settings

from helix_django.models import Run, RunStatus
from helix_django.runtime.executor import Executor
from tests.transport.conftest import agent_settings, new_session_id, send_body, user_message
from tests.transport.test_sends_and_tasks_per_resume_open import JSON
from tests.transport.test_thread_hops_per_resume_open import _scope, _token

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_send_cancelled_during_its_hop_opens_and_completes_its_run(monkeypatch):
    from tests.asgi import application

    in_hop, release = threading.Event(), threading.Event()
    start = Executor.start_send_in_thread

    def held(self, *args, **kwargs):
        started = start(self, *args, **kwargs)  # the run-start commit has landed
        in_hop.set()
        release.wait(10)
        return started

    monkeypatch.setattr(Executor, "start_send_in_thread", held)
    key = await _token()
    sid = new_session_id()
    with override_settings(HELIX=agent_settings(TEXT="one two three")):
        request = ApplicationCommunicator(application, _scope("POST", f"/helix/api/sessions/{sid}/chat", key, JSON))
        body = json.dumps(send_body(sid, [user_message("hi")])).encode()
        await request.send_input({"type": "http.request", "body": body, "more_body": False})
        assert await asyncio.to_thread(in_hop.wait, 10)
        request.future.cancel()  # as the server cancels a request's task
        with pytest.raises(asyncio.CancelledError):
            await request.future
        release.set()
        run = None
        for _ in range(300):
            run = await Run.objects.filter(session_id=sid).afirst()
            if run is not None and run.status == RunStatus.COMPLETED:
                break
            await asyncio.sleep(0.02)
    assert run is not None and run.status == RunStatus.COMPLETED, run and run.status
