"""A cancel whose provider answer was unclear is asked again (bounded) until the operation is known stopped.

Seen: a Stop whose cancel call to the provider failed left the run ``cancelled`` with
``provider_cancel_result="failed"`` while the provider's background response went on
generating; nothing ever asked again, and Check status was refused on every cancelled run.
The real ``openai`` SDK against :class:`~helix_django.testing.FakeOpenAI` (Responses,
background mode): its cancel answers 500 first, the response keeps running behind a gate.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from helix_django.models import ChatSession, Message
from helix_django.recovery import inventory as inv
from helix_django.recovery.actions import aperform
from helix_django.recovery.cancels import MAX_CANCEL_CHECKS
from helix_django.recovery.scan import arecover
from helix_django.runtime.executor import get_executor
from helix_django.runtime.providers.base import OperationStarted, ProviderRequest
from helix_django.runtime.providers.openai import OpenAIProvider
from helix_django.testing import FakeOpenAI, Reply
from tests.recovery.factories import InFlight

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

OPENAI = "helix_django.runtime.providers.openai.OpenAIProvider"


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def gate():
    """Holds the background response ``in_progress`` until the test ends."""
    event = threading.Event()
    yield event
    event.set()


def options(server) -> dict:
    return {"BASE_URL": server.base_url, "API_KEY": "test-key", "API": "responses", "BACKGROUND": True}


@pytest.fixture
def openai_agent(settings, server):
    settings.HELIX = {
        **settings.HELIX,
        "OPERATION_WAIT_SECONDS": 0,
        "AGENTS": {"default": {"PROVIDER": {"BACKEND": OPENAI, "OPTIONS": options(server)}, "MODEL": "gpt-test"}},
    }


def start_background(server, gate) -> str:
    """Start a background response through the SDK (as a process would), take its id, stop reading."""
    server.replies.append(Reply(text="An answer that keeps generating at the provider.", gate=gate))

    async def first_event() -> str:
        provider = OpenAIProvider(options(server))
        stream = provider.stream(
            ProviderRequest(model="gpt-test", system="", messages=[{"role": "user", "content": "go"}])
        )
        event = await stream.__anext__()
        await stream.aclose()
        await provider.aclose()
        assert isinstance(event, OperationStarted)
        return event.operation_id

    return async_to_sync(first_event)()


def stopped_with_an_unclear_cancel(server, gate, session_id: str) -> InFlight:
    """A live run of the background response, stopped by its owner while the provider's cancel answers 500."""
    operation = start_background(server, gate)
    flight = InFlight(session_id, provider="openai", operation_id=operation)
    flight.stream_text("An answer that")
    server.cancel_failures = 1
    session = ChatSession.objects.get(pk=session_id)
    run = async_to_sync(get_executor().cancel)(session=session, run_id=flight.run_id)
    assert run.status == "cancelled" and run.provider_cancel_result == "failed"
    assert server.responses[operation]["status"] == "in_progress"  # still generating, unseen
    return flight


def cancel_requests(server) -> int:
    return sum(r["path"].endswith("/cancel") for r in server.requests)


def test_the_scan_cancels_again_an_operation_whose_cancel_failed(openai_agent, server, gate):
    flight = stopped_with_an_unclear_cancel(server, gate, "s-unclear-scan")
    operation = flight.run.provider_operation_id

    async_to_sync(arecover)()
    run = flight.run
    assert server.responses[operation]["status"] == "cancelled"
    assert (run.status, run.provider_cancel_result, run.provider_cancel_checks) == ("cancelled", "cancelled", 1)
    assert partial_text(flight) == "An answer that"  # the partial kept by the Stop is untouched

    asked = len(server.requests)
    async_to_sync(arecover)(now=timezone.now() + timedelta(hours=1))
    assert len(server.requests) == asked  # a clear answer is never asked about again
    offer = inv.inventory(flight.run)[inv.CHECK_STATUS]
    assert (offer.is_available, offer.reason) == (False, "A cancelled generation stays cancelled.")


def test_the_scan_asks_again_a_bounded_number_of_times(openai_agent, server, gate):
    flight = stopped_with_an_unclear_cancel(server, gate, "s-unclear-bounded")
    server.cancel_failures = 1000  # the provider's cancel keeps failing
    now = timezone.now()
    async_to_sync(arecover)(now=now)
    async_to_sync(arecover)(now=now)  # too soon for a second try
    assert cancel_requests(server) == 2 and flight.run.provider_cancel_checks == 1
    for hours in range(1, 10):
        async_to_sync(arecover)(now=now + timedelta(hours=hours))
    run = flight.run
    assert run.provider_cancel_checks == MAX_CANCEL_CHECKS
    assert cancel_requests(server) == 1 + MAX_CANCEL_CHECKS
    assert (run.status, run.provider_cancel_result) == ("cancelled", "failed")


def test_check_status_on_an_unclear_cancel_asks_the_provider_again(openai_agent, server, gate):
    flight = stopped_with_an_unclear_cancel(server, gate, "s-unclear-check")
    offer = inv.inventory(flight.run)[inv.CHECK_STATUS]
    assert offer.is_available, offer.reason

    result = async_to_sync(aperform)(inv.CHECK_STATUS, flight.run_id)
    assert result.outcome == "cancel_cancelled"
    run = flight.run
    assert (run.status, run.provider_cancel_result) == ("cancelled", "cancelled")
    assert server.responses[run.provider_operation_id]["status"] == "cancelled"


def partial_text(flight: InFlight) -> str:
    return Message.objects.get(session_id=flight.session_id, position=1).text
