"""The React kit's ``useHelixChat().checkStatus`` asks the provider about an interrupted answer.

The React app of tests/browser/aisdk_app/ (``kit`` mode, ai@6 line) on the example site,
whose model is an OpenAI-compatible server in background mode (FakeOpenAI, real ``openai``
SDK): an answer was interrupted while its background response still ran. ``checkStatus()``
first answers ``provider_in_progress`` (the partial answer stays), then, once the response
completed, the same message shows the complete answer: no second request to the model.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from helix_django.testing import FakeOpenAI
from tests.browser.conftest import make_user, sign_in
from tests.browser.pages import current_run_status
from tests.browser.react_app import build_app
from tests.browser.test_the_chat_page_checks_the_status_of_an_interrupted_answer import (
    ANSWER,
    PARTIAL,
    agent,
    interrupted_while_generating,
)

pytestmark = [pytest.mark.browser, pytest.mark.node, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def assistant_text(page) -> str:
    return page.evaluate(
        "() => helixApp.messages.filter(m => m.role === 'assistant')"
        ".map(m => m.parts.filter(p => p.type === 'text').map(p => p.text).join('')).join('|')"
    )


def wait_for(page, text: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while assistant_text(page) != text:
        assert time.monotonic() < deadline, f"the page shows {assistant_text(page)!r}, not {text!r}"
        time.sleep(0.1)


def test_check_status_of_the_react_kit_completes_an_answer_the_model_finished(browser, daphne_server_factory, settings):
    dist = build_app("ai6")
    gate = threading.Event()
    with FakeOpenAI() as model:
        helix = {"AGENTS": {"default": agent(model)}, "OPERATION_WAIT_SECONDS": 0}
        settings.HELIX = {**settings.HELIX, **helix}
        site = daphne_server_factory(
            asgi_app="example_project.asgi:application",
            settings_module="tests.browser.settings",
            helix=helix,
            env={"HELIX_TEST_STATIC_DIRS": f"aisdk-app={dist}"},
        )
        user, password = make_user()
        with ThreadPoolExecutor(1) as pool:  # off Playwright's event loop (the setup uses async_to_sync)
            flight = pool.submit(interrupted_while_generating, model, gate, user).result(60)
        try:
            page = sign_in(browser, site, user, password)
            page.goto(site.url(f"/static/aisdk-app/index.html?mode=kit&session={flight.session_id}"))
            page.wait_for_function("window.helixApp !== undefined")
            wait_for(page, PARTIAL)

            still = page.evaluate(f"() => helixApp.checkStatus('{flight.run_id}')")
            assert still["outcome"] == "provider_in_progress"
            assert assistant_text(page) == PARTIAL
            assert current_run_status(flight.session_id) == "interrupted"

            gate.set()  # the background response completes at the provider
            done = page.evaluate("() => helixApp.checkStatus()")  # the chat's current run
            assert done == {"action": "check_status", "runId": flight.run_id, "outcome": "completed", "newRunId": ""}
            wait_for(page, ANSWER)
            assert current_run_status(flight.session_id) == "completed"
            assert sum(r["path"].endswith("/responses") for r in model.requests) == 1  # no second generation
            page.context.close()
        finally:
            gate.set()
