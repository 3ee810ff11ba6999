"""A brand-new chat opens without a snapshot request: no 404, no console error (Chromium).

The page knows which chat ids have no session yet: the one the server minted (the chat
view says so) and the ones its "New chat" button mints. Such a chat renders empty at once;
once its first send created the session, the snapshot is read as usual.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page

from tests.browser.conftest import make_user
from tests.browser.pages import assistant_texts, expected_reply, send, session_id_of, wait_until_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


class Traffic:
    """What a page printed to its console and which requests it made, with their status."""

    def __init__(self, page: Page) -> None:
        self.console_errors: list[str] = []
        self.responses: list[tuple[str, int]] = []
        page.on("console", lambda msg: self.console_errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: self.console_errors.append(f"pageerror: {exc}"))
        page.on("response", lambda response: self.responses.append((response.url, response.status)))

    def snapshot_requests(self, session_id: str) -> list[int]:
        """Statuses of the snapshot requests made for ``session_id``."""
        return [status for url, status in self.responses if url.endswith(f"/sessions/{session_id}/snapshot")]

    def failures(self) -> list[tuple[str, int]]:
        return [(url, status) for url, status in self.responses if status >= 400]


def test_a_new_chat_makes_no_snapshot_request_and_logs_no_console_error(browser, site):
    user, password = make_user()
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    context.set_default_timeout(20_000)
    page = context.new_page()
    traffic = Traffic(page)
    page.goto(site.url("/accounts/login/"))
    page.fill("#id_username", user.get_username())
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url("**/c/*/")  # a user without sessions lands on an id the server minted
    page.wait_for_selector("[data-hx=connection][data-status=ready]")
    first = session_id_of(page)
    page.wait_for_load_state("networkidle")  # the page's own requests are done

    assert traffic.snapshot_requests(first) == []
    assert page.locator("[data-testid=snapshot-error]").count() == 0

    # "New chat" mints an id in the page: again no snapshot request.
    page.click("[data-hx=new-chat]")
    page.wait_for_url(re.compile(r".*/c/(?!" + re.escape(first) + r"/)[A-Za-z0-9_-]+/$"))
    page.wait_for_selector("[data-hx=connection][data-status=ready]")
    second = session_id_of(page)
    assert second != first
    page.wait_for_load_state("networkidle")
    assert traffic.snapshot_requests(second) == []

    # Its first send creates the session; from then on the page reads its snapshot (200).
    send(page, "hello there")
    wait_until_idle(page)
    assert assistant_texts(page) == [expected_reply("hello there")]
    page.reload()
    page.wait_for_selector("[data-hx=connection][data-status=ready]")
    assert assistant_texts(page) == [expected_reply("hello there")]
    assert traffic.snapshot_requests(second) and set(traffic.snapshot_requests(second)) == {200}

    # Back to the chat the server minted, still without a message: still no request.
    page.goto(site.url(f"/c/{first}/"))
    page.wait_for_selector("[data-hx=connection][data-status=ready]")
    page.wait_for_load_state("networkidle")
    assert traffic.snapshot_requests(first) == []

    assert traffic.failures() == []
    assert traffic.console_errors == []
    context.close()
