"""A failed answer is shown as partial with its recovery actions, and each one does what it says.

Keep keeps the partial text as it is (no inference), Discard removes it (the turn stays),
Continue starts a new generation from the partial text. The model fails half way through
its first call (scripted provider), so each session starts from a real partial answer.
"""

from __future__ import annotations

import pytest

from helix_django.models import ChatSession, Run
from tests.browser.conftest import make_user, sign_in, site_server
from tests.browser.pages import as_shown, assistant_texts, committed, send, session_id_of, user_texts, wait_until_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FIRST = "The first half of this answer arrives, then the model fails in the middle of the second half of it."
REST = " And here the continuation picks up the rest."


def fail_half_way(page, question: str) -> tuple[str, str]:
    """Open a new chat, send, let the model fail; return ``(session id, partial text)``."""
    page.click("[data-hx=new-chat]")
    page.wait_for_selector("[data-hx=connection][data-status=ready]")
    send(page, question)
    wait_until_idle(page)
    session_id = session_id_of(page)
    rows = committed(session_id)
    assert [r["role"] for r in rows] == ["user", "assistant"]
    assert rows[1]["helix"]["status"] == "failed" and rows[1]["helix"]["partial"] is True
    partial = rows[1]["text"]
    assert 0 < len(partial) < len(FIRST) and FIRST.startswith(partial)
    assert assistant_texts(page) == [as_shown(partial)]
    notice = page.locator("[data-testid=partial-notice]")
    assert "Failed" in notice.inner_text()
    for action in ("Regenerate", "Continue", "Keep", "Discard"):
        notice.get_by_role("button", name=action).wait_for(state="visible", timeout=10_000)
    return session_id, partial


def runs_ended(session_id, count, timeout=20.0):
    """Wait until the session has ``count`` runs, none of them live."""
    import time

    from helix_django.models.run import LIVE_STATUSES

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = Run.objects.filter(session_id=session_id)
        if runs.count() >= count and not runs.filter(status__in=LIVE_STATUSES).exists():
            return
        time.sleep(0.1)
    raise AssertionError(f"{session_id}: {count} ended runs expected")


def test_keep_discard_and_continue_a_partial_answer(browser, daphne_server_factory):
    # Every answer fails half way, except the one to the runtime's Continue instruction.
    continued = {"MATCH": "^Continue your previous answer", "TEXT": REST, "FAIL_AT_FRACTION": None}
    site = site_server(daphne_server_factory, provider={"TEXT": FIRST, "FAIL_AT_FRACTION": 0.5, "RULES": [continued]})
    user, password = make_user()
    page = sign_in(browser, site, user, password)

    # Keep: the partial text stays, labelled as kept; no inference. Not a dead end: the other
    # actions the server still offers stay (a mistaken Keep can be regenerated or discarded).
    kept_session, partial = fail_half_way(page, "Keep this one.")
    page.locator("[data-testid=partial-notice]").get_by_role("button", name="Keep").click()
    page.wait_for_selector("[data-testid=partial-notice]:has-text('kept as partial')")
    notice = page.locator("[data-testid=partial-notice]")
    for action in ("Regenerate", "Continue", "Discard"):
        notice.get_by_role("button", name=action).wait_for(state="visible", timeout=10_000)
    assert notice.get_by_role("button", name="Keep").count() == 0
    assert assistant_texts(page) == [as_shown(partial)]
    assert Run.objects.filter(session_id=kept_session).count() == 1
    assert Run.objects.get(session_id=kept_session).recovery_action == "keep_partial"

    # Discard: the partial answer leaves the conversation; the question stays, Regenerate is offered.
    discarded_session, _ = fail_half_way(page, "Discard this one.")
    page.locator("[data-testid=partial-notice]").get_by_role("button", name="Discard").click()
    confirm = page.locator("[data-testid=confirm][data-action=discard]")
    assert "Remove the partial answer" in confirm.inner_text()
    confirm.locator("[data-confirm=no]").click()  # Cancel: nothing happened
    page.wait_for_selector("[data-testid=confirm]", state="detached")
    assert assistant_texts(page) != []
    assert [r["role"] for r in committed(discarded_session)] == ["user", "assistant"]
    page.locator("[data-testid=partial-notice]").get_by_role("button", name="Discard").click()
    page.locator("[data-testid=confirm] [data-confirm=yes]").click()
    page.wait_for_selector("[data-testid=run-notice]:has-text('Partial answer discarded')")
    assert assistant_texts(page) == []
    assert user_texts(page) == ["Discard this one."]
    assert [r["role"] for r in committed(discarded_session)] == ["user"]
    # Regenerate from there: a new answer to the same question (which fails half way again here).
    page.locator("[data-testid=run-notice]").get_by_role("button", name="Regenerate").click()
    runs_ended(discarded_session, 2)  # a short run can end before the page shows it streaming
    wait_until_idle(page)
    runs = list(Run.objects.filter(session_id=discarded_session).order_by("created_at"))
    assert [(r.kind, r.status) for r in runs] == [("send", "failed"), ("regenerate", "failed")]
    rows = committed(discarded_session)
    assert [r["role"] for r in rows] == ["user", "assistant"] and rows[1]["helix"]["runId"] == runs[1].id
    assert assistant_texts(page) == [as_shown(rows[1]["text"])]

    # Continue: a new generation that picks up from the partial text, shown as it streams.
    continued_session, partial = fail_half_way(page, "Continue this one.")
    page.locator("[data-testid=partial-notice]").get_by_role("button", name="Continue").click()
    page.wait_for_selector("[data-hx=connection][data-status=streaming]")
    # While it is being continued, the answer is being written: no "Interrupted" notice under it.
    assert page.locator("[data-testid=partial-notice]").count() == 0
    wait_until_idle(page)
    runs = list(Run.objects.filter(session_id=continued_session).order_by("created_at"))
    assert [(r.kind, r.status) for r in runs] == [("send", "failed"), ("continue", "completed")]
    rows = committed(continued_session)
    assert [as_shown(r["text"]) for r in rows if r["role"] == "assistant"] == assistant_texts(page)
    # The continuation writes into the same message: the partial text, then the rest.
    assert assistant_texts(page) == [as_shown(partial + REST)]
    # ...in one block: the two text parts are spliced inline, never split by a line break.
    answer = page.locator("article[data-role=assistant]").last
    assert answer.locator(".hx-paragraph").count() == 1
    assert answer.locator(".hx-paragraph p").count() == 1  # one paragraph: spliced mid-sentence
    assert page.locator("[data-testid=partial-notice]").count() == 0
    assert ChatSession.objects.get(pk=continued_session).current_run_id == runs[-1].id
    page.context.close()
