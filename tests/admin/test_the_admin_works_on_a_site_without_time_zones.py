"""The support console on a site with ``USE_TZ = False`` (naive datetimes throughout).

Found by a new user (seventeenth session): the generations list, the sessions list and the
dashboard were 500s (``localtime() cannot be applied to a naive datetime``), and the
dashboard's hourly buckets never matched a naive hour. Times are shown as they are stored.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from helix_django.admin import dashboard
from helix_django.admin.spend import spend_per_day
from helix_django.models import Run
from tests.admin.test_actions import interrupted
from tests.recovery.factories import InFlight

pytestmark = pytest.mark.django_db(transaction=True)


def _close_orm_thread_connections() -> None:
    """Close the connections of asgiref's ORM thread: a connection keeps the ``USE_TZ`` it opened with
    (aware or naive datetimes), so flipping the setting in a running process must reopen them."""
    from asgiref.sync import SyncToAsync
    from django.db import connections

    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


@pytest.fixture
def naive_site(settings):
    """A callable that turns the site naive (``USE_TZ = False``, ``TIME_ZONE`` UTC) from then on.

    The runs are made first, as a site's processes would have made them: flipping ``USE_TZ``
    in a running process leaves its threads' connections returning aware datetimes.
    """

    def go_naive() -> None:
        _close_orm_thread_connections()
        settings.TIME_ZONE = "UTC"
        settings.USE_TZ = False

    yield go_naive
    _close_orm_thread_connections()  # the next test's threads open aware connections again


def test_the_lists_run_pages_and_dashboard_answer_200(naive_site, staff_client):
    live = InFlight("s-naive-live")
    live.stream_text("still writing")
    ended = interrupted("s-naive-ended")
    naive_site()
    pages = [
        reverse("admin:helix_django_run_changelist") + "?view=attention",
        reverse("admin:helix_django_run_changelist") + "?all=1",
        reverse("admin:helix_django_chatsession_changelist"),
        reverse("admin:helix_django_run_dashboard"),
        reverse("admin:helix_django_run_change", args=[quote(live.run_id)]),
        reverse("admin:helix_django_run_change", args=[quote(ended.run_id)]),
    ]
    for url in pages:
        response = staff_client.get(url)
        assert response.status_code == 200, (url, response.status_code)
    assert ended.run_id in staff_client.get(pages[0]).content.decode()  # interrupted: needs attention


def test_the_dashboard_counts_this_hours_runs(naive_site):
    interrupted("s-naive-hour")
    naive_site()
    board = dashboard.build()
    assert board.hourly[-1][1] == {"interrupted": 1}


def test_the_spend_per_day_counts_todays_runs_on_local_days(naive_site):
    flight = InFlight("s-naive-spend")
    Run.objects.filter(pk=flight.run_id).update(usage={"inputTokens": 3, "outputTokens": 4})
    naive_site()
    days = spend_per_day(datetime.now())
    assert (days[0].runs, days[0].input_tokens, days[0].output_tokens) == (1, 3, 4)
