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
from helix_django.runtime.executor import get_executor
from helix_django.streams import get_stream_manager
from tests.recovery.live_chat import PROMPT, REPLY, LiveChat, agent, user_token, wait_lease_expired

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.timeout(120)]


def recover() -> str:
    out = io.StringIO()
    call_command("helix_recover", stdout=out)
    return out.getvalue()


def kill_at(server_factory, options, condition, *, client_sees=None, **kwargs):
    """Start a server, send, then SIGKILL it once ``condition(chat)`` holds in the persisted state.

    With ``client_sees``, the client reads the live SSE response until ``client_sees(chat)``
    holds for what it rendered, and the server is killed under the open response.
    """
    server = server_factory(helix=agent(options, **kwargs))
    chat = LiveChat(server, user_token())
    assert chat.send(until=client_sees)
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
        daphne_server_factory,
        {"TEXT": REPLY, "PACE_TPS": 15},
        lambda c: bool(c.persisted_text()),
        client_sees=lambda c: bool(c.text),
    )
    seen, cursor = chat.text, chat.chunks[-1][0]
    assert "interrupted=1" in recover()
    run.refresh_from_db()
    row = Message.objects.get(session_id=chat.session_id, position=1)
    assert row.metadata["helix"]["partial"] is True
    assert row.text.startswith(seen) and REPLY.startswith(row.text) and row.text != REPLY
    assert run.partial_chars == len(row.text)
    server.start()
    answer = chat.resume(cursor)  # the client re-attaches from the last sequence it rendered
    if isinstance(answer, list):  # the stream's tail: the rest of the partial, then the typed error
        assert answer[-1]["type"] == "error" and answer[-1].get("errorText")
        assert seen + "".join(c.get("delta", "") for c in answer if c["type"] == "text-delta") == row.text
    else:
        body = answer.json()
        assert answer.status_code == 409 and body["code"] == "run_interrupted" and body["retryable"] is True
    assert PROMPT not in server.log_text()


def test_killed_after_ninety_percent_then_continue_is_a_new_generation(daphne_server_factory, settings):
    # The provider stops after 37 of the reply's 40 tokens (92 % of its text) and hangs there, so
    # the kill always lands before the run ends: at 30 tok/s under CI's load the last 10 % could
    # stream and complete while the test still polled for 90 % (CI's PostgreSQL pass, twice).
    server, chat, run = kill_at(
        daphne_server_factory,
        {"TEXT": REPLY, "PACE_TPS": 30, "HANG_AFTER_CHUNKS": 37},
        lambda c: len(c.persisted_text()) >= 0.9 * len(REPLY),
        client_sees=lambda c: len(c.text) >= 0.9 * len(REPLY),
    )
    recover()
    run.refresh_from_db()
    assert run.status == "interrupted" and run.partial_chars >= 0.9 * len(REPLY)
    partial = Message.objects.get(session_id=chat.session_id, position=1).text
    assert partial.startswith(chat.text)  # everything the client saw is kept
    settings.HELIX = agent({"TEXT": "and that is the end."})
    result = async_to_sync(aperform)(inv.CONTINUE, run.id, executor=get_executor(), wait_seconds=20)
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
    result = async_to_sync(aperform)(inv.REGENERATE, run.id, executor=get_executor(), wait_seconds=20)
    assert result.outcome == "started:completed"
    assert [(r.attempt, r.status) for r in Run.objects.filter(session_id=chat.session_id).order_by("created_at")] == [
        (1, "failed"),
        (2, "completed"),
    ]
    assert Message.objects.get(session_id=chat.session_id, position=1).text == "A good answer this time."


# --- tools -----------------------------------------------------------------------------------

TOOL = "tests.recovery.faulttools.create_issue"


def tool_steps(after_tool: dict) -> dict:
    return {
        "STEPS": [
            {
                "TEXT": "Creating the issue.",
                "TOOL_CALLS": [{"id": "call-1", "name": "create_issue", "arguments": {"title": "Printer"}}],
            },
            after_tool,
        ]
    }


@pytest.fixture
def tracker(tmp_path, monkeypatch):
    path = tmp_path / "tracker.jsonl"
    monkeypatch.setenv("HELIX_TEST_TRACKER", str(path))
    return path


def killed_by_its_tool(server_factory, tracker, options: dict):
    """Start a server whose tool kills its own process right after its side effect; send; return ``(chat, run)``.

    Returns once the server is gone and the run's lease has expired (the run is left for the scan).
    """
    server = server_factory(
        helix=agent(options, tools=[TOOL]),
        env={"HELIX_TEST_TRACKER": str(tracker), "HELIX_TEST_DIE_IN_TOOL": "after_effect"},
    )
    chat = LiveChat(server, user_token())
    chat.send()
    chat.wait_for(lambda c: not server.is_running)
    run = chat.run()
    wait_lease_expired(run)
    return chat, run


def executions(session_id: str) -> list[tuple[str, str]]:
    from helix_django.models import ToolExecution

    return list(
        ToolExecution.objects.filter(run__session_id=session_id).order_by("id").values_list("status", "error_code")
    )


def test_killed_after_side_effect_before_its_result_was_persisted(daphne_server_factory, tracker, settings):
    from helix_django.recovery.actions import aresolve_tool
    from tests.recovery import faulttools

    options = tool_steps({"TEXT": "The issue exists now."})
    chat, run = killed_by_its_tool(daphne_server_factory, tracker, options)
    assert len(faulttools.issues()) == 1
    assert executions(chat.session_id) == [("started", "")]
    assert "interrupted=1" in recover()
    run.refresh_from_db()
    assert (run.status, run.interrupted_stage) == ("interrupted", "tooling")
    assert executions(chat.session_id) == [("unknown", "")]
    offers = inv.inventory(run)
    assert not offers[inv.CONTINUE].is_available and not offers[inv.REGENERATE].is_available
    assert "create_issue" in offers[inv.CONTINUE].reason
    from helix_django.models import ToolExecution

    execution = ToolExecution.objects.get(run=run)
    async_to_sync(aresolve_tool)(execution.pk, executed=True, result={"issue": "I-1", "duplicate": False})
    settings.HELIX = agent(options, tools=[TOOL])
    result = async_to_sync(aperform)(inv.CONTINUE, run.id, executor=get_executor(), wait_seconds=20)
    assert result.outcome == "started:completed"
    assert len(faulttools.issues()) == 1  # the side effect was not repeated
    row = Message.objects.get(session_id=chat.session_id, position=1)
    tool_part = next(p for p in row.parts if p.get("toolCallId") == "call-1")
    assert tool_part["state"] == "output-available" and tool_part["output"] == {"issue": "I-1", "duplicate": False}
    assert row.text.endswith("The issue exists now.")


def test_killed_after_the_result_was_persisted_before_continuation(daphne_server_factory, tracker, settings):
    from tests.recovery import faulttools

    hanging = tool_steps({"TEXT": "The issue exists now.", "HANG_AFTER_CHUNKS": 0})
    server, chat, run = kill_at(
        daphne_server_factory,
        hanging,
        lambda c: (
            executions(c.session_id) == [("succeeded", "")]
            and any(x["type"] == "tool-output-available" for x in c.persisted())
        ),
        tools=[TOOL],
    )
    assert len(faulttools.issues()) == 1
    recover()
    run.refresh_from_db()
    assert run.status == "interrupted"
    assert executions(chat.session_id) == [("succeeded", "")]  # the persisted result is kept, not "unknown"
    offers = inv.inventory(run)
    assert offers[inv.CONTINUE].is_available and offers[inv.REGENERATE].is_available
    settings.HELIX = agent(tool_steps({"TEXT": "The issue exists now."}), tools=[TOOL])
    result = async_to_sync(aperform)(inv.CONTINUE, run.id, executor=get_executor(), wait_seconds=20)
    assert result.outcome == "started:completed"
    assert len(faulttools.issues()) == 1  # reused, not re-run
    assert executions(chat.session_id) == [("succeeded", "")]
    row = Message.objects.get(session_id=chat.session_id, position=1)
    assert row.text.endswith("The issue exists now.") and row.metadata["helix"]["partial"] is False


def test_external_tool_reports_a_duplicate_success(daphne_server_factory, tracker, settings):
    """Staff say 'not executed' (unsure); the retried call hits the tracker's idempotency check."""
    from helix_django.models import ToolExecution
    from helix_django.recovery.actions import aresolve_tool
    from tests.recovery import faulttools

    options = tool_steps({"TEXT": "Done."})
    chat, run = killed_by_its_tool(daphne_server_factory, tracker, options)
    recover()
    execution = ToolExecution.objects.get(run_id=run.id)
    async_to_sync(aresolve_tool)(execution.pk, executed=False)
    assert executions(chat.session_id) == [("failed", "not_executed")]
    settings.HELIX = agent(options, tools=[TOOL])
    result = async_to_sync(aperform)(inv.REGENERATE, run.id, executor=get_executor(), wait_seconds=20)
    assert result.outcome == "started:completed"
    retried = ToolExecution.objects.get(run_id=result.new_run_id)
    assert (retried.status, retried.result) == ("succeeded", {"issue": "I-1", "duplicate": True})
    assert retried.idempotency_key == execution.idempotency_key == "issue:Printer"
    assert [i["issue"] for i in faulttools.issues()] == ["I-1"]  # still one issue in the tracker


# --- durable provider operations -------------------------------------------------------------

#: 41 tokens at 8 per second: the operation runs about 5 s, longer than the lease (2 s) the scan waits for.
DURABLE = {"TEXT": REPLY, "PACE_TPS": 8, "DURABLE": True, "CACHE_ALIAS": "helix"}


def test_provider_operation_still_running_after_the_process_died_completes_the_run(daphne_server_factory, settings):
    server, chat, run = kill_at(daphne_server_factory, DURABLE, lambda c: bool(c.persisted_text()))
    run.refresh_from_db()
    assert run.provider_operation_id.startswith("scrop_")
    settings.HELIX = agent(DURABLE)
    # The operation is still running: the scan re-attaches the run here; the command returns once it completed.
    assert "reattached (provider_in_progress)" in recover()
    run.refresh_from_db()
    assert run.status == "completed", (run.status, run.error_detail())
    row = Message.objects.get(session_id=chat.session_id, position=1)
    assert row.text == REPLY and row.metadata["helix"]["partial"] is False


def test_check_status_of_an_interrupted_run_completes_it_once_the_operation_finished(daphne_server_factory, settings):
    import time

    server, chat, run = kill_at(daphne_server_factory, DURABLE, lambda c: bool(c.persisted_text()))
    settings.HELIX = {**agent(DURABLE), "OPERATION_WAIT_SECONDS": 0}  # the scan does not wait for it
    assert "interrupted (provider_in_progress)" in recover()
    run.refresh_from_db()
    assert run.status == "interrupted"
    assert run.error_code == "run_interrupted"
    assert inv.inventory(run)[inv.CHECK_STATUS].is_available
    deadline = time.monotonic() + 10
    outcome = ""
    while time.monotonic() < deadline and outcome != "completed":
        time.sleep(0.5)
        run.refresh_from_db()
        if run.status == "interrupted":
            outcome = async_to_sync(aperform)(inv.CHECK_STATUS, run.id).outcome
    assert outcome == "completed"
    run.refresh_from_db()
    assert run.status == "completed" and run.recovery_action == "check_status"
    row = Message.objects.get(session_id=chat.session_id, position=1)
    assert row.text == REPLY and row.metadata["helix"]["partial"] is False


def test_invalid_continuation_id(daphne_server_factory, settings):
    from django.core.cache import caches

    server, chat, run = kill_at(daphne_server_factory, DURABLE, lambda c: bool(c.persisted_text()))
    run.refresh_from_db()
    caches["helix"].delete(f"helix:scripted-op:{run.provider_operation_id}")  # the provider forgot it
    settings.HELIX = agent(DURABLE)
    assert "(operation_unknown)" in recover()
    run.refresh_from_db()
    assert run.status == "interrupted" and run.is_continuation_valid is False
    offers = inv.inventory(run)
    assert not offers[inv.CONTINUE].is_available and offers[inv.REGENERATE].is_available
    with pytest.raises(Exception) as refused:
        async_to_sync(aperform)(inv.CONTINUE, run.id, executor=get_executor())
    assert refused.value.code == "state_run_not_actionable"


# --- people acting during recovery ----------------------------------------------------------


def test_user_cancels_during_recovery(daphne_server_factory):
    import httpx

    server, chat, run = kill_at(
        daphne_server_factory, {"TEXT": REPLY, "PACE_TPS": 15}, lambda c: bool(c.persisted_text())
    )
    server.start()  # the site is back; the dead run waits for recovery
    response = httpx.post(
        server.url(f"/helix/api/sessions/{chat.session_id}/runs/{run.id}/cancel"), headers=chat.headers
    )
    assert response.status_code == 200, response.text
    run.refresh_from_db()
    assert run.status == "cancelled" and run.cancel_requested_at is not None
    assert "scanned=0" in recover()
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert not inv.inventory(run)[inv.CHECK_STATUS].is_available


def test_user_edits_the_conversation_before_recovery(daphne_server_factory, settings):
    server, chat, run = kill_at(
        daphne_server_factory, {"TEXT": REPLY, "PACE_TPS": 15}, lambda c: bool(c.persisted_text())
    )
    recover()
    run.refresh_from_db()
    assert run.status == "interrupted" and inv.inventory(run)[inv.CONTINUE].is_available
    first_user = Message.objects.get(session_id=chat.session_id, position=0)
    server.start()
    chat.send("An edited question", message_id=first_user.ui_id, edit_of=first_user.ui_id)
    chat.wait_for(lambda c: c.run().id != run.id and c.run().status == "completed")
    run.refresh_from_db()
    assert run.is_continuation_valid is False
    offers = inv.inventory(run)
    assert not offers[inv.CONTINUE].is_available and not offers[inv.REGENERATE].is_available
    assert Message.objects.get(session_id=chat.session_id, position=0).text == "An edited question"


def test_restarted_asgi_process_runs_the_scan_itself(daphne_server_factory):
    import httpx

    server, chat, run = kill_at(
        daphne_server_factory, {"TEXT": REPLY, "PACE_TPS": 15}, lambda c: bool(c.persisted_text())
    )
    server.asgi_app = "tests.recovery.asgi_recovering:application"
    server.start()
    httpx.get(server.url("/helix/api/sessions/"), headers=chat.headers)  # any first request starts the scan
    chat.wait_for(lambda c: Run.objects.get(pk=run.id).status == "interrupted", timeout=15)
    assert Message.objects.get(session_id=chat.session_id, position=1).metadata["helix"]["partial"] is True


@pytest.mark.parametrize("point", ["before_provider_id", "after_first_token", "after_ninety_percent"])
def test_client_disconnect_never_stops_or_restarts_the_run(daphne_server_factory, point):
    """A client that disconnects stops only its own response: the run completes, nothing to recover."""
    server = daphne_server_factory(helix=agent(DURABLE))
    chat = LiveChat(server, user_token())
    chat.send()  # reads the headers only, then drops the connection
    if point == "after_first_token":
        chat.wait_for(lambda c: bool(c.persisted_text()))
    elif point == "after_ninety_percent":
        chat.wait_for(lambda c: len(c.persisted_text()) >= 0.9 * len(REPLY))
    chat.wait_for(lambda c: c.run().status == "completed", timeout=20)
    run = chat.run()
    assert run.provider_operation_id.startswith("scrop_") and run.attempt == 1
    assert Message.objects.get(session_id=chat.session_id, position=1).text == REPLY
    assert Run.objects.filter(session_id=chat.session_id).count() == 1
    assert "scanned=0" in recover()
