"""The shipped chat page (client.js) tells the truth of a SIGKILL, as the AI SDK's Chat does (issue 17).

A finished answer stays complete; an answer whose server was SIGKILLed mid-way shows, after
``helix_recover``, the partial text the server kept marked "Interrupted", both on the page
that was attached before the kill and on a page opened only after the scan. The model
stalls after a third of its tokens, so the kill always lands on an unfinished run.
"""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.core.management import call_command

from helix_django.models import ChatSession
from helix_django.runtime.providers.scripted import tokenize
from tests.browser.conftest import make_user, sign_in, site_server
from tests.browser.pages import (
    as_shown,
    assistant_texts,
    committed,
    current_run_status,
    expected_reply,
    send,
    session_id_of,
    wait_for_chars,
    wait_until_idle,
)
from tests.recovery.live_chat import wait_lease_expired

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

QUICK = "Quick question first."
LONG = "Now a long answer, please."


def test_killed_answer_reads_interrupted_before_and_after_the_scan_and_a_finished_one_stays_complete(
    browser, daphne_server_factory
):
    stall = len(tokenize(expected_reply(LONG))) // 3
    provider = {"PACE_TPS": 15, "HANG_AFTER_CHUNKS": stall, "RULES": [{"MATCH": "^Quick", "HANG_AFTER_CHUNKS": None}]}
    site = site_server(daphne_server_factory, provider=provider, LEASE_SECONDS=2, LEASE_RENEW_SECONDS=0.5)
    user, password = make_user()
    page = sign_in(browser, site, user, password)
    send(page, QUICK)
    wait_until_idle(page)
    assert assistant_texts(page) == [expected_reply(QUICK)]

    send(page, LONG)
    page.wait_for_function("document.querySelectorAll('article[data-role=assistant]').length === 2")
    wait_for_chars(page, 40)  # of the second answer
    session_id = session_id_of(page)
    site.kill()
    page.wait_for_selector("[data-hx=connection][data-status=reconnecting]", timeout=10_000)
    run = ChatSession.objects.select_related("current_run").get(pk=session_id).current_run
    wait_lease_expired(run)
    with ThreadPoolExecutor(1) as pool:  # off Playwright's event loop (the scan uses async_to_sync)
        pool.submit(call_command, "helix_recover", stdout=io.StringIO()).result(60)
    assert current_run_status(session_id) == "interrupted"
    site.start()

    rows = [r for r in committed(session_id) if r["role"] == "assistant"]
    partial = rows[1]["text"]
    assert 0 < len(partial) < len(expected_reply(LONG)) and rows[1]["helix"]["partial"] is True
    later = page.context.new_page()
    later.goto(site.url(f"/c/{session_id}/"))
    for shown in (page, later):
        wait_until_idle(shown, timeout=60)
        assert assistant_texts(shown) == [expected_reply(QUICK), as_shown(partial)]
        notice = shown.locator("article[data-role=assistant] [data-testid=partial-notice]")
        assert notice.count() == 1 and "Interrupted" in notice.inner_text()
    page.context.close()
