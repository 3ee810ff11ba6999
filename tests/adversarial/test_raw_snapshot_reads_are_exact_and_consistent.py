"""Adversarial tests of the raw-cursor snapshot pass (rows decoded by hand, one-row closing fence).

Run on SQLite and on PostgreSQL (``HELIX_TEST_DATABASE_URL``): odd JSON comes back
exactly as the ORM reads it, and a snapshot taken while another thread commits steps,
ends runs and rewinds the conversation is always one checkpoint's consistent view.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from helix_django import store
from helix_django.errors import HistoryIncompleteError
from helix_django.models import Message
from helix_django.snapshot import abuild_snapshot, build_snapshot

pytestmark = pytest.mark.django_db(transaction=True)

ODD_TEXT = 'é ü 漢字 🙂 "quoted" \\ back\\slash \n\t tab </script> \u2028 \x7f'
ODD_METADATA = {
    "z": 1,
    "a": [1.5, -0.0, 1e300, True, None, "x"],
    "nested": {"deep": [{"k": {"k": {"k": ODD_TEXT}}}]},
    "json_text": '{"not": "decoded"}',
    "number_text": "42",
    "empty": {},
}


def user(text: str, message_id: str) -> dict:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}], "metadata": {}}


def test_odd_json_reads_back_as_the_orm_reads_it():
    store.get_or_create_session("sess1")
    big = "x" * 200_000 + ODD_TEXT
    inputs = [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": ODD_TEXT}], "metadata": ODD_METADATA},
        {"id": "u2", "role": "user", "parts": [{"type": "text", "text": big}], "metadata": {}},
        {"id": "u3", "role": "user", "parts": [{"type": "data-x", "data": "just a string"}], "metadata": {"m": "1"}},
    ]
    run = store.start_run(store.RunStartRequest(session_id="sess1", input_messages=inputs)).run
    store.commit_terminal(run.id, "cancelled", response_message=None, stream_sequence=0)

    snapshot = build_snapshot("sess1")
    expected = [row.to_ui_message() for row in Message.objects.filter(session_id="sess1").order_by("position")]
    assert snapshot["messages"] == expected
    assert snapshot["messages"][0]["metadata"]["json_text"] == '{"not": "decoded"}'
    assert snapshot["messages"][0]["metadata"]["number_text"] == "42"
    assert snapshot["messages"][1]["parts"][0]["text"] == big
    assert snapshot["messages"][2]["parts"][0]["data"] == "just a string"


def _writer(stop: threading.Event, errors: list) -> None:
    """Commit steps, end runs and rewind, over and over, in a thread of its own."""
    try:
        turn = 0
        while not stop.is_set():
            turn += 1
            sess = store.get_or_create_session("sess1")[0]
            request = store.RunStartRequest(
                session_id="sess1",
                input_messages=[user(f"turn {turn}", f"u{turn}")],
                truncate_to=0 if turn % 3 == 0 else None,  # every third turn rewinds (an edit)
                supersede_live=True,
            )
            run = store.start_run(request).run
            for step in range(1, 4):
                answer = {
                    "id": run.response_message_id,
                    "role": "assistant",
                    "parts": [{"type": "text", "text": f"{run.id} step {step}"}],
                }
                store.commit_step(run.id, response_message=answer, stream_sequence=step, step_count=step)
            store.commit_terminal(run.id, "completed", response_message=answer, stream_sequence=4)
            assert sess is not None
    except Exception as exc:  # reported by the test
        errors.append(exc)
    finally:
        connection.close()


async def test_snapshots_racing_commits_and_rewinds_are_always_one_checkpoint():
    await store.aget_or_create_session("sess1")
    stop, errors = threading.Event(), []
    thread = threading.Thread(target=_writer, args=(stop, errors))
    thread.start()
    seen = 0
    try:
        for _ in range(150):
            try:
                snapshot = await abuild_snapshot("sess1")
            except HistoryIncompleteError as exc:
                assert exc.cause == "snapshot_unstable"  # retryable, never a torn view
                continue
            seen += 1
            messages = snapshot["messages"]
            assert [m["id"] for m in messages] == list(dict.fromkeys(m["id"] for m in messages))
            roles = [m["role"] for m in messages]
            assert all(role == "user" for role in roles[::2]), roles
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                run_id, _, step = last["parts"][0]["text"].partition(" step ")
                assert snapshot["stepCount"] == int(step)  # the row is the checkpoint's version
                if snapshot["runId"] == run_id and snapshot["runStatus"] != "completed":
                    assert snapshot["status"] == "active"
    finally:
        stop.set()
        thread.join(30)
    assert not errors, errors
    assert seen > 0
