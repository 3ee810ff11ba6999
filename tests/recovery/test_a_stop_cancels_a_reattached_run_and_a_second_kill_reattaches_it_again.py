"""A run re-attached after a restart is a run of the process that took it: Stop ends it, a second crash re-attaches it.

Re-attach (``helix_django/runtime/reattach.py``) makes the run a local run of the scanning
process. Proven here with the real ``openai`` SDK in background mode against a paced
``FakeOpenAI`` and real daphne processes: the user's Stop of the re-attached run cancels it
and its provider operation (no answer left generating unseen); a second SIGKILL after the
re-attach is recovered the same way, so the client resuming from its first cursor still
gets the answer exactly once, as the same run, from one provider operation.
"""

from __future__ import annotations

import time

import httpx
import pytest

from helix_django.models import Message, Run, RunStatus
from helix_django.testing import FakeOpenAI, Reply
from tests.recovery.live_chat import LiveChat, creates, openai_helix, user_token

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(150)]

ANSWER = " ".join(f"piece{i}" for i in range(120)) + "."
INTERVAL = 0.15


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        yield server


def killed_mid_answer(daphne_server_factory, fake: FakeOpenAI) -> tuple:
    """A server answering from a paced background response, SIGKILLed after 10 deltas: ``(server, chat, cursor)``."""
    fake.replies.append(Reply(text=ANSWER, interval_seconds=INTERVAL))
    server = daphne_server_factory(asgi_app="tests.recovery.asgi_recovering:application", helix=openai_helix(fake))
    chat = LiveChat(server, user_token())
    chat.send(until=lambda c: sum(1 for _s, k in c.chunks if k.get("type") == "text-delta") >= 10)
    server.kill()
    return server, chat, chat.chunks[-1][0]


def reattached(chat: LiveChat, owner: str, *, more_than: int, timeout: float = 20.0) -> Run:
    """Wait until the run streams again under another lease owner than ``owner`` and its stream grew."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = chat.run()
        if run.status == RunStatus.STREAMING and run.lease_owner != owner and len(chat.persisted_text()) > more_than:
            return run
        time.sleep(0.1)
    raise AssertionError("the run was not re-attached")


def test_stop_of_a_reattached_run_cancels_it_and_its_provider_operation(daphne_server_factory, fake):
    server, chat, _cursor = killed_mid_answer(daphne_server_factory, fake)
    run = chat.run()
    record = fake.responses[run.provider_operation_id]
    server.start()
    run = reattached(chat, run.lease_owner, more_than=len(chat.text))

    stop = httpx.post(server.url(f"/helix/api/sessions/{chat.session_id}/runs/{run.id}/cancel"), headers=chat.headers)
    assert stop.status_code == 200, stop.text
    deadline = time.monotonic() + 15
    while (status := chat.run().status) != RunStatus.CANCELLED and time.monotonic() < deadline:
        time.sleep(0.1)
    assert status == RunStatus.CANCELLED
    while fake.status_of(record) == "in_progress" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert fake.status_of(record) == "cancelled"  # nothing left generating unseen
    assert Run.objects.filter(session_id=chat.session_id).count() == 1 and creates(fake) == 1


def test_a_reattached_run_killed_again_is_reattached_again_and_completes_once(daphne_server_factory, fake):
    server, chat, cursor = killed_mid_answer(daphne_server_factory, fake)
    first = chat.run()
    operation, message_id = first.provider_operation_id, first.response_message_id
    server.start()
    again = reattached(chat, first.lease_owner, more_than=len(chat.text))
    server.kill()  # the process that re-attached it dies too

    server.start()
    rest = chat.resume_through(cursor, seconds=60)
    chunks = [c for _t, _s, c in rest]
    assert chunks[-1]["type"] == "finish"
    assert not any(c.get("type") in ("data-stream-resync", "error") for c in chunks)
    deltas = "".join(c["delta"] for c in chunks if c.get("type") == "text-delta")
    assert chat.text + deltas == ANSWER  # exactly once through two crashes

    run = chat.run()
    assert run.id == first.id == again.id and run.status == RunStatus.COMPLETED, (run.status, run.error_detail())
    assert run.provider_operation_id == operation and run.response_message_id == message_id
    assert Message.objects.get(session_id=chat.session_id, position=1).text == ANSWER
    assert Run.objects.filter(session_id=chat.session_id).count() == 1 and creates(fake) == 1
