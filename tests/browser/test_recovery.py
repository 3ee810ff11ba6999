"""The main job end to end: a person chats in Chromium and the answer survives what breaks.

A real daphne process runs the example site (scripted model at a human pace, SQLite, the
database stream manager); Debian's Chromium drives the chat page. Each test breaks the
conversation mid-answer (reload, network cut, server kill, Stop, a second tab) and checks
what the page finally shows against what the server committed: same text, exactly once.
"""

from __future__ import annotations

import time

import pytest

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
    user_texts,
    wait_for_chars,
    wait_until_idle,
)
from tests.browser.proxy import CuttableProxy

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

#: Tokens per second of the scripted answers here: about six seconds per answer, so a reload,
#: a cut or a kill lands mid-answer even on a busy machine.
PACE = {"PACE_TPS": 15}


@pytest.fixture
def site(daphne_server_factory):
    """The example site with answers at PACE (overrides the conftest fixture for this module)."""
    return site_server(daphne_server_factory, provider=PACE)


def test_reload_at_40_percent_renders_the_committed_answer_once(signed_in):
    page, _, _ = signed_in
    question = "How does a reload keep my answer?"
    expected = expected_reply(question)
    send(page, question)
    shown = wait_for_chars(page, int(len(expected) * 0.4))
    assert shown < len(expected), "the answer finished before the reload"

    page.reload()
    page.wait_for_selector("[data-hx=connection][data-status=streaming]")
    wait_until_idle(page)

    rows = committed(session_id_of(page))
    assert [r["role"] for r in rows] == ["user", "assistant"]
    assert rows[1]["text"] == expected
    assert assistant_texts(page) == [expected]
    assert user_texts(page) == [question]
    assert current_run_status(session_id_of(page)) == "completed"


def test_network_cut_mid_answer_completes_once(browser, site):
    proxy = CuttableProxy(site.port)
    user, password = make_user()
    page = sign_in(browser, proxy, user, password)
    question = "What happens when my network drops?"
    expected = expected_reply(question)
    send(page, question)
    wait_for_chars(page, int(len(expected) * 0.3))

    # The network goes away: open connections are reset, new requests fail.
    page.context.set_offline(True)
    proxy.cut()
    page.wait_for_selector("[data-hx=connection][data-status=reconnecting]", timeout=10_000)
    cut_at = len(assistant_texts(page)[-1])
    time.sleep(1.5)
    assert len(assistant_texts(page)[-1]) == cut_at, "text arrived while the network was cut"
    assert cut_at < len(expected)
    proxy.restore()
    page.context.set_offline(False)
    wait_until_idle(page)

    rows = committed(session_id_of(page))
    assert [r["text"] for r in rows if r["role"] == "assistant"] == [expected]
    assert assistant_texts(page) == [expected]
    assert user_texts(page) == [question]
    page.context.close()
    proxy.close()


def test_server_killed_mid_answer_shows_truthful_partial_and_regenerate_works(browser, daphne_server_factory):
    site = site_server(daphne_server_factory, provider=PACE, LEASE_SECONDS=2, LEASE_RENEW_SECONDS=0.5)
    user, password = make_user()
    page = sign_in(browser, site, user, password)
    question = "Survive a server crash, please."
    expected = expected_reply(question)
    send(page, question)
    wait_for_chars(page, int(len(expected) * 0.4))

    site.kill()
    page.wait_for_selector("[data-hx=connection][data-status=reconnecting]", timeout=10_000)
    site.start()
    wait_until_idle(page, timeout=60)

    session_id = session_id_of(page)
    rows = committed(session_id)
    assistant_rows = [r for r in rows if r["role"] == "assistant"]
    status = current_run_status(session_id)
    assert status in ("completed", "interrupted")
    if status == "completed":
        assert assistant_texts(page) == [expected]
    else:
        # Truthfully interrupted: the partial text the server kept, marked partial, with Regenerate.
        assert len(assistant_rows) == 1 and assistant_rows[0]["helix"]["partial"] is True
        partial = assistant_rows[0]["text"]
        assert 0 < len(partial) < len(expected) and expected.startswith(partial)
        assert assistant_texts(page) == [as_shown(partial)]
        notice = page.locator("article[data-role=assistant] [data-testid=partial-notice]")
        assert "Interrupted" in notice.inner_text()
        for action in ("Regenerate", "Continue", "Keep", "Discard"):
            # The actions that apply come from the server's recovery inventory (read after the snapshot).
            notice.get_by_role("button", name=action).wait_for(state="visible", timeout=10_000)
        notice.get_by_role("button", name="Regenerate").click()
        notice.locator("[data-testid=confirm] [data-confirm=yes]").click()  # it replaces the answer: confirmed first
        page.wait_for_selector("[data-hx=connection][data-status=streaming]")
        wait_until_idle(page)
        assert current_run_status(session_id) == "completed"
        rows = committed(session_id)
        assert [r["text"] for r in rows if r["role"] == "assistant"] == [expected]
        assert assistant_texts(page) == [expected]
        assert page.locator("[data-testid=partial-notice]").count() == 0
    assert user_texts(page) == [question]
    page.context.close()


def test_stop_cancels_the_run_and_the_page_says_so(browser, daphne_server_factory):
    """Stop mid-answer ends the run ``cancelled`` and the page says so.

    The page can lag the server by seconds on a busy machine (it renders every chunk), so at
    a paced answer alone the run could finish before Stop landed. The model here stops
    producing after half its tokens (``HANG_AFTER_CHUNKS``, until cancelled): whenever the
    click lands, the run is still live and unfinished, as a stalled model would be.
    """
    question = "Start a long answer that I will stop."
    expected = expected_reply(question)
    half = len(tokenize(expected)) // 2
    site = site_server(daphne_server_factory, provider={**PACE, "HANG_AFTER_CHUNKS": half})
    user, password = make_user()
    page = sign_in(browser, site, user, password)
    send(page, question)
    wait_for_chars(page, int(len(expected) * 0.3))

    page.click("[data-hx=stop]")
    wait_until_idle(page)

    session_id = session_id_of(page)
    assert current_run_status(session_id) == "cancelled"
    rows = [r for r in committed(session_id) if r["role"] == "assistant"]
    assert len(rows) == 1 and rows[0]["helix"] == {
        "runId": rows[0]["helix"]["runId"],
        "status": "cancelled",
        "partial": True,
        "cancelledBy": "user",
    }
    assert assistant_texts(page) == [as_shown(rows[0]["text"])]
    assert 0 < len(rows[0]["text"]) <= len("".join(tokenize(expected)[:half])) < len(expected)
    notice = page.locator("[data-testid=partial-notice]")
    assert "Stopped" in notice.inner_text()
    assert notice.get_by_role("button", name="Regenerate").is_visible()
    page.context.close()


def test_second_tab_gets_typed_busy_error_and_retry_succeeds_after_the_run(signed_in):
    page, _, site = signed_in
    warmup = "Open this conversation."
    send(page, warmup)
    wait_until_idle(page)
    session_id = session_id_of(page)
    # A second tab on the same conversation, idle: it does not know what the first tab does next.
    second_page = page.context.new_page()
    second_page.goto(site.url(f"/c/{session_id}/"))
    wait_until_idle(second_page)

    first = "First tab asks a question."
    send(page, first)
    wait_for_chars(page, 10)
    second = "Second tab asks meanwhile."
    send(second_page, second, expect_busy=False)
    error = second_page.wait_for_selector("[data-testid=send-error]")
    assert error.get_attribute("data-code") == "state_already_running"
    assert "Not sent" in error.inner_text()
    retry = second_page.locator("[data-testid=send-error]").get_by_role("button", name="Retry")

    wait_until_idle(page)
    second_page.wait_for_selector("[data-testid=send-error] button:text('Retry'):not([disabled])")
    retry.click()
    second_page.wait_for_selector("[data-hx=connection][data-status=streaming]")
    wait_until_idle(second_page)

    rows = committed(session_id)
    assert [(r["role"], r["text"]) for r in rows] == [
        ("user", warmup),
        ("assistant", expected_reply(warmup)),
        ("user", first),
        ("assistant", expected_reply(first)),
        ("user", second),
        ("assistant", expected_reply(second)),
    ]
    assert user_texts(second_page) == [warmup, first, second]
    assert assistant_texts(second_page) == [expected_reply(q) for q in (warmup, first, second)]
    assert second_page.locator("[data-testid=send-error]").count() == 0
    second_page.close()


def test_snapshot_failure_shows_error_state_with_retry_never_an_empty_chat(signed_in):
    page, _, site = signed_in
    question = "Remember me."
    send(page, question)
    wait_until_idle(page)
    session_id = session_id_of(page)

    failures = []

    def fail(route):
        failures.append(route.request.url)
        route.fulfill(
            status=503,
            content_type="application/json",
            body='{"error": "Conversation history is temporarily unavailable", "code": "state_history_incomplete", "retryable": true, "cause": "store_error"}',
        )

    page.route("**/snapshot", fail)
    page.reload()
    state = page.wait_for_selector("[data-testid=snapshot-error]")
    assert state.get_attribute("data-code") == "state_history_incomplete"
    assert len(failures) == 4  # one read and three retries (250 / 500 / 1000 ms)
    assert page.locator("article[data-role]").count() == 0
    assert "could not be loaded" in state.inner_text()

    page.unroute("**/snapshot")
    page.get_by_role("button", name="Retry").click()
    wait_until_idle(page)
    assert user_texts(page) == [question]
    assert assistant_texts(page) == [expected_reply(question)]
    assert session_id_of(page) == session_id


def test_silent_dead_link_mid_answer_is_detected_and_the_answer_completes_once(browser, site):
    # The link dies without a FIN or RST: only the missing bytes (heartbeats included) tell.
    proxy = CuttableProxy(site.port)
    user, password = make_user()
    page = sign_in(browser, proxy, user, password, init_script="window.helixChatOptions = {stallMs: 2000}")
    question = "What if the link dies silently?"
    expected = expected_reply(question)
    send(page, question)
    wait_for_chars(page, int(len(expected) * 0.3))

    proxy.freeze()
    page.wait_for_selector("[data-hx=connection][data-status=reconnecting]", timeout=10_000)
    frozen_at = len(assistant_texts(page)[-1])
    assert frozen_at < len(expected)
    proxy.thaw()
    wait_until_idle(page)

    rows = committed(session_id_of(page))
    assert [r["text"] for r in rows if r["role"] == "assistant"] == [expected]
    assert assistant_texts(page) == [expected]
    page.context.close()
    proxy.close()
