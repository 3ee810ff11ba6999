"""Section 5: snapshot read at 10, 100 and 1 000 messages (issue 8).

Each session is written through the store (one run-start commit carrying the history,
then a terminal commit with the answer), then read with ``abuild_snapshot`` (the REST
snapshot's core: fenced passes, checkpoint-anchored). The baseline is the bare read of
the same message rows with the raw driver (one SELECT, JSON decoded) in the same repeat.
Target: < 10 ms at 1 000 messages, growing linearly or better (each 10x in messages
costs at most 10x in time).
"""

from __future__ import annotations

import json
import statistics
import time

from asgiref.sync import sync_to_async

from bench import raw
from bench.config import Sizes
from bench.harness import Row, Stat, paired_ratio
from bench.payloads import unique
from helix_django import store
from helix_django.snapshot import abuild_snapshot

NAME = "snapshot"
TARGET_MS = 10.0
TARGET_AT = 1_000
USER_TEXT = "Please summarise the previous answer and list three follow-up questions. " * 2
ANSWER_TEXT = "Here is a detailed answer with a few sentences of explanation and an example. " * 5


def _message(index: int, role: str) -> dict:
    text = USER_TEXT if role == "user" else ANSWER_TEXT
    return {"id": f"msg_{index}", "role": role, "parts": [{"type": "text", "text": text}], "metadata": {}}


def _make_session(count: int) -> str:
    """Create a session whose snapshot holds ``count`` messages (the last one an answer)."""
    session_id = unique("bench_snap")
    store.get_or_create_session(session_id)
    inputs = [_message(i, "user" if (count - 2 - i) % 2 == 0 else "assistant") for i in range(count - 1)]
    result = store.start_run(store.RunStartRequest(session_id=session_id, input_messages=inputs))
    answer = _message(count - 1, "assistant")
    answer["id"] = result.run.response_message_id
    store.commit_terminal(result.run.id, "completed", response_message=answer, stream_sequence=0)
    return session_id


def _raw_read(conn, session_id: str) -> float:
    started = time.perf_counter()
    rows = conn.execute(
        "SELECT ui_id, role, parts, metadata FROM helix_django_message "
        "WHERE session_id = ? AND position IS NOT NULL ORDER BY position",
        (session_id,),
    ).fetchall()
    messages = [{"id": i, "role": r, "parts": json.loads(p), "metadata": json.loads(m)} for i, r, p, m in rows]
    assert messages
    return (time.perf_counter() - started) * 1000


async def _snapshot_ms(session_id: str, count: int) -> float:
    started = time.perf_counter()
    snapshot = await abuild_snapshot(session_id)
    elapsed = (time.perf_counter() - started) * 1000
    assert snapshot is not None and len(snapshot["messages"]) == count, "snapshot lost messages"
    return elapsed


async def run(sizes: Sizes) -> list[Row]:
    """Return one row per session size, and the growth rows between sizes."""
    sessions = {n: await sync_to_async(_make_session)(n) for n in sizes.snapshot_messages}
    conn = raw.sqlite_connect()
    medians: dict[int, list[float]] = {n: [] for n in sessions}
    raws: dict[int, list[float]] = {n: [] for n in sessions}
    for n, session_id in sessions.items():  # warm-up
        await _snapshot_ms(session_id, n)
    for _ in range(sizes.repeats):
        samples = {n: [] for n in sessions}
        raw_samples = {n: [] for n in sessions}
        for _ in range(sizes.snapshot_reads):
            for n, session_id in sessions.items():
                samples[n].append(await _snapshot_ms(session_id, n))
                raw_samples[n].append(_raw_read(conn, session_id))
        for n in sessions:
            medians[n].append(statistics.median(samples[n]))
            raws[n].append(statistics.median(raw_samples[n]))
    conn.close()
    rows = []
    for n in sessions:
        value = Stat.of(medians[n], "ms")
        is_target = n == TARGET_AT
        rows.append(
            Row(
                NAME,
                f"abuild_snapshot, {n:,} messages",
                value=value,
                baseline_name="raw SELECT + json",
                baseline=Stat.of(raws[n], "ms"),
                ratio=paired_ratio(medians[n], raws[n]),
                target=f"< {TARGET_MS:.0f} ms" if is_target else "",
                holds=(value.median < TARGET_MS) if is_target else None,
            )
        )
    sizes_sorted = sorted(sessions)
    for small, large in zip(sizes_sorted, sizes_sorted[1:], strict=False):
        growth = paired_ratio(medians[large], medians[small])
        bound = large / small
        rows.append(
            Row(
                NAME,
                f"growth {small:,} -> {large:,} messages",
                value=growth,
                target=f"<= {bound:.0f}x (linear)",
                holds=growth.median <= bound,
            )
        )
    return rows
