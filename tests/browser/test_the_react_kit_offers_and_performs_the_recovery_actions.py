"""The React kit's ``useHelixChat`` reads which recovery actions apply and performs one.

The React app of tests/browser/aisdk_app/ (``kit`` mode, ai@6 line, the kit installed from
its packed tarball) on the example site, with an answer interrupted mid-way (the scan found
its process gone). ``recovery()`` reads the run's inventory (``GET .../recovery``); then
``discard()`` posts the action and re-anchors on the snapshot: the partial answer leaves the
screen, and the run records who resolved it.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from helix_django.models import Run
from helix_django.testing import FakeOpenAI
from tests.browser.conftest import make_user, sign_in
from tests.browser.react_app import build_app
from tests.browser.test_the_chat_page_checks_the_status_of_an_interrupted_answer import (
    PARTIAL,
    agent,
    interrupted_while_generating,
)
from tests.browser.test_the_react_kit_checks_the_status_of_an_interrupted_answer import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.node, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_recovery_lists_the_actions_and_discard_removes_the_partial_answer(browser, daphne_server_factory, settings):
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

            inventory = page.evaluate("() => helixApp.recovery()")
            assert inventory["runId"] == flight.run_id and inventory["status"] == "interrupted"
            assert inventory["actions"]["discard"]["available"] and inventory["actions"]["keep"]["available"]

            done = page.evaluate("() => helixApp.discard()")
            assert done["action"] == "discard" and done["runId"] == flight.run_id
            wait_for(page, "")  # re-anchored: the partial answer is gone from the screen
            assert Run.objects.get(id=flight.run_id).recovery_action == "discard_partial"
            page.context.close()
        finally:
            gate.set()
