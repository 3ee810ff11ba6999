"""An agent set to ``interrupt``: a follow-up typed while an answer streams stops it and is answered at once.

The example site in a real daphne process (scripted model at a human pace), Debian's
Chromium: a second tab sends while the first tab's answer streams; the page then tells
the stopped answer's partial as stopped by the next message, never as "You stopped".
"""

from __future__ import annotations

import pytest

from tests.browser.conftest import make_user, scripted, sign_in, site_server
from tests.browser.pages import (
    committed,
    expected_reply,
    send,
    session_id_of,
    wait_for_chars,
    wait_until_idle,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_follow_up_stops_the_answer_and_the_page_says_the_next_message_stopped_it(browser, daphne_server_factory):
    agent = {"PROVIDER": scripted(PACE_TPS=15), "MULTITASK": "interrupt"}
    site = site_server(daphne_server_factory, AGENTS={"default": agent})
    user, password = make_user()
    page = sign_in(browser, site, user, password)
    warmup = "Open this conversation."
    send(page, warmup)
    wait_until_idle(page)
    session_id = session_id_of(page)
    second_page = page.context.new_page()
    second_page.goto(site.url(f"/c/{session_id}/"))
    wait_until_idle(second_page)

    first = "Start a long answer that my next message stops."
    send(page, first)
    page.wait_for_function("document.querySelectorAll('article[data-role=assistant]').length === 2")
    wait_for_chars(page, 10)
    follow_up = "Never mind, answer this instead."
    send(second_page, follow_up, expect_busy=False)
    wait_until_idle(second_page)

    rows = committed(session_id)
    assert [r["role"] for r in rows] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    stopped = rows[3]
    assert stopped["helix"]["status"] == "cancelled" and stopped["helix"]["cancelledBy"] == "follow_up"
    assert 0 < len(stopped["text"]) < len(expected_reply(first))
    assert rows[5]["text"] == expected_reply(follow_up)

    second_page.reload()
    wait_until_idle(second_page)
    notice = second_page.locator("[data-testid=partial-notice]")
    assert notice.count() == 1
    assert "Your next message stopped this answer" in notice.inner_text()
    page.context.close()
