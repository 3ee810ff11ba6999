"""The chat page: a message typed while an answer is written waits for it, or stops it, as the user picks.

The example site in a real daphne process (scripted model at a human pace), Debian's
Chromium. Pressing Enter while an answer streams offers "Send after this answer" (the
message is queued on the server, shown with Remove, and answered once the answer ends)
and "Stop it and send now" (the answer stops, its partial kept, and the new message is
answered at once).
"""

from __future__ import annotations

import pytest

from helix_django.models import QueuedMessage, Run
from tests.browser.conftest import make_user, scripted, sign_in, site_server
from tests.browser.pages import committed, expected_reply, send, session_id_of, wait_for_chars, wait_until_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FIRST = "Start a long answer, please."
PACE_TPS = 8


@pytest.fixture
def page(browser, daphne_server_factory):
    # 8 tokens/s: the first answer (205 words) lasts about 25 s, so on a loaded machine it is
    # still being written when the test picks an option.
    site = site_server(daphne_server_factory, AGENTS={"default": {"PROVIDER": scripted(PACE_TPS=PACE_TPS)}})
    user, password = make_user()
    page = sign_in(browser, site, user, password)
    yield page
    page.context.close()


def type_during_the_answer(page, text: str) -> str:
    send(page, FIRST)
    wait_for_chars(page, 10)
    page.fill("[data-hx=input]", text)
    page.press("[data-hx=input]", "Enter")
    page.wait_for_selector("[data-testid=composer-hint] [data-testid=queue-send]")
    return session_id_of(page)


def test_send_after_this_answer_queues_the_message_and_answers_it_after(page):
    session_id = type_during_the_answer(page, "And then this one.")
    page.click("[data-testid=queue-send]")
    queued = page.locator("[data-testid=queued-message]")
    queued.wait_for(timeout=60000)
    assert "And then this one." in queued.inner_text()
    page.wait_for_function("document.querySelectorAll('article[data-role=assistant]').length === 2", timeout=60000)
    wait_until_idle(page, timeout=120)
    rows = committed(session_id)
    assert [r["role"] for r in rows] == ["user", "assistant", "user", "assistant"]
    assert [r["text"] for r in rows if r["role"] == "assistant"] == [
        expected_reply(FIRST),
        expected_reply("And then this one."),
    ]
    assert page.locator("[data-testid=queued-message]").count() == 0


def test_remove_takes_a_queued_message_back(page):
    session_id = type_during_the_answer(page, "Forget this one.")
    page.click("[data-testid=queue-send]")
    page.locator("[data-testid=queued-remove]").click()
    page.wait_for_function("document.querySelectorAll('[data-testid=queued-message]').length === 0")
    wait_until_idle(page, timeout=120)
    assert [r["role"] for r in committed(session_id)] == ["user", "assistant"]
    assert QueuedMessage.objects.get(session_id=session_id).status == "removed"


def test_stop_it_and_send_now_interrupts_the_answer(page):
    session_id = type_during_the_answer(page, "Answer this instead.")
    page.click("[data-testid=interrupt-send]")
    page.wait_for_function("document.querySelectorAll('article[data-role=assistant]').length === 2", timeout=60000)
    wait_until_idle(page, timeout=120)
    rows = committed(session_id)
    assert [r["role"] for r in rows] == ["user", "assistant", "user", "assistant"]
    assert rows[1]["helix"]["cancelledBy"] == "follow_up" and rows[3]["text"] == expected_reply("Answer this instead.")
    assert Run.objects.filter(session_id=session_id, status="completed").count() == 1
