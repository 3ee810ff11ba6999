"""Reading a run's chunks (recovery rebuilds, the admin's run pages) reads what the run wrote, no more.

Found by review (sixteenth session): ``aread_run_chunks`` for a run with no chunks after its
start (a process killed between the run-start commit and its stream claim) read the rest of
the session's stream, so the admin page of such a run cost as much as every later turn.
Checked on each stream manager by counting what the manager hands back.
"""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import async_to_sync
from django.test import override_settings

from helix_django import store
from helix_django.conf import helix_settings
from helix_django.models import Run
from helix_django.recovery.partial import aread_run_chunks, arebuild_partial
from helix_django.streams import get_stream_manager
from tests.recovery.factories import InFlight, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

MANAGERS = {
    "database": None,
    "memory": {"BACKEND": "helix_django.streams.memory.MemoryStreamManager", "OPTIONS": {}},
    "redis": {
        "BACKEND": "helix_django.streams.redis.RedisStreamManager",
        "OPTIONS": {"CONNECTION_ALIAS": "helix", "KEY_PREFIX": "", "stream_ttl": 600},
    },
}
LATER_TEXT = "later turn words " * 400


@pytest.fixture(params=sorted(MANAGERS))
def counted_reads(request, monkeypatch):
    """The session's stream manager, with a list of the chunk counts each ``read_after`` returned."""
    config = MANAGERS[request.param]
    if config is None:
        overrides = {}
    else:
        config = {**config, "OPTIONS": dict(config["OPTIONS"])}
        if request.param == "redis":
            config["OPTIONS"]["KEY_PREFIX"] = f"helix-test:{uuid.uuid4().hex}"
        overrides = {"STREAM_MANAGERS": {"default": config}}
    with override_settings(HELIX={**helix_settings.user_settings, **overrides}):
        manager = get_stream_manager()
        reads: list[int] = []
        original = manager.read_after

        async def read_after(*args, **kwargs):
            batch, info = await original(*args, **kwargs)
            reads.append(len(batch))
            return batch, info

        monkeypatch.setattr(manager, "read_after", read_after)
        yield reads


def _killed_before_its_claim(session_id: str) -> str:
    """A run whose process died after the run-start commit, before its stream claim: no chunks."""
    store.get_or_create_session(session_id)
    result = store.start_run(
        store.RunStartRequest(
            session_id=session_id,
            input_messages=[user_message("u-killed")],
            stream_sequence=0,
            provider="scripted",
            model="scripted-1",
            turn_message_id="u-killed",
            lease_owner="proc-dead",
            lease_seconds=30,
        )
    )
    return result.run.id


def test_a_run_that_wrote_nothing_reads_nothing_of_the_later_turns(counted_reads):
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    silent = _killed_before_its_claim(session_id)
    later = InFlight(session_id)  # supersedes it, then streams a long answer
    later.stream_text(LATER_TEXT, pieces=1500)
    assert later.sequence > 1500
    counted_reads.clear()

    chunks = async_to_sync(aread_run_chunks)(Run.objects.get(pk=silent))

    assert chunks == []
    assert sum(counted_reads) <= 1, f"read {sum(counted_reads)} chunks of later turns"
    partial = async_to_sync(arebuild_partial)(Run.objects.get(pk=silent))
    assert (partial.chunk_count, partial.text_chars) == (0, 0)


def test_a_run_followed_by_a_later_turn_reads_its_own_chunks_only(counted_reads):
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    first = InFlight(session_id)
    first.stream_text("first answer words", pieces=4)
    own = first.sequence - first.run.start_sequence
    later = InFlight(session_id)
    later.stream_text(LATER_TEXT, pieces=1500)
    counted_reads.clear()

    chunks = async_to_sync(aread_run_chunks)(first.run)

    assert [seq for seq, _chunk in chunks] == list(range(first.run.start_sequence + 1, first.sequence + 1))
    assert len(chunks) == own
    assert sum(counted_reads) <= own + 1
    partial = async_to_sync(arebuild_partial)(first.run)
    assert partial.text_chars == len("first answer words")


def test_the_last_run_of_a_session_still_reads_to_the_head(counted_reads):
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    run = InFlight(session_id)
    run.stream_text(LATER_TEXT, pieces=1500)

    chunks = async_to_sync(aread_run_chunks)(run.run)

    assert chunks[-1][0] == run.sequence
    assert len(chunks) == run.sequence - run.run.start_sequence
