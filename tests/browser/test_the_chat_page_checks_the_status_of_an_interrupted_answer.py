"""The chat page's Check status chip asks the provider about a partial answer and shows what it said.

The model is an OpenAI-compatible server in background mode (FakeOpenAI, real ``openai``
SDK on both sides): an answer was interrupted while its background response still ran
(its process died; the scan found the response ``in_progress``). Check status first says the
model is still writing (the answer stays partial), then, once the response completed, shows
the complete answer of the same generation: no new request to the model. On an answer the
user stopped while the provider's cancel failed (500), it cancels the response the model
still generated and says so; the answer stays stopped.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from helix_django.models import ChatSession, Run
from helix_django.recovery.scan import arecover_run
from helix_django.runtime.executor import get_executor
from helix_django.runtime.providers.base import OperationStarted, ProviderRequest
from helix_django.runtime.providers.openai import OpenAIProvider
from helix_django.testing import FakeOpenAI, Reply
from tests.browser.conftest import make_user, sign_in
from tests.browser.pages import assistant_texts, current_run_status
from tests.recovery.factories import InFlight

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

OPENAI = "helix_django.runtime.providers.openai.OpenAIProvider"
ANSWER = "An answer that the model finished in the background while nobody listened."
PARTIAL = "An answer that"


def agent(model: FakeOpenAI) -> dict:
    options = {"BASE_URL": model.base_url, "API_KEY": "test-key", "API": "responses", "BACKGROUND": True}
    return {"PROVIDER": {"BACKEND": OPENAI, "OPTIONS": options}, "MODEL": "gpt-test"}


def start_background(model: FakeOpenAI, gate: threading.Event) -> str:
    """Start a background response held ``in_progress`` by ``gate`` (as a process would); return its id."""
    model.replies.append(Reply(text=ANSWER, gate=gate))

    async def first_event() -> str:
        provider = OpenAIProvider(agent(model)["PROVIDER"]["OPTIONS"])
        request = ProviderRequest(model="gpt-test", system="", messages=[{"role": "user", "content": "go"}])
        stream = provider.stream(request)
        event = await stream.__anext__()
        await stream.aclose()
        await provider.aclose()
        assert isinstance(event, OperationStarted)
        return event.operation_id

    return async_to_sync(first_event)()


def site_on(model: FakeOpenAI, daphne_server_factory, settings, **server) -> Any:
    """Start the example site whose default agent answers from ``model`` in background mode.

    The relaunch scan does not follow operations (``OPERATION_WAIT_SECONDS`` 0): it ends a
    run ``interrupted``, which Check status then reconciles. ``server``: more arguments
    for the daphne factory (``env=...``).
    """
    helix = {"AGENTS": {"default": agent(model)}, "OPERATION_WAIT_SECONDS": 0}
    settings.HELIX = {**settings.HELIX, **helix}
    return daphne_server_factory(
        asgi_app="example_project.asgi:application", settings_module="tests.browser.settings", helix=helix, **server
    )


def interrupted_while_generating(model: FakeOpenAI, gate: threading.Event, user) -> InFlight:
    """``user``'s answer, interrupted by the scan while its background response is held ``in_progress``."""
    flight = InFlight("s-check-page", owner=user, provider="openai", operation_id=start_background(model, gate))
    flight.stream_text(PARTIAL)
    flight.expire()
    assert async_to_sync(arecover_run)(flight.run_id).reason == "provider_in_progress"
    return flight


def test_the_check_status_chip_completes_an_answer_the_model_finished(browser, daphne_server_factory, settings):
    gate = threading.Event()
    with FakeOpenAI() as model:
        site = site_on(model, daphne_server_factory, settings)
        user, password = make_user()
        with ThreadPoolExecutor(1) as pool:  # off Playwright's event loop (the setup uses async_to_sync)
            flight = pool.submit(interrupted_while_generating, model, gate, user).result(60)
        try:
            page = sign_in(browser, site, user, password)
            page.goto(site.url(f"/c/{flight.session_id}/"))
            notice = page.locator("[data-testid=partial-notice]")
            notice.get_by_role("button", name="Check status").click()
            found = page.locator("[data-testid=status-check][data-outcome=provider_in_progress]")
            found.wait_for(state="visible")
            assert "still writing" in found.inner_text()
            assert assistant_texts(page) == [PARTIAL]
            assert current_run_status(flight.session_id) == "interrupted"

            gate.set()  # the background response completes at the provider
            page.locator("[data-testid=partial-notice]").get_by_role("button", name="Check status").click()
            page.wait_for_selector("[data-testid=partial-notice]", state="detached")
            assert assistant_texts(page) == [ANSWER]
            assert current_run_status(flight.session_id) == "completed"
            assert sum(r["path"].endswith("/responses") for r in model.requests) == 1  # no second generation
            page.context.close()
        finally:
            gate.set()


def stopped_with_an_unclear_cancel(model: FakeOpenAI, gate: threading.Event, user) -> InFlight:
    """``user``'s answer, stopped while the provider's cancel answered 500 (its response still generating)."""
    flight = InFlight("s-check-cancel", owner=user, provider="openai", operation_id=start_background(model, gate))
    flight.stream_text(PARTIAL)
    model.cancel_failures = 1
    session = ChatSession.objects.get(pk=flight.session_id)
    run = async_to_sync(get_executor().cancel)(session=session, run_id=flight.run_id)
    assert (run.status, run.provider_cancel_result) == ("cancelled", "failed")
    return flight


def test_the_check_status_chip_of_a_stopped_answer_cancels_what_the_model_still_writes(
    browser, daphne_server_factory, settings
):
    gate = threading.Event()
    with FakeOpenAI() as model:
        site = site_on(model, daphne_server_factory, settings)
        user, password = make_user()
        with ThreadPoolExecutor(1) as pool:
            flight = pool.submit(stopped_with_an_unclear_cancel, model, gate, user).result(60)
        operation = Run.objects.get(pk=flight.run_id).provider_operation_id
        assert model.responses[operation]["status"] == "in_progress"  # still generating, unseen
        try:
            page = sign_in(browser, site, user, password)
            page.goto(site.url(f"/c/{flight.session_id}/"))
            notice = page.locator("[data-testid=partial-notice]")
            notice.get_by_role("button", name="Check status").click()
            found = page.locator("[data-testid=status-check][data-outcome=cancel_cancelled]")
            found.wait_for(state="visible")
            assert "stopped" in found.inner_text()
            assert model.responses[operation]["status"] == "cancelled"
            assert assistant_texts(page) == [PARTIAL]  # it stays a stopped answer
            assert current_run_status(flight.session_id) == "cancelled"
            assert notice.get_by_role("button", name="Check status").count() == 0  # nothing left to ask

            notice.get_by_role("button", name="Keep").click()  # what the check found is past once Keep is done
            page.locator("[data-testid=partial-notice]", has_text="kept as partial").wait_for(state="visible")
            assert page.locator("[data-testid=status-check]").count() == 0
            page.context.close()
        finally:
            gate.set()
