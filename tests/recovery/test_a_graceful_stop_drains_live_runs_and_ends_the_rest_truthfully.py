"""A graceful stop (SIGTERM, what every deploy sends) drains live runs, then ends the rest truthfully at once.

Seen: daphne exited 0.3 s after SIGTERM; nothing drained or released its leases, and the run
was left ``streaming`` until a later scan ended it ``interrupted`` although the answer would
have finished within a second. Now the process stops taking runs (a send is a typed,
retryable 503), lets its live runs finish for ``HELIX["DRAIN_SECONDS"]``, ends those still
running ``interrupted`` (partial kept, stream failed with the typed error) and only then exits.
"""

from __future__ import annotations

import signal
import threading

import httpx
import pytest

from helix_django.models import RunStatus
from tests.recovery.live_chat import LiveChat, agent, user_token

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

WORDS = " ".join(f"w{i}" for i in range(30))


def _send_body(session_id: str) -> dict:
    message = {"id": f"u_{session_id}", "role": "user", "parts": [{"type": "text", "text": "more"}]}
    return {"id": session_id, "messages": [message], "trigger": "submit-message"}


def test_a_run_that_finishes_within_the_drain_completes_and_new_sends_are_refused(daphne_server_factory):
    server = daphne_server_factory(helix={**agent({"TEXT": WORDS, "PACE_TPS": 15}), "DRAIN_SECONDS": 20})
    headers = user_token()
    chat = LiveChat(server, headers)
    reading = threading.Thread(target=chat.send, kwargs={"until": lambda c: False, "timeout": 30})
    reading.start()
    chat.wait_for(lambda c: len(c.persisted_text()) > 5)
    server.process.send_signal(signal.SIGTERM)

    late = LiveChat(server, headers)
    refused = httpx.post(late.url, json=_send_body(late.session_id), headers=headers, timeout=10)
    assert refused.status_code == 503, refused.text
    assert refused.json()["code"] == "transport_server_draining" and refused.json()["retryable"] is True
    assert refused.headers.get("retry-after")

    assert server.wait_stopped(25) == 0
    reading.join(10)
    run = chat.run()
    assert run.status == RunStatus.COMPLETED, run.status
    assert chat.text == WORDS  # the reader saw the whole answer before the process exited


def test_a_run_still_live_when_the_drain_ends_is_interrupted_at_once_with_its_partial(daphne_server_factory):
    server = daphne_server_factory(helix={**agent({"TEXT": WORDS * 10, "PACE_TPS": 5}), "DRAIN_SECONDS": 1})
    chat = LiveChat(server, user_token())
    chat.send(until=lambda c: len(c.text) > 5)
    server.process.send_signal(signal.SIGTERM)
    assert server.wait_stopped(20) == 0

    run = chat.run()
    assert run.status == RunStatus.INTERRUPTED, run.status  # told now, not a lease later
    assert run.error_detail()["code"] == "run_interrupted"
    assert not run.lease_owner
    assert chat.persisted_text().startswith("w0 w1")
