"""A generation whose provider operation outlives its server finishes as the same generation.

Seen: with a durable provider operation, a SIGKILL (or a deploy's SIGTERM) mid-answer and a restart ended the run
``interrupted`` with the partial text although the provider went on generating; the client
resuming from its cursor got ``run_interrupted`` and no rest. Now the restarted process's
relaunch scan finds the operation still running, follows it (the run is ``recovering``), and
completes the same run from the provider's output: the client resuming from its cursor is
told to reload (``data-stream-resync``) and finishes cleanly; no Continue, no Regenerate, no
second provider operation.
"""

from __future__ import annotations

import time

import pytest

from helix_django.models import Message, Run, RunStatus
from tests.recovery.live_chat import REPLY, LiveChat, agent, user_token

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

#: 41 tokens at 8 per second: the operation runs about 5 s, and goes on while no server is up.
DURABLE = {"TEXT": REPLY, "PACE_TPS": 8, "DURABLE": True, "CACHE_ALIAS": "helix"}


def _resume_until_ended(chat: LiveChat, cursor: int, seconds: float) -> list:
    """Resume from ``cursor`` until the chat route ends the run (a retryable drop means: come back)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        answer = chat.resume(cursor, timeout=30)
        if isinstance(answer, list) and any(c.get("type") in ("finish", "data-stream-resync") for c in answer):
            return answer
        time.sleep(0.5)
    raise AssertionError("the run never ended on the wire")


@pytest.mark.parametrize("stop", ["sigkill", "sigterm"])
def test_a_stopped_servers_durable_answer_completes_as_the_same_run(daphne_server_factory, stop):
    server = daphne_server_factory(
        asgi_app="tests.recovery.asgi_recovering:application",
        helix={**agent(DURABLE), "LEASE_SECONDS": 30, "LEASE_RENEW_SECONDS": 10, "DRAIN_SECONDS": 1},
    )
    chat = LiveChat(server, user_token())
    chat.send(until=lambda c: len(c.text) > 10)
    cursor = chat.chunks[-1][0]
    if stop == "sigkill":
        server.kill()
    else:  # a deploy: the drain leaves the durable operation to the next process
        assert server.stop(timeout=15) == 0
    run = chat.run()
    operation = run.provider_operation_id
    assert run.status == RunStatus.STREAMING and operation

    server.start()
    ending = _resume_until_ended(chat, cursor, 40)
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, (run.status, run.error_detail())
    assert Run.objects.filter(session_id=chat.session_id).count() == 1  # no second generation
    assert run.provider_operation_id == operation
    answer = Message.objects.get(session_id=chat.session_id, position=1)
    assert answer.text == REPLY and answer.metadata["helix"]["partial"] is False
    assert any(c.get("type") == "data-stream-resync" for c in ending)
