"""Recovery actions in the admin: confirmation pages, state changes, permission, history."""

from __future__ import annotations

import time

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.admin.utils import quote
from django.core.management import call_command
from django.urls import reverse

from helix_django.models import Message, Run, ToolExecution
from helix_django.recovery import inventory as inv
from helix_django.signals import recovery_action_taken, run_finished
from helix_django.snapshot import build_snapshot
from tests.recovery.factories import InFlight, durable_agents, start_operation

pytestmark = pytest.mark.django_db(transaction=True)


def action_url(run_id: str, action: str) -> str:
    return reverse("admin:helix_django_run_recovery", args=[quote(run_id), action])


def interrupted(session_id: str, text: str = "Partial answer text", **kwargs) -> InFlight:
    flight = InFlight(session_id, **kwargs)
    flight.stream_text(text)
    flight.expire()
    call_command("helix_recover", "--run", flight.run_id)
    assert flight.run.status == "interrupted"
    return flight


def history(run_id: str) -> list[str]:
    return [entry.get_change_message() for entry in LogEntry.objects.filter(object_id=run_id).order_by("id")]


def test_confirmation_page_says_what_will_happen(staff_client):
    flight = interrupted("s-confirm")
    response = staff_client.get(action_url(flight.run_id, inv.REGENERATE))
    body = response.content.decode()
    assert response.status_code == 200
    assert "Start a NEW attempt at this turn from the last safe checkpoint" in body
    assert "Yes, Regenerate" in body
    assert flight.run.status == "interrupted"  # GET changes nothing
    refused = staff_client.get(action_url(flight.run_id, inv.MARK_INTERRUPTED)).content.decode()
    assert "Only a running or stuck generation can be marked interrupted." in refused
    assert "Yes, Mark interrupted" not in refused


def test_mark_interrupted_needs_permission_and_is_logged(staff_client, viewer_client):
    flight = InFlight("s-mark")
    flight.stream_text("Half of the answer")
    url = action_url(flight.run_id, inv.MARK_INTERRUPTED)
    assert viewer_client.post(url).status_code == 403
    assert flight.run.status == "streaming"
    assert history(flight.run_id) == []
    response = staff_client.post(url)
    assert response.status_code == 302
    run = flight.run
    assert run.status == "interrupted" and run.recovery_action == "mark_interrupted"
    assert Message.objects.get(session_id="s-mark", position=1).text == "Half of the answer"
    assert history(flight.run_id) == ["Recovery action: Mark interrupted -> interrupted"]


def test_cancel_keeps_partial_and_stays_cancelled(staff_client, viewer_client):
    flight = InFlight("s-cancel")
    flight.stream_text("Partial answer text")
    flight.expire()
    assert viewer_client.post(action_url(flight.run_id, inv.CANCEL)).status_code == 403
    staff_client.post(action_url(flight.run_id, inv.CANCEL))
    run = flight.run
    assert run.status == "cancelled" and run.cancel_requested_at is not None and run.cancelled_by == "staff"
    assert Message.objects.get(session_id="s-cancel", position=1).text == "Partial answer text"
    offers = inv.inventory(run)
    assert not offers[inv.CHECK_STATUS].is_available
    assert offers[inv.CHECK_STATUS].reason == "A cancelled generation stays cancelled."
    call_command("helix_recover")
    assert flight.run.status == "cancelled"
    assert history(flight.run_id) == ["Recovery action: Cancel -> cancelled"]


def test_cancel_is_not_offered_on_an_ended_run(staff_client):
    flight = interrupted("s-cancel-ended")
    offer = inv.inventory(flight.run)[inv.CANCEL]
    assert not offer.is_available
    assert offer.reason == "The generation already ended: there is nothing left to stop."
    page = staff_client.get(reverse("admin:helix_django_run_change", args=[quote(flight.run_id)])).content.decode()
    assert '<button type="button" class="helix-action-unavailable" data-action="cancel" disabled' in page
    staff_client.post(action_url(flight.run_id, inv.CANCEL))
    assert flight.run.status == "interrupted"


def test_a_cancel_never_undoes_the_users_keep(staff_client):
    """A Cancel on an ended run would tell the user "you stopped it" and undo their Keep (issue 17)."""
    flight = interrupted("s-cancel-kept")
    staff_client.post(action_url(flight.run_id, inv.KEEP_PARTIAL))
    assert flight.run.recovery_action == inv.KEEP_PARTIAL
    page = staff_client.get(action_url(flight.run_id, inv.CANCEL)).content.decode()
    assert "Yes, Cancel" not in page
    staff_client.post(action_url(flight.run_id, inv.CANCEL))
    run = flight.run
    assert run.status == "interrupted" and run.cancel_requested_at is None and run.cancelled_by == ""
    assert run.recovery_action == inv.KEEP_PARTIAL  # the user's choice stands
    assert Message.objects.get(session_id="s-cancel-kept", position=1).text == "Partial answer text"
    assert history(flight.run_id) == ["Recovery action: Keep partial -> kept"]


def test_keep_and_discard_partial(staff_client, viewer_client):
    kept = interrupted("s-keep")
    assert viewer_client.post(action_url(kept.run_id, inv.KEEP_PARTIAL)).status_code == 403
    staff_client.post(action_url(kept.run_id, inv.KEEP_PARTIAL))
    assert kept.run.recovery_action == "keep_partial"
    row = Message.objects.get(session_id="s-keep", position=1)
    assert row.metadata["helix"]["partial"] is True and row.text == "Partial answer text"
    assert not inv.inventory(kept.run)[inv.KEEP_PARTIAL].is_available
    assert history(kept.run_id) == ["Recovery action: Keep partial -> kept"]

    dropped = interrupted("s-discard")
    assert viewer_client.post(action_url(dropped.run_id, inv.DISCARD_PARTIAL)).status_code == 403
    staff_client.post(action_url(dropped.run_id, inv.DISCARD_PARTIAL))
    assert not Message.objects.filter(session_id="s-discard", position=1).exists()
    archived = Message.objects.get(session_id="s-discard", position__isnull=True)
    assert archived.text == "Partial answer text" and archived.archived_at is not None
    assert dropped.run.session.message_count == 1
    offers = inv.inventory(dropped.run)
    assert not offers[inv.CONTINUE].is_available and offers[inv.REGENERATE].is_available
    assert history(dropped.run_id) == ["Recovery action: Discard partial -> discarded"]


def test_unknown_side_effect_blocks_until_resolved(staff_client, viewer_client):
    flight = InFlight("s-unknown")
    flight.stream_text("Creating it")
    execution = flight.tool("call_1", "create_issue", effect="side_effect", status="started", key="issue:7")
    flight.expire()
    call_command("helix_recover")
    assert ToolExecution.objects.get(pk=execution.pk).status == "unknown"
    refused = staff_client.post(action_url(flight.run_id, inv.REGENERATE), follow=True)
    assert "outcome is unknown" in refused.content.decode()
    resolve = reverse("admin:helix_django_run_resolve_tool", args=[quote(flight.run_id), execution.pk])
    assert "neither run twice nor forgotten" in staff_client.get(resolve).content.decode()
    assert viewer_client.post(resolve, {"outcome": "executed", "result": "{}"}).status_code == 403
    bad = staff_client.post(resolve, {"outcome": "executed", "result": "{not json"})
    assert bad.status_code == 400 and "valid JSON" in bad.content.decode()
    staff_client.post(resolve, {"outcome": "executed", "result": '{"issue": 7}'})
    resolved = ToolExecution.objects.get(pk=execution.pk)
    assert (resolved.status, resolved.result) == ("succeeded", {"issue": 7})
    offers = inv.inventory(flight.run)
    assert offers[inv.REGENERATE].is_available and offers[inv.CONTINUE].is_available
    assert history(flight.run_id) == [f"Tool execution create_issue ({execution.pk}) marked executed"]


def test_check_status_completes_the_run_from_the_provider(staff_client, viewer_client, settings):
    options = {"TEXT": "The provider finished this answer while we were down.", "PACE_TPS": 8}
    settings.HELIX = durable_agents(**options)
    operation_id = start_operation(options)
    flight = InFlight("s-check", operation_id=operation_id)
    flight.stream_text("The provider")
    flight.expire()
    call_command("helix_recover")
    run = flight.run
    assert (run.status, run.error_code) == ("interrupted", "run_interrupted")
    assert inv.inventory(run)[inv.CHECK_STATUS].is_available
    assert viewer_client.post(action_url(run.id, inv.CHECK_STATUS)).status_code == 403
    time.sleep(1.5)  # the scripted operation's duration (10 tokens at 8 per second) elapses
    staff_client.post(action_url(run.id, inv.CHECK_STATUS))
    run = flight.run
    assert run.status == "completed" and run.partial_chars == 0
    row = Message.objects.get(session_id="s-check", position=1)
    assert row.text == options["TEXT"] and row.metadata["helix"]["partial"] is False
    assert history(run.id) == ["Recovery action: Check status -> completed"]


def test_invalid_operation_id_invalidates_continuation(staff_client, settings):
    settings.HELIX = durable_agents()
    flight = InFlight("s-invalid", operation_id="scrop_does_not_exist")
    flight.stream_text("Some partial text")
    flight.expire()
    report = call_command("helix_recover")
    assert report is None
    run = flight.run
    assert run.status == "interrupted" and run.is_continuation_valid is False
    offers = inv.inventory(run)
    assert not offers[inv.CONTINUE].is_available and offers[inv.REGENERATE].is_available
    assert "continuation state is invalid" in offers[inv.CONTINUE].reason


def test_bulk_mark_interrupted_confirms_then_acts(staff_client):
    first, second = InFlight("s-bulk-1"), InFlight("s-bulk-2")
    for flight in (first, second):
        flight.stream_text("text")
    url = reverse("admin:helix_django_run_changelist")
    data = {"action": "recovery_mark_interrupted", "_selected_action": [first.run_id, second.run_id]}
    page = staff_client.post(url, data)
    assert page.status_code == 200 and "End this generation as interrupted" in page.content.decode()
    assert first.run.status == "streaming"
    done = staff_client.post(url, {**data, "confirm": "yes"}, follow=True)
    assert "Mark interrupted done for 2 generation(s)." in done.content.decode()
    assert {first.run.status, second.run.status} == {"interrupted"}
    assert history(first.run_id) == ["Recovery action: Mark interrupted -> interrupted"]


def test_bulk_action_hidden_without_permission(viewer_client):
    flight = InFlight("s-bulk-viewer")
    url = reverse("admin:helix_django_run_changelist")
    data = {"action": "recovery_mark_interrupted", "_selected_action": [flight.run_id], "confirm": "yes"}
    viewer_client.post(url, data)
    assert Run.objects.get(pk=flight.run_id).status == "streaming"
    assert history(flight.run_id) == []


SCRIPTED = {
    "FLUSH_INTERVAL_MS": 5,
    "AGENTS": {
        "default": {
            "PROVIDER": {
                "BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider",
                "OPTIONS": {"TEXT": "A fresh complete answer."},
            },
            "MODEL": "scripted-1",
        }
    },
}


def wait_done(session_id: str) -> None:
    from asgiref.sync import async_to_sync

    from helix_django.runtime.executor import get_executor

    latest = Run.objects.filter(session_id=session_id).order_by("-created_at").first()
    assert async_to_sync(get_executor().wait)(latest.id, 10) == "completed"


def test_regenerate_creates_a_second_attempt_and_keeps_the_first(staff_client, viewer_client, settings):
    settings.HELIX = SCRIPTED
    flight = interrupted("s-regen", text="An interrupted first try")
    assert viewer_client.post(action_url(flight.run_id, inv.REGENERATE)).status_code == 403
    staff_client.post(action_url(flight.run_id, inv.REGENERATE))
    wait_done("s-regen")
    runs = list(Run.objects.filter(session_id="s-regen").order_by("created_at"))
    assert [(r.attempt, r.kind, r.status) for r in runs] == [(1, "send", "interrupted"), (2, "regenerate", "completed")]
    assert runs[0].recovery_action == "regenerate"
    assert Message.objects.get(session_id="s-regen", position=1).text == "A fresh complete answer."
    archived = Message.objects.get(session_id="s-regen", position__isnull=True)
    assert archived.text == "An interrupted first try"
    assert history(flight.run_id) == [f"Recovery action: Regenerate -> started (new generation {runs[1].id})"]


def test_continue_starts_a_new_generation_from_the_partial(staff_client, viewer_client, settings):
    settings.HELIX = SCRIPTED
    flight = interrupted("s-continue", text="The first half, ")
    assert viewer_client.post(action_url(flight.run_id, inv.CONTINUE)).status_code == 403
    assert Run.objects.filter(session_id="s-continue").count() == 1 and history(flight.run_id) == []
    staff_client.post(action_url(flight.run_id, inv.CONTINUE))
    wait_done("s-continue")
    runs = list(Run.objects.filter(session_id="s-continue").order_by("created_at"))
    assert [(r.attempt, r.kind, r.status) for r in runs] == [(1, "send", "interrupted"), (2, "continue", "completed")]
    row = Message.objects.get(session_id="s-continue", position=1)
    assert row.text.startswith("The first half, ") and row.text.endswith("A fresh complete answer.")
    assert row.ui_id == flight.run.response_message_id
    assert history(flight.run_id)[0].startswith("Recovery action: Continue -> started (new generation run_")


def test_live_run_check_status_refused_and_cancel_goes_through_the_executor(staff_client, settings):
    settings.HELIX = durable_agents()
    flight = InFlight("s-live-cancel", operation_id="scrop_live")
    flight.stream_text("Still streaming")
    offers = inv.inventory(flight.run)
    assert offers[inv.CHECK_STATUS].reason == "The generation is still running (its process renews its lease)."
    staff_client.post(action_url(flight.run_id, inv.CANCEL))
    run = flight.run
    assert run.status == "cancelled" and run.cancel_requested_at is not None
    assert run.provider_cancel_result == "unknown"  # the provider has no such operation
    assert Message.objects.get(session_id="s-live-cancel", position=1).text == "Still streaming"
    # Who stopped it is recorded and told: the message, the snapshot (issue 17).
    assert run.cancelled_by == "staff"
    helix = Message.objects.get(session_id="s-live-cancel", position=1).metadata["helix"]
    assert helix == {"runId": run.id, "status": "cancelled", "partial": True, "cancelledBy": "staff"}
    assert build_snapshot("s-live-cancel")["cancelledBy"] == "staff"
    assert history(flight.run_id) == ["Recovery action: Cancel -> cancelled"]


def test_a_recovery_action_sends_its_signals_to_plain_and_coroutine_receivers(staff_client):
    """Signals are sent with ``asend``: a plain receiver runs where it may query the database, a
    coroutine receiver is awaited; ``run_finished`` comes with the run's terminal status."""
    flight = InFlight("s-signals")
    flight.stream_text("Half of the answer")
    taken, finished = [], []

    def plain(sender, run, action, outcome, **kwargs):
        taken.append(("plain", action, outcome, Run.objects.get(pk=run.id).status))

    async def coroutine(sender, run, action, outcome, **kwargs):
        taken.append(("coroutine", action, outcome, run.status))

    async def on_finished(sender, run, status, **kwargs):
        finished.append((run.id, run.status, status))

    recovery_action_taken.connect(plain, dispatch_uid="test-plain")
    recovery_action_taken.connect(coroutine, dispatch_uid="test-coroutine")
    run_finished.connect(on_finished, dispatch_uid="test-finished")
    try:
        assert staff_client.post(action_url(flight.run_id, inv.MARK_INTERRUPTED)).status_code == 302
    finally:
        recovery_action_taken.disconnect(dispatch_uid="test-plain")
        recovery_action_taken.disconnect(dispatch_uid="test-coroutine")
        run_finished.disconnect(dispatch_uid="test-finished")
    assert sorted(taken) == [
        ("coroutine", "mark_interrupted", "interrupted", "interrupted"),
        ("plain", "mark_interrupted", "interrupted", "interrupted"),
    ]
    assert finished == [(flight.run_id, "interrupted", "interrupted")]
