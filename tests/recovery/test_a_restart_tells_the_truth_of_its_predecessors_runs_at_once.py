"""A restarted server tells the truth about the runs its dead predecessor held, without waiting for their leases.

Seen: after a SIGKILL mid-answer and a restart, the chat page said Live (the snapshot
``active``) for 10-30 s, until the dead process's lease expired. The new process on the same
host knows its predecessor is gone (its process no longer exists), so its first relaunch scan
ends those runs at once: interrupted, partial kept, the stream failed with the typed error.
"""

from __future__ import annotations

import time

import pytest

from helix_django.models import RunStatus
from tests.recovery.live_chat import REPLY, LiveChat, agent, user_token

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

LEASE_SECONDS = 120
"""Far longer than the test waits: only knowing the predecessor is gone can end the run in time."""


def test_the_first_scan_after_a_restart_interrupts_a_dead_predecessors_run(daphne_server_factory):
    server = daphne_server_factory(
        asgi_app="tests.recovery.asgi_recovering:application",
        helix={**agent({"TEXT": REPLY, "PACE_TPS": 10}), "LEASE_SECONDS": LEASE_SECONDS},
    )
    chat = LiveChat(server, user_token())
    chat.send(until=lambda c: len(c.text) > 10)
    cursor = chat.chunks[-1][0]
    server.kill()
    run = chat.run()
    assert run.status == RunStatus.STREAMING and run.lease_owner

    server.start()
    started = time.monotonic()
    chat.resume(cursor, timeout=30)  # the first call of the new process starts its scan
    while run.status != RunStatus.INTERRUPTED and time.monotonic() - started < LEASE_SECONDS / 4:
        time.sleep(0.1)
        run.refresh_from_db()
    waited = time.monotonic() - started
    assert run.status == RunStatus.INTERRUPTED, (run.status, waited)  # told long before the lease expires
    assert run.error_detail()["code"] == "run_interrupted"
    ending = chat.resume(cursor, timeout=30)  # a client resuming from its cursor is told the same
    kinds = [chunk.get("type") for chunk in ending] if isinstance(ending, list) else [ending.status_code]
    assert "error" in kinds or 409 in kinds, ending


def test_a_live_process_keeps_its_own_runs(daphne_server_factory):
    """The scan of the process executing a run never ends it (its lease owner is alive)."""
    server = daphne_server_factory(
        asgi_app="tests.recovery.asgi_recovering:application",
        helix={**agent({"TEXT": "one two three four five six", "PACE_TPS": 4}), "LEASE_SECONDS": LEASE_SECONDS},
    )
    chat = LiveChat(server, user_token())
    assert chat.send(until=lambda c: False, timeout=30) is False  # read to the end of the answer
    assert chat.run().status == RunStatus.COMPLETED
