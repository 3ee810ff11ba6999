"""The React kit's ``useHelixChat`` reads which recovery actions apply and performs one.

The React app of tests/browser/aisdk_app/ (``kit`` mode, ai@6 line, the kit installed from
its packed tarball) on the example site, with an answer interrupted mid-way (the scan found
its process gone). ``recovery()`` reads the run's inventory (``GET .../recovery``); then
``discard()`` posts the action and re-anchors on the snapshot: the partial answer leaves the
screen, and the run records who resolved it.
"""

from __future__ import annotations

import pytest

from helix_django.models import Run
from tests.browser.kit_pages import kit_page_on_an_interrupted_answer, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.node, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_recovery_lists_the_actions_and_discard_removes_the_partial_answer(browser, daphne_server_factory, settings):
    with kit_page_on_an_interrupted_answer(browser, daphne_server_factory, settings) as kit:
        page, flight = kit.page, kit.flight
        inventory = page.evaluate("() => helixApp.recovery()")
        assert inventory["runId"] == flight.run_id and inventory["status"] == "interrupted"
        assert inventory["actions"]["discard"]["available"] and inventory["actions"]["keep"]["available"]

        done = page.evaluate("() => helixApp.discard()")
        assert done["action"] == "discard" and done["runId"] == flight.run_id
        wait_for(page, "")  # re-anchored: the partial answer is gone from the screen
        assert Run.objects.get(id=flight.run_id).recovery_action == "discard_partial"
