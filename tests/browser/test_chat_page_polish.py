"""Chat page details a user trips over (issue 22, item 5): busy sends, the sidebar's name, reconnect attempts.

Keep, Discard, Continue and Regenerate confirmations are proven in test_partial_actions.py and
test_recovery.py; these are the rest.
"""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import make_user, sign_in
from tests.browser.pages import assistant_texts, expected_reply, send, session_id_of, wait_for_chars, wait_until_idle
from tests.browser.proxy import CuttableProxy

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_send_in_a_second_tab_while_an_answer_is_written_says_so(signed_in):
    page, _, site = signed_in
    question = "Tell me about durable answers in a long reply."
    send(page, question)
    wait_for_chars(page, 5)
    # The sidebar names the new conversation as the header does (not "New chat").
    header = page.locator("[data-hx=title]").inner_text()
    assert header == question[:57] + "…" or header == question
    page.wait_for_function(
        "t => [...document.querySelectorAll('[data-hx=sessions] .is-current')].some(n => n.textContent === t)",
        arg=header,
    )
    second = page.context.new_page()
    second.goto(site.url(f"/c/{session_id_of(page)}/"))
    second.wait_for_selector("[data-hx=connection][data-status=streaming]")
    second.fill("[data-hx=input]", "A question from the other tab")
    second.press("[data-hx=input]", "Enter")
    hint = second.wait_for_selector("[data-testid=composer-hint]")
    assert "still being written" in hint.inner_text()
    assert second.input_value("[data-hx=input]") == "A question from the other tab"  # kept to send later
    wait_until_idle(second)
    assert second.locator("[data-testid=composer-hint]").count() == 0
    second.close()


def test_reconnecting_shows_the_attempt_and_stop_waits_for_the_server(browser, site):
    proxy = CuttableProxy(site.port)
    user, password = make_user()
    page = sign_in(browser, proxy, user, password)
    question = "What happens when the server goes away?"
    send(page, question)
    wait_for_chars(page, 10)
    page.context.set_offline(True)
    proxy.cut()
    page.wait_for_selector("[data-hx=connection][data-status=reconnecting]", timeout=10_000)
    label = page.locator("[data-hx=connection]").inner_text()
    assert re.fullmatch(r"Reconnecting… \(attempt \d+ of \d+\)", label), label
    stop = page.locator("[data-hx=stop]")
    assert stop.is_disabled() and "cannot be reached" in (stop.get_attribute("title") or "")
    proxy.restore()
    page.context.set_offline(False)
    wait_until_idle(page)
    assert page.locator("[data-hx=stop]").is_hidden()
    assert assistant_texts(page)[-1] == expected_reply(question)
    page.context.close()
    proxy.close()
