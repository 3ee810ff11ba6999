"""The run page says why a generation stopped and what became of it, and links runs by their ids as shown.

Seen: the page of a run the relaunch scan ended said only "The generation was interrupted"
although the scan knew the process was lost; disabled actions were listed before the ones
staff could take; its links read ``run_5F…`` (Django's quoting of ``_``); a run regenerated
from the chat page named no run that followed it, and the dashboard counted it as open.
"""

from __future__ import annotations

import re

import pytest
from asgiref.sync import async_to_sync
from django.contrib.admin.utils import quote
from django.urls import reverse

from helix_django.admin import dashboard
from helix_django.models import ChatSession, Run
from helix_django.recovery.scan import arecover_run
from helix_django.runtime.executor import get_executor
from tests.recovery.factories import InFlight
from tests.transport.conftest import agent_settings

pytestmark = pytest.mark.django_db(transaction=True)


def _interrupted(session_id: str, **kwargs) -> InFlight:
    flight = InFlight(session_id)
    flight.stream_text("Half an answer")
    assert async_to_sync(arecover_run)(flight.run_id, force=True, query_provider=False, **kwargs).outcome == (
        "interrupted"
    )
    return flight


def _page(client, run_id: str) -> str:
    response = client.get(f"/admin/helix_django/run/{run_id}/change/")
    assert response.status_code == 200
    return response.content.decode()


def test_the_page_tells_the_cause_in_words_with_its_code(staff_client, settings):
    lost = _interrupted("s-cause-lost")
    page = _page(staff_client, lost.run_id)
    assert "The server process running it stopped answering" in page
    assert '<code class="helix-cause-code">process_lost</code>' in page

    stopped = _interrupted("s-cause-stopped", cause="server_stopped")
    assert "The server was stopped or redeployed while it was answering." in _page(staff_client, stopped.run_id)
    settings.LANGUAGE_CODE = "de"
    german = _page(staff_client, stopped.run_id)
    assert "Der Server wurde angehalten oder neu ausgerollt, während er antwortete." in german
    assert '<code class="helix-cause-code">server_stopped</code>' in german


def test_the_actions_staff_can_take_come_first(staff_client):
    flight = _interrupted("s-order")
    page = _page(staff_client, flight.run_id)
    block = page[page.index('id="helix-recovery"') :]
    block = block[: block.index("</fieldset>")]
    kinds = re.findall(r'class="(button helix-action[^"]*|helix-action-unavailable)"', block)
    available = [kind.startswith("button") for kind in kinds]
    assert any(available) and not all(available)
    assert available == sorted(available, reverse=True), kinds


def test_the_links_carry_the_id_as_displayed_and_old_quoted_links_still_open(staff_client):
    flight = _interrupted("s-ids")
    changelist = staff_client.get(reverse("admin:helix_django_run_changelist"), {"view": "all"}).content.decode()
    assert f'href="/admin/helix_django/run/{flight.run_id}/change/' in changelist
    assert "_5F" not in changelist
    page = _page(staff_client, flight.run_id)
    assert f"/admin/helix_django/run/{flight.run_id}/recovery/keep_partial/" in page and "_5F" not in page
    quoted = reverse("admin:helix_django_run_change", args=[quote(flight.run_id)])
    assert "_5F" in quoted and staff_client.get(quoted).status_code == 200


def test_a_chat_regenerate_links_both_runs_and_leaves_the_open_counts(staff_client, settings):
    settings.HELIX = {**settings.HELIX, **agent_settings(TEXT="again", PACE_TPS=0)}
    flight = _interrupted("s-linked")
    assert dashboard.build().needs_attention == 1
    assert dashboard.build().unresolved == {"interrupted": 1}

    session = ChatSession.objects.get(pk="s-linked")
    handle = async_to_sync(get_executor().execute)(session=session, messages=[], trigger="regenerate-message")
    async_to_sync(get_executor().wait)(handle.run_id, timeout=10)

    resolved = Run.objects.get(pk=flight.run_id)
    assert (resolved.recovery_action, resolved.resolved_by) == ("regenerate", handle.run_id)
    page = _page(staff_client, flight.run_id)
    assert "Regenerated: a new attempt at the turn" in page
    assert f'href="/admin/helix_django/run/{handle.run_id}/change/"' in page
    following = _page(staff_client, handle.run_id)
    assert 'id="helix-resolves"' in following and f'href="/admin/helix_django/run/{flight.run_id}/change/"' in following
    board = dashboard.build()
    assert (board.needs_attention, board.unresolved) == (0, {})
    tiles = staff_client.get(reverse("admin:helix_django_run_dashboard")).content.decode()
    assert re.search(
        r'id="helix-needs-attention" href="[^"]*\?view=attention"><strong>[^<]*</strong><span>0</span>', tiles
    )


def test_the_timeline_gives_a_time_to_the_last_chunks_and_the_ending(staff_client):
    import time

    from helix_django.streams.writer import WRITTEN_AT_KEY

    flight = InFlight("s-times")
    base = int(time.time() * 1000) - 2000
    flight.write([{"type": "text-start", "id": "t1", WRITTEN_AT_KEY: base}])
    flight.write(
        [{"type": "text-delta", "id": "t1", "delta": d, WRITTEN_AT_KEY: base + 100 * i} for i, d in enumerate("abc", 1)]
    )
    assert async_to_sync(arecover_run)(flight.run_id, force=True, query_provider=False).outcome == "interrupted"
    page = _page(staff_client, flight.run_id)
    rows = re.findall(r'<tr class="helix-timeline-entry">(.*?)</tr>', page, re.S)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S) for row in rows]
    deltas = next(c for c in cells if c[3] == "text-delta")
    # The folded deltas show their first and their last time.
    assert re.fullmatch(r'<time datetime="[^"]+">[\d:.]+</time> – [\d:.]+', deltas[1]), deltas
    endings = cells[cells.index(deltas) + 1 :]
    assert endings, cells
    for ending in endings:  # the chunks recovery appended (no writer stamp) carry the run's end time
        assert ending[1].startswith("<time"), ending
