"""A generation whose provider operation outlives its server goes on as the same generation, token by token.

Seen: with a durable provider operation, a SIGKILL (or a deploy's SIGTERM) mid-answer and a
restart ended the run ``interrupted``; later the restarted process followed the operation
and completed the run from its final output in one block (a ``data-stream-resync``). The
restarted process's relaunch scan re-attaches the run: the same run, attempt and message
go on from the operation's position, so the client resuming from its cursor gets the rest
of the text as deltas, exactly once, some of them live while the operation still runs,
then the clean ``finish``; no Continue, no Regenerate, no second provider operation.
"""

from __future__ import annotations

import time

import pytest

from helix_django.models import Message, Run, RunStatus
from tests.recovery.live_chat import REPLY, LiveChat, agent, user_token

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

#: 41 tokens at 4 per second: the operation runs about 10 s, and goes on while no server is up
#: and after the next one started (a loaded machine takes a few seconds to restart daphne).
DURABLE = {"TEXT": REPLY, "PACE_TPS": 4, "DURABLE": True, "CACHE_ALIAS": "helix"}


@pytest.mark.parametrize("stop", ["sigkill", "sigterm"])
def test_a_stopped_servers_durable_answer_goes_on_as_the_same_run(daphne_server_factory, stop):
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
    operation, message_id = run.provider_operation_id, run.response_message_id
    assert run.status == RunStatus.STREAMING and operation

    restarted = time.monotonic()
    server.start()
    rest = chat.resume_through(cursor, seconds=40)
    chunks = [c for _t, _s, c in rest]
    deltas = [(t, c["delta"]) for t, _s, c in rest if c.get("type") == "text-delta"]
    assert chunks[-1]["type"] == "finish"
    assert not any(c.get("type") in ("data-stream-resync", "error") for c in chunks)
    assert chat.text + "".join(d for _t, d in deltas) == REPLY  # the rest exactly once: nothing doubled or lost
    assert len(deltas) > 5 and deltas[-1][0] - deltas[0][0] > 0.5  # token by token, not one block
    print(f"first re-attached delta {deltas[0][0] - restarted:.2f}s after the restart")
    assert deltas[0][0] - restarted < 15

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, (run.status, run.error_detail())
    assert Run.objects.filter(session_id=chat.session_id).count() == 1  # no second generation
    assert run.provider_operation_id == operation and run.response_message_id == message_id
    answer = Message.objects.get(session_id=chat.session_id, position=1)
    assert answer.ui_id == message_id
    assert answer.text == REPLY and answer.metadata["helix"]["partial"] is False
