"""The ugly transitions of 000 ("Test the ugly transitions") with real processes.

A daphne server started by the test runs the generation; the test SIGKILLs it at a chosen
point (or a tool kills its own process), then runs ``helix_recover`` and checks what
survived: partial text, tool outcomes, the stream's typed error, the actions offered.
"""

from __future__ import annotations

import io

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command

from helix_django.models import Message, Run
from helix_django.recovery import inventory as inv
from helix_django.recovery.actions import aperform
from helix_django.streams import get_stream_manager
from tests.recovery.live_chat import PROMPT, REPLY, LiveChat, agent, user_token, wait_lease_expired

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.timeout(120)]


def recover() -> str:
    out = io.StringIO()
    call_command("helix_recover", stdout=out)
    return out.getvalue()


def kill_at(server_factory, options, condition, **kwargs):
    """Start a server, send, disconnect, wait until ``condition(chat)`` holds in the persisted state, SIGKILL."""
    server = server_factory(helix=agent(options, **kwargs))
    chat = LiveChat(server, user_token())
    chat.send()
    chat.wait_for(condition)
    server.kill()
    run = chat.run()
    wait_lease_expired(run)
    return server, chat, run


def stream_error(session_id: str) -> dict:
    info = async_to_sync(get_stream_manager().get_info)(session_id)
    assert info.status == "failed"
    return info.error


def test_killed_before_the_first_token(daphne_server_factory):
    server, chat, run = kill_at(
        daphne_server_factory,
        {"TEXT": REPLY, "PACE_TPS": 1},
        lambda c: any(x["type"] == "start-step" for x in c.persisted()),
    )
    assert run.status in ("starting", "streaming") and run.provider_operation_id == ""
    assert "interrupted=1" in recover()
    run.refresh_from_db()
    assert (run.status, run.interrupted_stage, run.partial_chars) == ("interrupted", "awaiting_first_token", 0)
    assert not Message.objects.filter(session_id=chat.session_id, position=1).exists()
    error = stream_error(chat.session_id)
    assert (error["code"], error["retryable"]) == ("run_interrupted", True)
    offers = inv.inventory(run)
    assert offers[inv.REGENERATE].is_available and not offers[inv.CONTINUE].is_available
    assert not offers[inv.CHECK_STATUS].is_available


def test_killed_after_the_first_token_then_resume_gets_a_typed_error(daphne_server_factory):
    server, chat, run = kill_at(
        daphne_server_factory, {"TEXT": REPLY, "PACE_TPS": 15}, lambda c: bool(c.persisted_text())
    )
    seen = chat.persisted_text()
    assert "interrupted=1" in recover()
    run.refresh_from_db()
    row = Message.objects.get(session_id=chat.session_id, position=1)
    assert row.metadata["helix"]["partial"] is True
    assert row.text.startswith(seen) and REPLY.startswith(row.text) and row.text != REPLY
    assert run.partial_chars == len(row.text)
    server.start()
    start = Run.objects.get(pk=run.id).start_sequence
    answer = chat.resume(start + 1)
    if isinstance(answer, list):  # the stream's tail: the rest of the partial, then the typed error
        assert answer[-1]["type"] == "error"
    else:
        body = answer.json()
        assert answer.status_code == 409 and body["code"] == "run_interrupted" and body["retryable"] is True
    assert PROMPT not in server.log_text()


def test_killed_after_ninety_percent_then_continue_is_a_new_generation(daphne_server_factory, settings):
    server, chat, run = kill_at(
        daphne_server_factory, {"TEXT": REPLY, "PACE_TPS": 30}, lambda c: len(c.persisted_text()) >= 0.9 * len(REPLY)
    )
    recover()
    run.refresh_from_db()
    assert run.status == "interrupted" and run.partial_chars >= 0.9 * len(REPLY)
    partial = Message.objects.get(session_id=chat.session_id, position=1).text
    settings.HELIX = agent({"TEXT": "and that is the end."})
    result = async_to_sync(aperform)(inv.CONTINUE, run.id, wait_seconds=20)
    assert result.outcome == "started:completed" and result.new_run_id != run.id
    follow = Run.objects.get(pk=result.new_run_id)
    assert (follow.kind, follow.attempt) == ("continue", 2)
    row = Message.objects.get(session_id=chat.session_id, position=1)
    assert row.text.startswith(partial) and row.text.endswith("and that is the end.")
    assert row.metadata["helix"]["partial"] is False


def test_provider_failure_after_partial_output_then_regenerate(daphne_server_factory, settings):
    server = daphne_server_factory(helix=agent({"TEXT": REPLY, "FAIL_AT_FRACTION": 0.5}))
    chat = LiveChat(server, user_token())
    chat.send()
    chat.wait_for(lambda c: c.run().status == "failed")
    run = chat.run()
    assert run.status == "failed" and run.error_code == "provider_error"
    row = Message.objects.get(session_id=chat.session_id, position=1)
    assert row.metadata["helix"]["partial"] is True and REPLY.startswith(row.text) and row.text
    assert "scanned=0" in recover()  # a failed run is not in flight: nothing to do
    offers = inv.inventory(run)
    assert offers[inv.REGENERATE].is_available and offers[inv.KEEP_PARTIAL].is_available
    settings.HELIX = agent({"TEXT": "A good answer this time."})
    result = async_to_sync(aperform)(inv.REGENERATE, run.id, wait_seconds=20)
    assert result.outcome == "started:completed"
    assert [(r.attempt, r.status) for r in Run.objects.filter(session_id=chat.session_id).order_by("created_at")] == [
        (1, "failed"),
        (2, "completed"),
    ]
    assert Message.objects.get(session_id=chat.session_id, position=1).text == "A good answer this time."
