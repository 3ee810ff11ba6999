"""The generations list and run page a support person reads at a glance (issue 22, items 1-3)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from helix_django.admin.timeline import STALL_MS, build_timeline
from helix_django.models import ChatSession, Run
from helix_django.recovery import inventory as inv
from helix_django.streams.writer import WRITTEN_AT_KEY
from tests.recovery.factories import InFlight

pytestmark = pytest.mark.django_db(transaction=True)

LIST = "admin:helix_django_run_changelist"


def _listed(client, **params) -> set[str]:
    response = client.get(reverse(LIST), params)
    assert response.status_code == 200
    return {run.pk for run in response.context["cl"].result_list}


def _change(client, run_id: str) -> str:
    response = client.get(reverse("admin:helix_django_run_change", args=[quote(run_id)]))
    assert response.status_code == 200
    return response.content.decode()


def test_the_list_opens_on_the_runs_that_need_attention(staff_client):
    healthy = InFlight("s-ok").run_id
    stuck = InFlight("s-stuck")
    stuck.expire()
    interrupted = InFlight("s-int")
    interrupted.expire()
    call_command("helix_recover", "--run", interrupted.run_id)
    failed = InFlight("s-failed").run_id
    Run.objects.filter(pk=failed).update(status="failed", error_code="provider_error", lease_expires_at=None)
    reconciled = InFlight("s-kept").run_id
    Run.objects.filter(pk=reconciled).update(status="interrupted", recovery_action="keep_partial")
    unknown = InFlight("s-tool")
    unknown.tool("call_1", "send_mail", effect="side_effect", status="unknown")
    Run.objects.filter(pk=unknown.run_id).update(status="interrupted", recovery_action="keep_partial")
    completed = InFlight("s-done").run_id
    Run.objects.filter(pk=completed).update(status="completed")

    response = staff_client.get(reverse(LIST))
    assert response.status_code == 302 and response["Location"].endswith("?view=attention")
    assert _listed(staff_client, view="attention") == {stuck.run_id, interrupted.run_id, failed, unknown.run_id}
    assert _listed(staff_client, view="all") == {
        healthy,
        stuck.run_id,
        interrupted.run_id,
        failed,
        reconciled,
        unknown.run_id,
        completed,
    }
    page = staff_client.get(reverse(LIST), {"view": "attention"}).content.decode()
    assert "Needs attention" in page and "All generations" in page


def test_the_list_shows_badge_last_event_title_and_owner(staff_client, reconciler):
    flight = InFlight("s-badge", owner=reconciler)
    ChatSession.objects.filter(pk="s-badge").update(title="Why does my invoice show twice?")
    flight.expire()
    page = staff_client.get(reverse(LIST), {"view": "all"}).content.decode()
    assert 'class="helix-badge helix-badge-attention" data-status="streaming">streaming · stuck</span>' in page
    assert "Why does my invoice show twice?" in page
    assert '<td class="field-owner">reconciler</td>' in page
    assert '<td class="field-last_event"><time datetime="' in page and " ago</time>" in page
    sessions = staff_client.get(reverse("admin:helix_django_chatsession_changelist")).content.decode()
    assert "Why does my invoice show twice?" in sessions
    assert 'data-status="streaming">streaming</span>' in sessions


def test_owner_is_searched_by_the_user_models_username_field(staff_client, monkeypatch):
    owner = User.objects.create_user("plain-name", email="ada@example.org")
    flight = InFlight("s-email", owner=owner)
    InFlight("s-someone-else")
    monkeypatch.setattr(User, "USERNAME_FIELD", "email")
    assert _listed(staff_client, view="all", q="ada@example.org") == {flight.run_id}
    sessions = staff_client.get(reverse("admin:helix_django_chatsession_changelist"), {"q": "ada@example.org"})
    assert [s.pk for s in sessions.context["cl"].result_list] == ["s-email"]


def test_run_page_times_to_the_second_and_no_error_on_a_healthy_run(staff_client):
    flight = InFlight("s-times")
    flight.stream_text("Half an answer")
    page = _change(staff_client, flight.run_id)
    created = timezone.localtime(flight.run.created_at)
    assert f"{created:%Y-%m-%d %H:%M:%S}" in page
    assert "Error retryable" not in page and "Error code" not in page
    assert '<div class="readonly">—</div>' in page  # the error row of a run without an error
    assert 'src="/static/helix_django/admin-run.js"' in page and 'data-live="1"' in page
    Run.objects.filter(pk=flight.run_id).update(status="failed", error_code="provider_timeout", error_retryable=True)
    page = _change(staff_client, flight.run_id)
    assert "provider_timeout · retrying may help" in page and "admin-run.js" not in page


def test_actions_are_buttons_and_unavailable_ones_say_why(staff_client):
    flight = InFlight("s-buttons")
    flight.stream_text("Half an answer")
    page = _change(staff_client, flight.run_id)
    url = reverse("admin:helix_django_run_recovery", args=[flight.run_id, inv.MARK_INTERRUPTED])
    assert f'<a class="button helix-action helix-warn" data-action="mark_interrupted" href="{url}">' in page
    assert "The generation is running normally: this stops the user's answer." in page
    assert '<button type="button" class="helix-action-unavailable" data-action="keep_partial" disabled' in page
    assert "The generation has not ended; mark it interrupted or cancel it first." in page
    confirm = staff_client.get(url).content.decode()
    assert 'id="helix-running-warning"' in confirm and "stops the user's answer mid-sentence" in confirm
    flight.expire()  # stuck now: marking it interrupted is the remedy, no warning
    assert 'id="helix-running-warning"' not in staff_client.get(url).content.decode()
    assert "helix-warn" not in _change(staff_client, flight.run_id)


def test_partial_chars_match_the_text_shown_live_and_after_the_end(staff_client):
    flight = InFlight("s-chars")
    flight.write([{"type": "reasoning-start", "id": "r1"}, {"type": "reasoning-delta", "id": "r1", "delta": "think"}])
    flight.stream_text("Twelve chars")  # 12 + 5 reasoning = 17
    page = _change(staff_client, flight.run_id)
    assert "(17 characters)" in page and "still being written (17 characters so far)" in page
    assert '<pre class="helix-response-reasoning" style="white-space: pre-wrap">think</pre>' in page
    url = reverse("admin:helix_django_run_recovery", args=[flight.run_id, inv.MARK_INTERRUPTED])
    assert "17 characters so far" in staff_client.get(url).content.decode()
    listed = staff_client.get(reverse(LIST), {"view": "all"}).content.decode()
    assert "still being written: open it to see the text" in listed
    staff_client.post(url)
    assert flight.run.partial_chars == 17
    page = _change(staff_client, flight.run_id)
    assert "(17 characters)" in page and '<div class="readonly">17</div>' in page
    assert (
        '<td class="field-partial_output">17</td>' in staff_client.get(reverse(LIST), {"view": "all"}).content.decode()
    )


def test_timeline_shows_times_gaps_and_stalls(staff_client):
    base = int(time.time() * 1000)
    chunks = [
        (1, {"type": "start", WRITTEN_AT_KEY: base}),
        (2, {"type": "text-delta", WRITTEN_AT_KEY: base + 300}),
        (3, {"type": "text-delta", WRITTEN_AT_KEY: base + 350}),
        (4, {"type": "text-delta", WRITTEN_AT_KEY: base + 350 + STALL_MS + 1000}),
        (5, {"type": "finish"}),
    ]
    entries, omitted = build_timeline(chunks)
    assert omitted == 0
    assert [(e.type, e.first, e.last, e.gap, e.is_stall) for e in entries] == [
        ("start", 1, 1, "", False),
        ("text-delta", 2, 3, "+300 ms", False),
        ("text-delta", 4, 4, "+6.0 s", True),
        ("finish", 5, 5, "", False),
    ]
    flight = InFlight("s-timeline")
    flight.write([{"type": "text-start", "id": "t1", WRITTEN_AT_KEY: base}])
    flight.write([{"type": "text-delta", "id": "t1", "delta": "x", WRITTEN_AT_KEY: base + STALL_MS + 2000}])
    page = _change(staff_client, flight.run_id)
    assert '<td class="helix-gap-stall">+7.0 s stall</td>' in page
    clock = (
        f"{timezone.localtime(datetime.fromtimestamp((base + STALL_MS + 2000) / 1000, tz=dt_timezone.utc)):%H:%M:%S.%f}"
    )
    assert f">{clock[:-3]}</time>" in page
    assert "Time to first token" in page and "Longest gap between chunks" in page and "7.0 s" in page


def test_stale_run_times_read_in_minutes_not_only_as_dates(staff_client):
    flight = InFlight("s-old")
    Run.objects.filter(pk=flight.run_id).update(last_event_at=timezone.now() - timedelta(minutes=3, seconds=5))
    page = staff_client.get(reverse(LIST), {"view": "all"}).content.decode()
    assert ">3 min 05 s ago</time>" in page
