"""A cancel that lands while recovery asks the provider; and logs that carry no prompt or answer text."""

from __future__ import annotations

import logging
import threading

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command

from helix_django.models import ChatSession, Message, Run
from helix_django.recovery import inventory as inv
from helix_django.recovery.actions import aperform
from helix_django.runtime.executor import get_executor
from tests.recovery import gated
from tests.recovery.factories import USER_TEXT, InFlight, start_operation

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

ANSWER = "CONFIDENTIAL-ANSWER the lease is renewed every ten seconds"


def gated_agents(**options):
    """The gated durable provider; the scan ends a run whose operation runs ``interrupted`` (no follow): Check status' turn."""
    return {
        "FLUSH_INTERVAL_MS": 5,
        "OPERATION_WAIT_SECONDS": 0,
        "AGENTS": {
            "default": {
                "PROVIDER": {"BACKEND": "tests.recovery.gated.GatedProvider", "OPTIONS": {"DURABLE": True, **options}},
                "MODEL": "scripted-1",
            }
        },
    }


def test_user_cancel_during_check_status_wins(settings):
    options = {"TEXT": ANSWER, "PACE_TPS": 2}
    settings.HELIX = gated_agents(**options)
    gated.gate.set()
    flight = InFlight("s-race", operation_id=start_operation(options))
    flight.stream_text("CONFIDENTIAL-ANSWER the")
    flight.expire()
    call_command("helix_recover")
    assert flight.run.status == "interrupted"
    gated.gate.clear()
    gated.entered.clear()
    outcome: list[str] = []
    check = threading.Thread(
        target=lambda: outcome.append(async_to_sync(aperform)(inv.CHECK_STATUS, flight.run_id).outcome)
    )
    check.start()
    assert gated.entered.wait(10)
    assert flight.run.status == "recovering"  # the check holds the run while it asks the provider
    session = ChatSession.objects.get(pk="s-race")
    cancelled = async_to_sync(get_executor().cancel)(session=session, run_id=flight.run_id)
    assert cancelled.status == "cancelled" and cancelled.provider_cancel_result == "cancelled"
    gated.gate.set()
    check.join(10)
    assert outcome == ["changed_meanwhile"]
    run = flight.run
    assert run.status == "cancelled"
    assert Message.objects.get(session_id="s-race", position=1).text == "CONFIDENTIAL-ANSWER the"
    call_command("helix_recover")
    assert flight.run.status == "cancelled"


def test_logs_carry_no_prompt_or_answer_text(caplog, settings):
    caplog.set_level(logging.DEBUG)
    fail = {
        "FLUSH_INTERVAL_MS": 5,
        "AGENTS": {
            "default": {
                "PROVIDER": {
                    "BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider",
                    "OPTIONS": {"TEXT": ANSWER, "FAIL_AT_FRACTION": 0.5},
                },
                "MODEL": "scripted-1",
            }
        },
    }
    settings.HELIX = fail
    executor = get_executor()
    session = ChatSession.objects.create(id="s-logs")
    message = {"id": "u-logs", "role": "user", "parts": [{"type": "text", "text": USER_TEXT}]}

    async def failing_run():
        handle = await executor.execute(session, [message])
        return handle.run_id, await executor.wait(handle.run_id, 10)

    run_id, status = async_to_sync(failing_run)()
    assert status == "failed"
    failed = Run.objects.get(pk=run_id)
    assert failed.partial_chars > 0
    # a recovering run: a dead process's run, the scan, then Continue and Regenerate
    flight = InFlight("s-logs-2")
    flight.stream_text(ANSWER[:30])
    flight.tool(
        "call_1", "create_issue", effect="side_effect", status="succeeded", result={"secret": "TOOL-RESULT-XYZ"}
    )
    flight.expire()
    call_command("helix_recover")
    settings.HELIX = {
        **fail,
        "AGENTS": {
            "default": {
                **fail["AGENTS"]["default"],
                "PROVIDER": {
                    "BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider",
                    "OPTIONS": {"TEXT": ANSWER},
                },
            }
        },
    }
    assert (
        async_to_sync(aperform)(inv.CONTINUE, flight.run_id, executor=get_executor(), wait_seconds=10).outcome
        == "started:completed"
    )
    assert (
        async_to_sync(aperform)(inv.REGENERATE, run_id, executor=get_executor(), wait_seconds=10).outcome
        == "started:completed"
    )
    events = [r for r in caplog.records if r.name == "helix_django.telemetry"]
    names = {r.helix_event for r in events}
    assert {
        "run.started",
        "run.finished",
        "run.interrupted",
        "recovery.action",
        "recovery.outcome",
        "recovery.scan",
    } <= names
    interrupted = next(r for r in events if r.helix_event == "run.interrupted")
    assert interrupted.helix_fields["run_id"] == flight.run_id and interrupted.helix_fields["partial_chars"] == 30
    assert interrupted.helix_fields["tools_completed"] == 1 and interrupted.helix_fields["elapsed_ms"] >= 0
    secrets = ("SECRET-PROMPT", "CONFIDENTIAL-ANSWER", "ten seconds", "SECRET-ARG", "TOOL-RESULT-XYZ", USER_TEXT[:20])
    for record in caplog.records:
        rendered = " ".join([record.getMessage(), repr(record.args), repr(getattr(record, "helix_fields", ""))])
        for secret in secrets:
            assert secret not in rendered, (record.name, rendered[:200])
