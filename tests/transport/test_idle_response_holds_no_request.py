"""An open, idle resume response lets go of what only its opening needed (issue 23: idle memory per response).

Once the response streams, it keeps the plan (filter, reader, run) and its headers: the
Django request the host's middleware ran on, the DRF request that authenticated it and
the user are garbage, as are the chunks it replayed. Checked by weak references taken
where each is made, after a collection, while the response is open and parked.
"""

from __future__ import annotations

import asyncio
import gc
import json
import weakref

import pytest
from channels.testing import ApplicationCommunicator
from django.test import override_settings
from rest_framework.request import Request

from helix_django.transport import auth, chat_caller, host
from tests.transport.conftest import agent_settings, new_session_id, send_body, user_message
from tests.transport.test_thread_hops_per_resume_open import _first_frame, _scope, _token

pytestmark = pytest.mark.django_db(transaction=True)


class _Recorded(Request):
    """DRF's Request, weakly recorded."""

    made: list[weakref.ref] = []

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _Recorded.made.append(weakref.ref(self))


async def test_an_idle_resume_holds_no_django_request_drf_request_or_user(monkeypatch):
    from tests.asgi import application

    key = await _token()
    sid = new_session_id()
    path = f"/helix/api/sessions/{sid}/chat"
    with override_settings(HELIX=agent_settings(TEXT="one two three four five six", HANG_AFTER_CHUNKS=3)):
        send = ApplicationCommunicator(application, _scope("POST", path, key, [(b"content-type", b"application/json")]))
        body = json.dumps(send_body(sid, [user_message("hi")])).encode()
        await send.send_input({"type": "http.request", "body": body, "more_body": False})
        await _first_frame(send)

        made = _Recorded.made
        made.clear()
        real_build = host.build_request

        def build_request(scope, body):
            request = real_build(scope, body)
            made.append(weakref.ref(request))
            return request

        def authenticate(*args, **kwargs):
            identity = real_authenticate(*args, **kwargs)
            made.append(weakref.ref(identity.user))
            return identity

        real_authenticate = chat_caller.authenticate
        monkeypatch.setattr(host, "build_request", build_request)
        monkeypatch.setattr(chat_caller, "authenticate", authenticate)
        monkeypatch.setattr(auth, "Request", _Recorded)
        resume = ApplicationCommunicator(application, _scope("GET", path, key))
        await resume.send_input({"type": "http.request", "body": b"", "more_body": False})
        await _first_frame(resume)
        await asyncio.sleep(0.05)  # parked, idle
        gc.collect()
        kinds = sorted({type(ref()).__name__ for ref in made if ref() is not None})
        recorded = len(made)
        for communicator in (resume, send):
            await communicator.send_input({"type": "http.disconnect"})
            await communicator.wait(5)
    assert recorded >= 3  # the Django request, the DRF request and the user were made
    assert kinds == []
