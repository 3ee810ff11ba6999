"""The React kit keeps a send that never reached the server, with its error, and ``retry()`` delivers it once.

The React app of tests/browser/aisdk_app/ (``kit`` mode, ai@6 line) on the example site. A
first turn completes; the second send's POST is aborted by the browser before it leaves
(Playwright ``page.route``), so the server never hears of it. ``useHelixChat`` re-anchors
after a network failure only when the snapshot holds the turn (the user message it sent):
here it does not, so the typed message and the error stay on screen (as the plain client's
unsent message with Retry). ``retry()`` re-sends that message under its request key: one
run, the message once, the answer once.
"""

from __future__ import annotations

import time
import uuid

import pytest

from helix_django.models import Run
from tests.browser.conftest import make_user, scripted, sign_in
from tests.browser.pages import expected_reply
from tests.browser.react_app import build_app
from tests.browser.test_aisdk_react_app import assert_turns, open_app, view, wait_exact

pytestmark = [pytest.mark.browser, pytest.mark.node, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_send_the_server_never_received_stays_with_its_error_and_retry_delivers_it_once(
    browser, daphne_server_factory
):
    dist = build_app("ai6")
    site = daphne_server_factory(
        asgi_app="example_project.asgi:application",
        settings_module="tests.browser.settings",
        helix={"AGENTS": {"default": {"PROVIDER": scripted()}}},
        env={"HELIX_TEST_STATIC_DIRS": f"aisdk-app={dist}"},
    )
    user, password = make_user()
    page = sign_in(browser, site, user, password)
    try:
        session_id = f"chat_{uuid.uuid4().hex[:16]}"
        open_app(page, site, "kit", session_id)
        first, second = "What is a cursor?", "Is my second message kept?"
        page.evaluate("text => { helixApp.send(text); }", first)
        assert_turns(wait_exact(page, session_id), [first])

        aborted = []

        def cut_the_send(route):
            if route.request.method == "POST":
                aborted.append(route.request.headers["x-helix-request-key"])
                route.abort("connectionreset")
            else:
                route.continue_()

        page.route(f"**/helix/api/sessions/{session_id}/chat", cut_the_send)
        page.evaluate("text => { helixApp.send(text).catch(() => {}); }", second)
        page.wait_for_function("() => helixApp.status === 'error'")
        time.sleep(3)  # past the kit's re-attach backoff: a re-anchor would have dropped the message
        shown = view(page)
        assert shown["status"] == "error" and shown["error"], shown
        assert [m["text"] for m in shown["messages"]] == [first, expected_reply(first), second]
        assert len(aborted) == 1
        assert Run.objects.filter(session_id=session_id).count() == 1

        page.unroute(f"**/helix/api/sessions/{session_id}/chat")
        page.evaluate("() => { helixApp.retry(); }")
        assert_turns(wait_exact(page, session_id), [first, second])
        runs = Run.objects.filter(session_id=session_id).order_by("created_at")
        assert runs.count() == 2
        assert runs.last().request_key == aborted[0]  # the same request key as the lost send
    finally:
        page.context.close()
