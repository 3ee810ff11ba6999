"""The database manager's commit window: live streams' appends of a few milliseconds share one group commit.

At a hundred live runs each delta is a flush of its own, woken by its own timer, so
without a window nearly every flush is committed alone (a transaction per delta, like
the durable floor). While a loop's appends come at ``OPTIONS["COMMIT_WINDOW_RATE"]`` per
second or faster (default 2 000), a group commit starts at most once per
``OPTIONS["COMMIT_WINDOW_MS"]`` (default 5) on it: an append made within the window after
a commit started waits for the window's end and joins the appends of the other streams
made meanwhile. Slower, or after a quiet window, an append is committed at once (a lone
chat's time to first byte and delivery delay are unchanged:
``tests/streams/test_loop_rounds_per_lone_append.py``).

Transactions are recorded by wrapping the group commit's ``statements`` (one call per
transaction, inline on SQLite and on the ORM's thread on PostgreSQL): how many appends
each carried and when it ran. The window is checked as the gaps between them, which do
not depend on the machine's speed (a loaded machine puts more appends in each loop round
whether or not there is a window).
"""

from __future__ import annotations

import asyncio
import statistics
import time

import pytest

from helix_django.streams.database import DatabaseStreamManager
from tests.streams.helpers import paced_writers

pytestmark = pytest.mark.django_db(transaction=True)

STREAMS = 20
DELTAS = 10
PERIOD_SECONDS = 0.02
"""50 deltas per second per stream, as the capacity bench's live runs."""


def delta(n: int) -> dict:
    return {"type": "text-delta", "id": "t", "delta": f"d{n} "}


def recording_transactions(manager: DatabaseStreamManager) -> list[tuple[float, int]]:
    """Wrap the manager's group commit so each transaction records (monotonic seconds, appends carried)."""
    transactions: list[tuple[float, int]] = []
    statements = manager.group.statements

    def recorded(cursor, placeholder, requests, *args, **kwargs):
        transactions.append((time.monotonic(), len(requests)))
        return statements(cursor, placeholder, requests, *args, **kwargs)

    manager.group.statements = recorded
    return transactions


async def paced_transactions(options: dict, prefix: str, deltas: int = DELTAS) -> list[tuple[float, int]]:
    """Run the paced writers on a manager with ``options``; return its transactions (time, appends)."""
    manager = DatabaseStreamManager("default", options)
    transactions = recording_transactions(manager)
    try:
        got = await paced_writers(manager, prefix, streams=STREAMS, deltas=deltas, period=PERIOD_SECONDS)
    finally:
        await manager.aclose()
    assert all(sequences == list(range(1, deltas + 1)) for sequences in got.values()), got
    assert sum(size for _at, size in transactions) == STREAMS * deltas
    return transactions


def gaps_ms(transactions: list[tuple[float, int]]) -> list[float]:
    return [round((b[0] - a[0]) * 1000, 1) for a, b in zip(transactions, transactions[1:], strict=False)]


def median_gap_ms(transactions: list[tuple[float, int]]) -> float:
    """The median time between two transactions' statements (on PostgreSQL each runs after a thread
    hop, whose wait moves single gaps by several ms on a loaded machine; the median does not move)."""
    return statistics.median(gaps_ms(transactions))


async def test_paced_appends_of_twenty_live_streams_share_commits_a_window_apart_and_each_reader_gets_each_once():
    windowed = await paced_transactions({"COMMIT_WINDOW_MS": 20, "COMMIT_WINDOW_RATE": 0}, "window")
    # A commit starts at most once per 20 ms, so 200 appends over about 0.2 s go in about 15 transactions instead of one per loop round.
    assert median_gap_ms(windowed) >= 15, gaps_ms(windowed)
    assert len(windowed) <= STREAMS * DELTAS / 4, len(windowed)


async def test_the_window_applies_once_a_loops_appends_come_at_the_rate():
    # 1 000 appends/s for about 0.6 s, the rate 500/s: counted over the first quarter second,
    # then every commit starts a window after the one before.
    transactions = await paced_transactions({"COMMIT_WINDOW_MS": 20, "COMMIT_WINDOW_RATE": 500}, "rate", deltas=30)
    settled = [t for t in transactions if t[0] >= transactions[0][0] + 0.3]
    assert len(settled) >= 5
    assert median_gap_ms(settled) >= 15, gaps_ms(settled)


async def test_without_a_window_commits_follow_each_other_as_appends_come():
    alone = await paced_transactions({"COMMIT_WINDOW_MS": 0}, "nowindow")
    assert median_gap_ms(alone) < 10, gaps_ms(alone)  # what the window above prevents


async def test_below_the_rate_the_window_does_not_hold_appends():
    slow = await paced_transactions({"COMMIT_WINDOW_MS": 20, "COMMIT_WINDOW_RATE": 5000}, "slow")
    assert median_gap_ms(slow) < 10, gaps_ms(slow)  # 1 000 appends/s: committed as they come


async def test_an_append_within_the_window_waits_for_it_and_one_after_a_quiet_window_commits_at_once():
    # A window of 300 ms, so a commit's own time (a thread hop on a loaded machine) never blurs it.
    manager = DatabaseStreamManager("default", {"COMMIT_WINDOW_MS": 300, "COMMIT_WINDOW_RATE": 0})
    try:
        await manager.claim_stream("window_lone", "run_a", epoch=1)
        loop = asyncio.get_running_loop()
        await asyncio.sleep(0.35)
        started = loop.time()
        assert await manager.append_soon("window_lone", "run_a", [delta(1)]) == [1]
        assert loop.time() - started < 0.15  # the first after a quiet window: at once
        started = loop.time()
        assert await manager.append_soon("window_lone", "run_a", [delta(2)]) == [2]
        assert loop.time() - started >= 0.15  # within the window: committed at its end
        await asyncio.sleep(0.35)
        started = loop.time()
        assert await manager.append_soon("window_lone", "run_a", [delta(3)]) == [3]
        assert loop.time() - started < 0.15
    finally:
        await manager.aclose()
