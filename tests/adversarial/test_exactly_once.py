"""Exactly-once under concurrency: resumes from random cursors, races with the run's end, keyed twin sends,
a send racing a cancel, and clients that drop at many points (issue 4; 002, "How handleChatStream resumes")."""

from __future__ import annotations

import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from helix_django.models import Message, Run
from helix_django.protocol import MessageAccumulator
from tests.adversarial.conftest import assert_typed_refusal, wait_idle
from tests.transport.conftest import (
    PREFIX,
    REPLY,
    agent_settings,
    chat_url,
    new_session_id,
    read_sse,
    send_body,
    user_message,
)

pytestmark = [pytest.mark.django_db(transaction=True)]


def ids_and_data(result):
    """``[(sequence, chunk dict)]``: chunks compare as JSON values (PostgreSQL's jsonb does not keep key order)."""
    return [(int(e.id), json.loads(e.data)) for e in result.events if e.id]


def reference_after_start(client, server, sid, run):
    """Every visible chunk of the (finished) run, read with the cursor at the run's start."""
    ref = read_sse(client, "GET", chat_url(server, sid), headers={"X-Resume-From-Sequence": str(run.start_sequence)})
    assert ref.status == 200 and ref.done
    return ref


def test_concurrent_resumes_from_random_cursors_get_exactly_the_suffix(slow_server, users):
    sid = new_session_id()
    rng = random.Random(4)
    with httpx.Client(headers=users["a"][1], timeout=20) as client:
        head = read_sse(
            client, "POST", chat_url(slow_server, sid), json=send_body(sid, [user_message("hi")]), stop_after=5
        )
        seen = [int(e.id) for e in head.events if e.id]
        run = Run.objects.get(session_id=sid)
        # cursors: before the run, at its start, inside what was seen, and ahead of the head (a cursor
        # still beyond the head when its resume arrives is 409 cursor_ahead: docs/transport.md, "Cursors")
        cursors = [
            0,
            run.start_sequence,
            *seen,
            seen[-1] + 3,
            seen[-1] + 20,
            *[rng.randint(run.start_sequence, seen[-1] + 40) for _ in range(8)],
        ]

        def resume(i_cursor):
            i, cursor = i_cursor
            time.sleep(i * 0.08)  # staggered over the run's life: the last ones race its end
            with httpx.Client(headers=users["a"][1], timeout=20) as c:
                return cursor, read_sse(
                    c, "GET", chat_url(slow_server, sid), headers={"X-Resume-From-Sequence": str(cursor)}
                )

        with ThreadPoolExecutor(max_workers=len(cursors)) as pool:
            results = list(pool.map(resume, enumerate(cursors)))
        wait_idle(client, slow_server, sid)
        run.refresh_from_db()
        assert run.status == "completed"
        reference = ids_and_data(reference_after_start(client, slow_server, sid, run))
        committed = Message.objects.get(session_id=sid, role="assistant")
        assert committed.text == REPLY
        assert sum(r.status == 200 for _, r in results) >= len(results) // 3
        for cursor, result in results:
            effective = max(cursor, run.start_sequence)
            expected = [(i, d) for i, d in reference if i > effective]
            if result.status == 204:
                assert expected == [], (cursor, "204 although chunks follow the cursor")
                continue
            if result.status == 409:
                assert result.body["cause"] == "cursor_ahead" and result.body["headSequence"] < cursor, result.body
                continue
            assert result.status == 200, (cursor, result.status, result.body)
            got = ids_and_data(result)
            assert got == expected, (cursor, got[:3], expected[:3])
            assert result.done
            text = "".join(
                e.chunk.get("delta", "")
                for e in result.events
                if e.id and e.chunk and e.chunk.get("type") == "text-delta"
            )
            assert REPLY.endswith(text)


def test_two_sends_with_the_same_request_key_at_the_same_instant_make_one_run(slow_server, users):
    sid = new_session_id()
    body = send_body(sid, [user_message("hi", "u_twin")])
    barrier = threading.Barrier(2)

    def send(_):
        with httpx.Client(headers={**users["a"][1], "X-Helix-Request-Key": "twin-key-0001"}, timeout=20) as c:
            barrier.wait()
            return read_sse(c, "POST", chat_url(slow_server, sid), json=body)

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(send, range(2)))
    assert Run.objects.filter(session_id=sid).count() == 1
    for result in results:
        if result.status != 200:
            assert_typed_refusal(result.status, result.body, statuses=(409,))
            assert result.body["code"] == "state_already_running" and result.body["retryable"] is True
            continue
        assert result.done and result.text == REPLY
    assert any(r.status == 200 for r in results)
    assert Message.objects.filter(session_id=sid, role="user").count() == 1


def test_a_send_racing_a_cancel_leaves_one_consistent_ending(slow_server, users):
    sid = new_session_id()
    with httpx.Client(headers=users["a"][1], timeout=20) as client:
        first = read_sse(
            client, "POST", chat_url(slow_server, sid), json=send_body(sid, [user_message("one")]), stop_after=3
        )
        assert first.status == 200
        run = Run.objects.get(session_id=sid)
        barrier = threading.Barrier(2)

        def cancel():
            with httpx.Client(headers=users["a"][1], timeout=20) as c:
                barrier.wait()
                return c.post(slow_server.url(f"{PREFIX}/sessions/{sid}/runs/{run.id}/cancel"))

        def send():
            with httpx.Client(headers=users["a"][1], timeout=20) as c:
                barrier.wait()
                return read_sse(c, "POST", chat_url(slow_server, sid), json=send_body(sid, [user_message("two")]))

        with ThreadPoolExecutor(max_workers=2) as pool:
            cancelled = pool.submit(cancel)
            second = pool.submit(send)
            cancelled, second = cancelled.result(), second.result()
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        if second.status != 200:
            assert_typed_refusal(second.status, second.body, statuses=(409,))
            assert second.body["code"] == "state_already_running"
        else:
            assert second.done and second.text == REPLY
        snap = wait_idle(client, slow_server, sid)
        assert snap["status"] == "ended"
        runs = list(Run.objects.filter(session_id=sid).order_by("created_at"))
        assert runs[0].status == "cancelled"
        assert len(runs) == (2 if second.status == 200 else 1)
        assert all(r.status in ("cancelled", "completed") for r in runs)


def test_a_client_dropping_anywhere_leaves_the_run_complete_and_the_snapshot_equal_to_a_full_resume(
    daphne_server_factory, users
):
    server = daphne_server_factory(helix=agent_settings(TEXT=REPLY, PACE_TPS=200))
    with httpx.Client(headers=users["a"][1], timeout=20) as client:
        for drop_after in (1, 2, 7, 23, 40):
            sid = new_session_id()
            body = send_body(sid, [user_message("hi")])
            dropped = read_sse(client, "POST", chat_url(server, sid), json=body, stop_after=drop_after)
            assert dropped.status == 200
            snap = wait_idle(client, server, sid)
            assert snap["status"] == "ended"
            run = Run.objects.get(session_id=sid)
            assert run.status == "completed"
            reference = reference_after_start(client, server, sid, run)
            acc = MessageAccumulator(run.response_message_id)
            for chunk in reference.chunks:
                acc.apply(chunk)
            rendered = acc.snapshot()
            in_snapshot = next(m for m in snap["messages"] if m["id"] == run.response_message_id)
            texts = [p for p in rendered["parts"] if p["type"] == "text"]
            assert [p for p in in_snapshot["parts"] if p["type"] == "text"] == texts, drop_after
            assert "".join(p["text"] for p in texts) == REPLY


def test_concurrent_first_sends_to_a_new_session_leave_one_run_and_keep_the_session(daphne_server_factory, users):
    """Racing first sends: one run wins; the losers' clean-up of a session they created never removes it."""
    server = daphne_server_factory(helix=agent_settings(TEXT="Short answer.", PACE_TPS=400))
    for _ in range(4):
        sid = new_session_id()
        barrier = threading.Barrier(4)

        def send(i, sid=sid, barrier=barrier):
            with httpx.Client(headers=users["a"][1], timeout=20) as c:
                barrier.wait()
                return read_sse(c, "POST", chat_url(server, sid), json=send_body(sid, [user_message(f"m{i}", f"u{i}")]))

        with ThreadPoolExecutor(max_workers=4) as pool:
            results = list(pool.map(send, range(4)))
        winners = [r for r in results if r.status == 200]
        for r in results:
            if r.status != 200:
                assert_typed_refusal(r.status, r.body, statuses=(409,))
        assert winners, [r.status for r in results]
        assert all(w.done and w.text == "Short answer." for w in winners)
        runs = Run.objects.filter(session_id=sid)
        assert runs.count() == len(winners)
        assert all(run.status == "completed" for run in runs)
