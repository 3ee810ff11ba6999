"""The React kit's ``useHelixChat().checkStatus`` asks the provider about an interrupted answer.

The React app of tests/browser/aisdk_app/ (``kit`` mode, ai@6 line) on the example site,
whose model is an OpenAI-compatible server in background mode (FakeOpenAI, real ``openai``
SDK): an answer was interrupted while its background response still ran. ``checkStatus()``
first answers ``provider_in_progress`` (the partial answer stays), then, once the response
completed, the same message shows the complete answer: no second request to the model.
"""

from __future__ import annotations

import pytest

from tests.browser.kit_pages import assistant_text, kit_page_on_an_interrupted_answer, wait_for
from tests.browser.pages import current_run_status
from tests.browser.test_the_chat_page_checks_the_status_of_an_interrupted_answer import ANSWER, PARTIAL

pytestmark = [pytest.mark.browser, pytest.mark.node, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_check_status_of_the_react_kit_completes_an_answer_the_model_finished(browser, daphne_server_factory, settings):
    with kit_page_on_an_interrupted_answer(browser, daphne_server_factory, settings) as kit:
        page, flight = kit.page, kit.flight
        still = page.evaluate(f"() => helixApp.checkStatus('{flight.run_id}')")
        assert still["outcome"] == "provider_in_progress"
        assert assistant_text(page) == PARTIAL
        assert current_run_status(flight.session_id) == "interrupted"

        kit.gate.set()  # the background response completes at the provider
        done = page.evaluate("() => helixApp.checkStatus()")  # the chat's current run
        assert done == {"action": "check_status", "runId": flight.run_id, "outcome": "completed", "newRunId": ""}
        wait_for(page, ANSWER)
        assert current_run_status(flight.session_id) == "completed"
        assert sum(r["path"].endswith("/responses") for r in kit.model.requests) == 1  # no second generation
