"""On PostgreSQL a group commit sends one INSERT and one UPDATE for the whole batch, not one per row.

Django's psycopg connections bind parameters on the client and prepare nothing
(``prepare_threshold`` None), so an ``executemany`` of N rows made PostgreSQL parse and
plan N statements: 160-195 us of its CPU per chunk. The group commit
(helix_django/streams/database/_group_commit.py) passes the rows as column arrays instead.
The protocol messages the driver sends are read from libpq's trace of the connection.
"""

from __future__ import annotations

import collections
import tempfile

import pytest
from django.db import connection

from helix_django.errors import StreamFenceError
from helix_django.models import StreamChunk
from helix_django.streams.database import DatabaseStreamManager

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL pass only: the array form is its"),
]

STREAMS = [f"s{n:02d}" for n in range(20)]


def delta(text: str) -> dict:
    return {"type": "text-delta", "id": "t", "delta": text}


def sent_messages(action) -> tuple[object, collections.Counter]:
    """Run ``action()`` on the ORM's connection; return its result and the frontend messages it sent, by kind."""
    connection.ensure_connection()
    pgconn = getattr(connection.connection, "pgconn", None)
    if pgconn is None:
        pytest.skip("libpq's trace is psycopg 3's")
    with tempfile.TemporaryFile("w+") as trace:
        pgconn.trace(trace.fileno())
        try:
            result = action()
        finally:
            pgconn.untrace()
        trace.seek(0)
        kinds = collections.Counter(line.split("\t")[3] for line in trace if line.split("\t")[1:2] == ["F"])
    return result, kinds


def statements(kinds: collections.Counter) -> int:
    """Statements sent: simple queries plus extended-protocol executions."""
    return kinds["Query"] + kinds["Execute"]


def test_a_batch_of_twenty_streams_is_five_statements_on_either_path():
    manager = DatabaseStreamManager("default", {})
    for stream_id in STREAMS:
        manager._claim_sync(stream_id, "run_a", 1)

    # Streams this process holds no info of: their rows are read (locked), then one INSERT, one UPDATE.
    results, kinds = sent_messages(lambda: manager.group.run_sync([(s, "run_a", [delta("a")]) for s in STREAMS]))
    assert [sequences for sequences, _info, _kept in results] == [[1]] * len(STREAMS)
    assert statements(kinds) == 5, kinds  # BEGIN, SELECT .. FOR UPDATE, INSERT, UPDATE, COMMIT

    # Streams it committed (the tail's infos, as the append queue records them): compare-and-set UPDATE, INSERT.
    for stream_id, (sequences, info, kept) in zip(STREAMS, results, strict=True):
        manager.tail.extend(stream_id, info, sequences[0], kept)
    requests = [(s, "run_a", [delta("b"), delta("c")]) for s in STREAMS]
    results, kinds = sent_messages(lambda: manager.group.run_sync(requests))
    assert [sequences for sequences, _info, _kept in results] == [[2, 3]] * len(STREAMS)
    assert statements(kinds) == 4, kinds  # BEGIN, UPDATE, INSERT, COMMIT

    stored = collections.defaultdict(list)
    for stream_id, sequence, payload in StreamChunk.objects.values_list("stream_id", "sequence", "payload"):
        stored[stream_id].append((sequence, payload["delta"]))
    assert all(sorted(stored[s]) == [(1, "a"), (2, "b"), (3, "c")] for s in STREAMS)


def test_a_stale_row_in_an_array_batch_fails_the_compare_and_is_read_again():
    manager = DatabaseStreamManager("default", {})
    other = DatabaseStreamManager("default", {})
    for stream_id in STREAMS[:3]:
        manager._claim_sync(stream_id, "run_a", 1)
    results = manager.group.run_sync([(s, "run_a", [delta("a")]) for s in STREAMS[:3]])
    for stream_id, (sequences, info, kept) in zip(STREAMS[:3], results, strict=True):
        manager.tail.extend(stream_id, info, sequences[0], kept)

    other._claim_sync(STREAMS[1], "run_b", 2)  # another process takes one stream over
    results = manager.group.run_sync([(s, "run_a", [delta("b")]) for s in STREAMS[:3]])
    assert results[0][0] == [2] and results[2][0] == [2]
    assert isinstance(results[1], StreamFenceError)
    assert list(StreamChunk.objects.filter(stream_id=STREAMS[1]).values_list("sequence", flat=True)) == [1]
