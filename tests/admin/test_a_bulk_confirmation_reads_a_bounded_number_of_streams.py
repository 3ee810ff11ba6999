"""The changelist's bulk confirmation page reads a bounded number of streams, however many runs are selected.

Found by review (sixteenth session): the page counted the text so far of every selected live
run, one read of its stream each, so selecting every running generation (the changelist's
"select all") made one request read all of their answers. It now counts at most
``LIVE_TEXT_COUNTS`` live runs and lists the others as still being written; an ended run's
count is its stored ``partial_chars`` (no read).
"""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from helix_django.admin import views
from helix_django.streams import get_stream_manager
from tests.admin.test_actions import interrupted
from tests.recovery.factories import InFlight

pytestmark = pytest.mark.django_db(transaction=True)


def test_selecting_more_live_runs_than_the_page_counts_reads_no_more_streams(staff_client, monkeypatch):
    monkeypatch.setattr(views, "LIVE_TEXT_COUNTS", 3, raising=False)
    live = [InFlight(f"s-bulk-live-{i}") for i in range(6)]
    for flight in live:
        flight.stream_text("seventeen chars!!")  # 17 characters
    ended = interrupted("s-bulk-ended", text="Partial answer text")
    manager = get_stream_manager()
    reads: list[str] = []
    read_after = manager.read_after

    async def counted(stream_id, *args, **kwargs):
        reads.append(stream_id)
        return await read_after(stream_id, *args, **kwargs)

    monkeypatch.setattr(manager, "read_after", counted)
    selected = [flight.run_id for flight in live] + [ended.run_id]
    data = {"action": "recovery_mark_interrupted", "_selected_action": selected}

    page = staff_client.post(reverse("admin:helix_django_run_changelist"), data)

    body = page.content.decode()
    assert page.status_code == 200 and "End this generation as interrupted" in body
    assert len(set(reads)) == 3, reads  # the first three live runs' streams, not six
    assert body.count("17 characters so far") == 3
    assert body.count("still being written: open it to see the text") == 3
    assert "19 partial characters" in body  # the ended run: its stored count
    assert all(run_id in body for run_id in selected)
    assert "will be refused" in body  # Mark interrupted does not apply to the ended run
    assert {flight.run.status for flight in live} == {"streaming"}  # a confirmation page changes nothing


def test_a_single_runs_page_still_counts_its_live_text(staff_client):
    flight = InFlight("s-single-live")
    flight.stream_text("seventeen chars!!")
    url = reverse("admin:helix_django_run_recovery", args=[quote(flight.run_id), "mark_interrupted"])
    body = staff_client.get(url).content.decode()
    assert "17 characters so far" in body
    assert "running normally" in body  # its lease is live: the page warns
