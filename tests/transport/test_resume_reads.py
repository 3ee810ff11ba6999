"""The reads a resume makes with its authentication (transport/resume_reads.py, issue 23).

They must decide exactly as the ORM reads they replace: the session if the caller owns
it (else 404, never 403), its current run, the tool names of the committed messages
(later messages winning) and, per committed UI message, the tool calls of its first row.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from helix_django import store
from helix_django.access.ownership import Owner
from helix_django.errors import SessionNotFoundError
from helix_django.models import Message
from helix_django.transport.replay import tool_call_ids, tool_names_of
from helix_django.transport.resume_reads import read_resume_state

pytestmark = pytest.mark.django_db


def _tool(call_id: str, name: str) -> dict:
    return {"type": f"tool-{name}", "toolCallId": call_id, "state": "output-available", "input": {}, "output": 1}


@pytest.fixture
def owner():
    user = get_user_model().objects.create_user(username="reads", password="pw-not-secret")
    return Owner(user_id=user.pk)


def test_the_state_holds_the_committed_tool_calls_as_the_orm_reads_found_them(owner):
    session, _created = store.get_or_create_session("chat_reads", owner_id=owner.user_id)
    rows = [
        ("u1", "user", [{"type": "text", "text": 'mentions "toolCallId" in text only'}], 0),
        ("a1", "assistant", [{"type": "text", "text": "hi"}, _tool("c1", "lookup")], 1),
        ("a2", "assistant", [{"type": "dynamic-tool", "toolName": "search", "toolCallId": "c2"}], 2),
        ("a1", "assistant", [_tool("c3", "later")], 3),  # the same UI id again: its first row counts
        ("a3", "assistant", [_tool("c1", "renamed")], 4),  # a later message's name wins
        ("gone", "assistant", [_tool("c9", "archived")], None),  # not committed
    ]
    for ui_id, role, parts, position in rows:
        Message.objects.create(session=session, ui_id=ui_id, role=role, parts=parts, position=position)
    state = read_resume_state(session.pk, owner)
    committed = [m.to_ui_message() for m in Message.objects.filter(session=session, position__isnull=False)]
    assert state.session.pk == session.pk and state.run is None
    assert state.tool_names == tool_names_of(committed) == {"c1": "renamed", "c2": "search", "c3": "later"}
    assert state.held_tool_call_ids("a1") == tool_call_ids(committed[1]) == ["c1"]
    assert state.held_tool_call_ids("a2") == ["c2"]
    assert state.held_tool_call_ids("u1") == state.held_tool_call_ids("gone") == state.held_tool_call_ids(None) == []


def test_another_owners_session_a_missing_one_and_an_invalid_id_are_404(owner):
    session, _created = store.get_or_create_session("chat_theirs", owner_id=None, anonymous_key="someone-else")
    for session_id in ("chat_theirs", "chat_missing", "bad id\x00"):
        with pytest.raises(SessionNotFoundError):
            read_resume_state(session_id, owner)
    assert read_resume_state("chat_theirs", None).session.pk == session.pk  # a re-read skips the check


def test_the_session_and_its_current_run_are_loaded_as_the_orm_loads_them(owner):
    from django.forms.models import model_to_dict

    from helix_django.models import ChatSession, Run

    store.get_or_create_session("chat_run", owner_id=owner.user_id)
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    started = store.start_run(store.RunStartRequest(session_id="chat_run", input_messages=[message])).run
    state = read_resume_state("chat_run", owner)
    session, run = ChatSession.objects.get(pk="chat_run"), Run.objects.get(pk=started.pk)
    assert state.session.current_run_id == run.pk
    for loaded, orm in ((state.session, session), (state.run, run)):
        fields = [f.attname for f in type(orm)._meta.concrete_fields]
        assert {k: getattr(loaded, k) for k in fields} == {k: getattr(orm, k) for k in fields}
        assert loaded._state.adding is False and loaded._state.db == orm._state.db
    assert model_to_dict(state.run) == model_to_dict(run)
