"""A Regenerate records how the interrupted run it answers again was resolved, whichever surface started it.

Seen: a Regenerate from the chat page (the AI SDK's ``regenerate()`` through the chat route)
left the original interrupted run in the admin's "Needs attention" list with an empty
recovery action; only the recovery routes and the admin recorded it.
"""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from helix_django.admin.filters import attention_q
from helix_django.models import ChatSession, Run
from helix_django.recovery.scan import arecover_run
from helix_django.runtime.executor import get_executor
from tests.recovery.factories import InFlight
from tests.transport.conftest import agent_settings

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_a_chat_route_regenerate_takes_the_run_off_the_attention_list(settings):
    settings.HELIX = {**settings.HELIX, **agent_settings(TEXT="again", PACE_TPS=0)}
    flight = InFlight("s-resolved")
    flight.stream_text("a partial answer")
    assert async_to_sync(arecover_run)(flight.run_id, force=True, query_provider=False).outcome == "interrupted"
    assert Run.objects.filter(attention_q(), pk=flight.run_id).exists()

    session = ChatSession.objects.get(pk="s-resolved")
    handle = async_to_sync(get_executor().execute)(session=session, messages=[], trigger="regenerate-message")
    async_to_sync(get_executor().wait)(handle.run_id, timeout=10)

    assert Run.objects.get(pk=flight.run_id).recovery_action == "regenerate"
    assert not Run.objects.filter(attention_q(), pk=flight.run_id).exists()
