"""Adversarial tests of the run-start fast path (``start_run`` inserts rows at new positions).

The fast path assumes the active rows of a session are exactly ``[0, message_count)``.
A continuation run that ends without output (its stream could not be opened, or it was
cancelled first) must keep that true, or the next send would collide with the row it
continued (an IntegrityError, a 500 on the chat route).
"""

from __future__ import annotations

import pytest

from helix_django import store
from helix_django.models import Message
from helix_django.snapshot import build_snapshot

pytestmark = pytest.mark.django_db


def user(text: str, message_id: str) -> dict:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def assistant(message_id: str, text: str) -> dict:
    return {"id": message_id, "role": "assistant", "parts": [{"type": "text", "text": text, "state": "done"}]}


def start(**kwargs):
    return store.start_run(store.RunStartRequest(session_id="sess1", **kwargs))


@pytest.mark.parametrize("status", ["failed", "cancelled"])
def test_a_continuation_ended_without_output_keeps_the_row_it_continued(status):
    store.get_or_create_session("sess1")
    run = start(input_messages=[user("hi", "u1")]).run
    answer = assistant(run.response_message_id, "calling tool")
    store.commit_terminal(run.id, "completed", response_message=answer, stream_sequence=4)
    cont = start(input_messages=[answer], kind="tool_result").run
    # What the executor's _abort_start commits when the stream cannot be opened.
    store.commit_terminal(cont.id, status, response_message=None, stream_sequence=4)

    snapshot = build_snapshot("sess1")
    assert [m["id"] for m in snapshot["messages"]] == ["u1", run.response_message_id]

    # The next send appends after the continued row; nothing collides.
    follow = start(input_messages=[user("again", "u2")]).run
    assert follow.start_message_count == 3
    rows = Message.objects.filter(session_id="sess1", position__isnull=False).order_by("position")
    assert [(r.position, r.ui_id) for r in rows] == [(0, "u1"), (1, run.response_message_id), (2, "u2")]
    store.commit_terminal(follow.id, "cancelled", response_message=None, stream_sequence=4)
