"""A bulk recovery action of the changelist acts on at most ``HELIX["ADMIN_BULK_MAX_RUNS"]`` runs.

Found by review (seventeenth session, "bounded work"): the changelist's "select all" let one
request perform a recovery per selected run (each a transaction; *Check status* a provider
call), however many there were, and report one error message per refused run. A larger
selection is now refused with one message, on the confirmation page and on its POST, and
nothing is done; refusals are reported once per reason.
"""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.urls import reverse

from helix_django.models import Run
from tests.admin.test_actions import history, interrupted
from tests.recovery.factories import InFlight

pytestmark = pytest.mark.django_db(transaction=True)

CHANGELIST = "admin:helix_django_run_changelist"


@pytest.fixture
def at_most_three(settings):
    settings.HELIX = {**getattr(django_settings, "HELIX", {}), "ADMIN_BULK_MAX_RUNS": 3}


def _live(prefix: str, count: int) -> list[InFlight]:
    flights = [InFlight(f"{prefix}-{i}") for i in range(count)]
    for flight in flights:
        flight.stream_text("text so far")
    return flights


def test_a_selection_over_the_limit_is_refused_and_nothing_is_done(staff_client, at_most_three):
    flights = _live("s-bulk-over", 4)
    data = {"action": "recovery_mark_interrupted", "_selected_action": [f.run_id for f in flights]}
    url = reverse(CHANGELIST)

    for posted in (data, {**data, "confirm": "yes"}):  # the confirmation page, then its POST
        page = staff_client.post(url, posted, follow=True)
        body = page.content.decode()
        assert page.status_code == 200
        assert "End this generation as interrupted" not in body  # no confirmation page
        assert "acts on at most 3 generations at once; 4 were selected" in body
        assert "Nothing was done" in body

    assert {Run.objects.get(pk=f.run_id).status for f in flights} == {"streaming"}
    assert all(history(f.run_id) == [] for f in flights)


def test_a_selection_at_the_limit_is_performed(staff_client, at_most_three):
    flights = _live("s-bulk-at", 3)
    data = {"action": "recovery_mark_interrupted", "_selected_action": [f.run_id for f in flights]}
    url = reverse(CHANGELIST)
    assert "End this generation as interrupted" in staff_client.post(url, data).content.decode()
    done = staff_client.post(url, {**data, "confirm": "yes"}, follow=True).content.decode()
    assert "Mark interrupted done for 3 generation(s)." in done
    assert {Run.objects.get(pk=f.run_id).status for f in flights} == {"interrupted"}


def test_refusals_are_reported_once_per_reason(staff_client):
    ended = [interrupted(f"s-bulk-refused-{i}") for i in range(7)]
    data = {"action": "recovery_cancel", "_selected_action": [f.run_id for f in ended], "confirm": "yes"}
    page = staff_client.post(reverse(CHANGELIST), data, follow=True)
    said = [str(message) for message in page.context["messages"]]
    refusals = [text for text in said if text.startswith("Cancel was refused for")]
    assert len(refusals) == 1, said
    assert refusals[0].startswith("Cancel was refused for 7 generations (")
    named = [run_id for run_id in (f.run_id for f in ended) if run_id in refusals[0]]
    assert len(named) == 5 and "…" in refusals[0]  # five ids named, the rest counted
    assert "Cancel done for 0 generation(s)." in said
    assert {Run.objects.get(pk=f.run_id).status for f in ended} == {"interrupted"}
