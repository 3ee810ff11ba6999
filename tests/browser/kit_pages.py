"""The React test app in ``kit`` mode on an answer interrupted while its background response still ran.

:func:`kit_page_on_an_interrupted_answer` serves the React app of tests/browser/aisdk_app/
(ai@6 line, the kit installed from its packed tarball) from the example site whose model is
a FakeOpenAI in background mode, interrupts an answer half way (the scan found its process
gone) and opens the app on that session, signed in as its owner, with the partial answer
on screen. :func:`wait_for` polls what the app shows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from helix_django.testing import FakeOpenAI
from tests.browser.conftest import make_user, sign_in
from tests.browser.react_app import build_app
from tests.browser.test_the_chat_page_checks_the_status_of_an_interrupted_answer import (
    PARTIAL,
    interrupted_while_generating,
    site_on,
)


@dataclasses.dataclass
class KitPage:
    """The opened app (``page``), the interrupted run (``flight``), the model and the gate that completes its response."""

    page: Any
    flight: Any
    model: FakeOpenAI
    gate: threading.Event


@contextlib.contextmanager
def kit_page_on_an_interrupted_answer(browser, daphne_server_factory, settings) -> Iterator[KitPage]:
    """Yield a :class:`KitPage` showing the partial answer; the gate opens and the page closes on exit."""
    dist = build_app("ai6")
    gate = threading.Event()
    with FakeOpenAI() as model:
        site = site_on(model, daphne_server_factory, settings, env={"HELIX_TEST_STATIC_DIRS": f"aisdk-app={dist}"})
        user, password = make_user()
        with ThreadPoolExecutor(1) as pool:  # off Playwright's event loop (the setup uses async_to_sync)
            flight = pool.submit(interrupted_while_generating, model, gate, user).result(60)
        try:
            page = sign_in(browser, site, user, password)
            page.goto(site.url(f"/static/aisdk-app/index.html?mode=kit&session={flight.session_id}"))
            page.wait_for_function("window.helixApp !== undefined")
            wait_for(page, PARTIAL)
            yield KitPage(page, flight, model, gate)
            page.context.close()
        finally:
            gate.set()


def assistant_text(page) -> str:
    """The assistant messages' text as the app holds them, joined with ``|``."""
    return page.evaluate(
        "() => helixApp.messages.filter(m => m.role === 'assistant')"
        ".map(m => m.parts.filter(p => p.type === 'text').map(p => p.text).join('')).join('|')"
    )


def wait_for(page, text: str, timeout: float = 20.0) -> None:
    """Wait until the app shows ``text`` as its assistant text (AssertionError after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while assistant_text(page) != text:
        assert time.monotonic() < deadline, f"the page shows {assistant_text(page)!r}, not {text!r}"
        time.sleep(0.1)
