"""Admin pages: Stuck filter, change page content, and query counts that do not grow with chunks or tools."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin.utils import quote
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from helix_django.models import Run
from tests.recovery.factories import InFlight

pytestmark = pytest.mark.django_db(transaction=True)


def _set(run_id: str, **fields) -> None:
    Run.objects.filter(pk=run_id).update(**fields)


def test_stuck_filter_lists_exactly_the_stuck_runs(staff_client, settings):
    now = timezone.now()
    healthy = InFlight("s-healthy").run_id
    expired = InFlight("s-expired")
    expired.expire()
    silent = InFlight("s-silent").run_id
    _set(silent, last_event_at=now - timedelta(hours=1))
    waiting = InFlight("s-waiting").run_id
    _set(waiting, status="suspended_client_tool", last_event_at=now - timedelta(hours=1), lease_expires_at=None)
    waiting_fresh = InFlight("s-waiting-fresh").run_id
    _set(waiting_fresh, status="suspended_client_tool", lease_expires_at=None)
    interrupted = InFlight("s-old-interrupted").run_id
    _set(
        interrupted,
        status="interrupted",
        lease_expires_at=now - timedelta(hours=1),
        last_event_at=now - timedelta(hours=1),
    )
    url = reverse("admin:helix_django_run_changelist")
    response = staff_client.get(url, {"stuck": "yes"})
    assert response.status_code == 200
    listed = {run.pk for run in response.context["cl"].result_list}
    assert listed == {expired.run_id, silent, waiting}
    response = staff_client.get(url, {"stuck": "no"})
    assert {run.pk for run in response.context["cl"].result_list} == {healthy, waiting_fresh, interrupted}


def test_changelist_search_by_operation_id_and_user(staff_client, reconciler):
    flight = InFlight("s-search", owner=reconciler, operation_id="resp_abc123")
    InFlight("s-other")
    url = reverse("admin:helix_django_run_changelist")
    for query in ("resp_abc123", "reconciler", "s-search"):
        response = staff_client.get(url, {"q": query})
        assert [r.pk for r in response.context["cl"].result_list] == [flight.run_id]


def _big_run(session_id: str, chunks: int, tools: int) -> InFlight:
    flight = InFlight(session_id)
    text = "x" * chunks
    flight.stream_text(text, pieces=chunks - 2)
    for i in range(tools):
        flight.tool(
            f"call_{i}", f"tool_{i}", effect="side_effect" if i % 2 else "read_only", status="succeeded", key=f"k{i}"
        )
    flight.expire()
    return flight


def _count(client, url) -> int:
    """Return the ORM queries of a warm GET of ``url`` (the first GET fills per-process caches).

    The stream manager's chunk reads are counted apart: they may run on asgiref's
    thread-sensitive executor thread, whose connection this context cannot always see, and
    they are bounded by the batch size (one info + one read per 5 000 chunks), never per chunk.
    """
    for _ in range(2):
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(url)
        assert response.status_code == 200
    stream = [q for q in ctx.captured_queries if "helix_django_stream" in q["sql"]]
    assert len(stream) <= 3
    return len(ctx.captured_queries) - len(stream)


def test_change_page_shows_partial_tools_checkpoints_timeline(staff_client):
    flight = InFlight("s-page")
    flight.stream_text("The API key should be stored in a sec")
    flight.tool("call_1", "create_issue", effect="side_effect", status="started", key="issue:42")
    flight.expire()
    from django.core.management import call_command

    call_command("helix_recover")
    # Follow the link the changelist renders: the id as displayed (never Django's "_5F" for "_").
    changelist = staff_client.get(reverse("admin:helix_django_run_changelist"), follow=True).content.decode()
    href = reverse("admin:helix_django_run_change", args=[flight.run_id])
    assert "_5F" not in href and f'href="{href}?_changelist_filters=view%3Dattention"' in changelist
    response = staff_client.get(href)
    body = response.content.decode()
    assert response.status_code == 200
    assert "PARTIAL" in body and "The API key should be stored in a sec" in body
    assert "issue:42" in body and "create_issue" in body and 'data-status="unknown"' in body
    assert "Resolve (blocks Continue and Regenerate)" in body
    assert body.count('class="helix-checkpoint"') == 2  # run_start, terminal
    assert "text-delta" in body and "<td>error</td><td>1</td><td>run_interrupted</td>" in body
    assert 'name="_save"' not in body  # read-only: runs change through recovery actions only
    assert 'data-action="regenerate"' in body and "outcome is unknown" in body


def test_admin_pages_do_not_grow_queries_with_chunks_or_tools(staff_client):
    small = _big_run("s-small", chunks=10, tools=2)
    big = _big_run("s-big", chunks=1000, tools=20)
    from helix_django.models import StreamChunk, ToolExecution

    assert StreamChunk.objects.filter(run_id=big.run_id).count() >= 1000
    assert ToolExecution.objects.filter(run_id=big.run_id).count() == 20
    change = [
        _count(staff_client, reverse("admin:helix_django_run_change", args=[quote(f.run_id)])) for f in (small, big)
    ]
    assert change[0] == change[1]
    assert change[1] <= 40
    sessions = [
        _count(staff_client, reverse("admin:helix_django_chatsession_change", args=[f.session_id]))
        for f in (small, big)
    ]
    assert sessions[0] == sessions[1]
    for view in ("attention", "all"):
        url = reverse("admin:helix_django_run_changelist") + f"?view={view}"
        changelist = _count(staff_client, url)
        for i in range(15):
            InFlight(f"s-more-{view}-{i}").expire()
        assert _count(staff_client, url) == changelist
    tools = _count(staff_client, reverse("admin:helix_django_toolexecution_changelist"))
    assert tools <= 12
    assert _count(staff_client, reverse("admin:helix_django_chatsession_changelist")) <= 12
