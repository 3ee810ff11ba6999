"""A rolling restart of two processes: the one stopped mid-answer hands its durable answer to the other.

Processes A and B serve the same site on PostgreSQL (the suite's PostgreSQL pass) with the
Redis stream manager and the channels_redis layer, each with the relaunch scan
(``RecoveryOnStartup``, every second). A durable answer (the scripted provider's ``DURABLE``
operation, kept in the Redis cache both share) streams on A; A gets SIGTERM, as a deploy
sends it. A's drain leaves the durable run to the next scan (docs/deploy.md, "Deploys"); once A
has exited its process is certainly gone (``helix_django.processes``), so B's next scan takes
the run over at once, not a lease later, and finishes the same run from the provider (000,
"Recovery on app relaunch"). A client resuming from its cursor against B gets the rest of the
answer exactly once (or, where the run completed from the provider's output in one piece, is
told to reload, and the snapshot holds the answer once). Then A comes back and serves again.

Asserted: one run, completed, with the full text once; one provider operation, no longer
running; B's first word about the run (its scan's lease or a new status) within a few seconds
of A's exit, well below the lease.
"""

from __future__ import annotations

import time

import httpx
import pytest
from asgiref.sync import async_to_sync

from helix_django.models import Message, Run, RunStatus
from helix_django.runtime.providers.scripted import ScriptedProvider
from tests.recovery.live_chat import PREFIX, REPLY, LiveChat, agent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(150),
]

#: 41 tokens at 8 per second: the operation runs about 5 s and goes on while A stops.
DURABLE = {"TEXT": REPLY, "PACE_TPS": 8, "DURABLE": True, "CACHE_ALIAS": "helix"}
LEASE_SECONDS = 30
#: What "at once" means here: B scans every second; PostgreSQL and the drain add a little.
TAKEOVER_BOUND_SECONDS = 5.0
ENDINGS = ("finish", "data-stream-resync", "error")


def _first_word_about(run: Run, holder: str, seconds: float) -> float:
    """Return the seconds until ``run`` is no longer ``streaming`` under ``holder`` (another process took it)."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        run.refresh_from_db()
        if run.status != RunStatus.STREAMING or run.lease_owner != holder:
            return time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError(f"nobody took the run over in {seconds} s")


def _resume_until_ended(chat: LiveChat, cursor: int, seconds: float) -> list[dict]:
    """Resume from ``cursor`` until the run's ending frame; return the frames read from ``cursor`` on."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        answer = chat.resume(cursor, timeout=30)
        if isinstance(answer, list) and any(c.get("type") in ENDINGS for c in answer):
            return answer
        time.sleep(0.3)
    raise AssertionError("the run never ended on the wire")


def test_a_sigtermed_process_hands_its_durable_answer_to_the_other_one(daphne_server_factory, scale_env, user_headers):
    helix = {**agent(DURABLE), "LEASE_SECONDS": LEASE_SECONDS, "LEASE_RENEW_SECONDS": 10, "DRAIN_SECONDS": 1}
    kwargs = {"settings_module": "tests.scale.settings", "helix": helix, "env": scale_env}
    a = daphne_server_factory(asgi_app="tests.recovery.asgi_recovering:application", **kwargs)
    b = daphne_server_factory(asgi_app="tests.recovery.asgi_recovering:application", **kwargs)
    headers = {"Authorization": user_headers["Authorization"]}

    on_a = LiveChat(a, headers)
    on_a.send(until=lambda c: len(c.text) > 10)
    cursor, seen = on_a.chunks[-1][0], on_a.text
    run = on_a.run()
    holder, operation = run.lease_owner, run.provider_operation_id
    assert run.status == RunStatus.STREAMING and operation and holder

    assert a.stop(timeout=15) == 0  # the deploy's SIGTERM: the drain leaves the durable run to the next scan
    takeover_seconds = _first_word_about(run, holder, LEASE_SECONDS)
    print(f"\nB's first word about the run {takeover_seconds:.2f} s after A exited (lease {LEASE_SECONDS} s)")
    assert takeover_seconds < TAKEOVER_BOUND_SECONDS

    on_b = LiveChat(b, headers, session_id=on_a.session_id)
    ending = _resume_until_ended(on_b, cursor, 40)
    assert not [c for c in ending if c.get("type") == "error"], ending
    rest = "".join(c.get("delta", "") for c in ending if c.get("type") == "text-delta")
    streamed = any(c.get("type") == "finish" for c in ending)
    print(f"the client resuming on B got {'the rest streamed' if streamed else 'a resync to the snapshot'}")
    if streamed:
        assert seen + rest == REPLY  # the rest, token by token, exactly once after the cursor
    else:  # completed from the provider's output in one piece: the client reloads the snapshot
        snapshot = httpx.get(b.url(f"{PREFIX}/sessions/{on_a.session_id}/snapshot"), headers=headers, timeout=10)
        [answer] = [m for m in snapshot.json()["messages"] if m["role"] == "assistant"]
        assert "".join(p.get("text", "") for p in answer["parts"] if p.get("type") == "text") == REPLY

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, (run.status, run.error_detail())
    assert list(Run.objects.filter(session_id=on_a.session_id).values_list("id", flat=True)) == [run.id]
    assert run.provider_operation_id == operation  # one provider operation for the turn
    assert Message.objects.get(session_id=on_a.session_id, position=1).text == REPLY
    state = async_to_sync(ScriptedProvider(DURABLE).retrieve)(operation)
    assert state.status == "completed" and state.text == REPLY  # none left running

    a.start()  # A comes back after its deploy and serves again
    again = LiveChat(a, headers)
    again.send(until=lambda c: any(chunk.get("type") == "finish" for _s, chunk in c.chunks), timeout=40)
    assert again.text == REPLY
    assert Run.objects.filter(session_id=on_a.session_id).count() == 1
