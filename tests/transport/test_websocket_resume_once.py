"""One WebSocket never carries a sequence twice: a repeated ``resume`` continues after what it sent (issue 17)."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from websockets.sync.client import connect

from helix_django.models import Message
from tests.transport.conftest import PREFIX, REPLY, new_session_id, user_message
from tests.transport.test_stream_and_ws_live import cookie_of, text_of

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def frames_until_end(ws, *, resumes_after=(), resume_from=0):
    """Read frames to the run's terminal; after the n-th chunk of each ``resumes_after`` send a resume."""
    frames, chunks = [], 0
    pending = list(resumes_after)
    while True:
        frame = json.loads(ws.recv(timeout=10))
        frames.append(frame)
        if frame["type"] == "chunk":
            chunks += 1
            while pending and chunks >= pending[0][0]:
                _, delay = pending.pop(0)
                time.sleep(delay)
                ws.send(json.dumps({"type": "resume", "from_sequence": resume_from}))
        if frame["type"] in ("end", "fail") and not pending:
            return frames


@pytest.mark.parametrize("delay", [0.0, 0.2], ids=["back-to-back", "200ms-apart"])
def test_a_repeated_resume_never_resends_a_sequence(shared_server, users, delay):
    a_user, headers = users["a"]
    sid = new_session_id()
    assert httpx.post(shared_server.url(f"{PREFIX}/sessions/"), json={"id": sid}, headers=headers).status_code == 201
    url = f"{shared_server.ws_base_url}/ws{PREFIX}/sessions/{sid}/"
    with connect(url, additional_headers=cookie_of(a_user)) as ws:
        ws.send(json.dumps({"type": "send", "messages": [user_message("hello")]}))
        run = json.loads(ws.recv(timeout=10))
        assert run["type"] == "run"
        start = run["fromSequence"]
        # Two resumes from the run's start while chunks are arriving, then read to the end.
        frames = frames_until_end(ws, resumes_after=[(15, 0.0), (15, delay)], resume_from=start)
    sequences = [f["sequence"] for f in frames if f["type"] == "chunk"]
    assert len(sequences) == len(set(sequences)), "a sequence was delivered twice on one socket"
    assert sequences == sorted(sequences)
    assert text_of(frames) == REPLY
    assert Message.objects.get(session_id=sid, role="assistant").text == REPLY
