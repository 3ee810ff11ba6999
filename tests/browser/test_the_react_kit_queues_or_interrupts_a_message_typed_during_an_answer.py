"""The React kit's ``useHelixChat`` sends a message typed during an answer as queued or as an interrupt.

The React app of tests/browser/aisdk_app/ (``kit`` mode, the kit installed from its packed
tarball) on the example site with the scripted model, in Chromium. ``queue()`` stores the
message behind the live answer (202): it shows in ``queued`` and, once the answer ends,
its own turn is answered and shown; ``removeQueued()`` takes it back; ``interrupt()`` stops
the live answer for the new message, its partial kept. Each ends with the page showing
exactly the snapshot's messages.
"""

from __future__ import annotations

import uuid

import pytest

from helix_django.models import QueuedMessage, Run
from tests.browser.pages import expected_reply
from tests.browser.test_aisdk_react_app import (  # noqa: F401 - fixtures
    app_build,
    app_site,
    app_site_factory,
    open_app,
    page,
    send,
    wait_exact,
    wait_for_text,
)

pytestmark = [pytest.mark.browser, pytest.mark.node, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LONG = "Write a long answer, please."


def answer_streaming(app_page, site) -> str:
    """Open the kit app on a new chat and leave a long answer streaming; return the chat's id."""
    session_id = f"chat_{uuid.uuid4().hex[:16]}"
    open_app(app_page, site, "kit", session_id)
    send(app_page, LONG)
    wait_for_text(app_page, 20)
    return session_id


def test_a_queued_message_waits_then_its_turn_is_answered_and_shown(page, app_site):  # noqa: F811
    session_id = answer_streaming(page, app_site)
    answer = page.evaluate("() => helixApp.queue('And a second question?')")
    assert answer["queued"]["position"] == 1
    assert page.evaluate("() => helixApp.queued.map(m => m.queuedMessageId)") == [answer["queued"]["queuedMessageId"]]
    rows = wait_exact(page, session_id, timeout=60)
    assert [r["role"] for r in rows] == ["user", "assistant", "user", "assistant"]
    assert [r["text"] for r in rows if r["role"] == "assistant"] == [
        expected_reply(LONG),
        expected_reply("And a second question?"),
    ]
    page.wait_for_function("() => helixApp.queued.length === 0")
    assert QueuedMessage.objects.get(session_id=session_id).status == "started"


def test_a_queued_message_taken_back_never_starts(page, app_site):  # noqa: F811
    session_id = answer_streaming(page, app_site)
    queued = page.evaluate("() => helixApp.queue('Never mind this one.')")["queued"]
    assert page.evaluate("id => helixApp.removeQueued(id)", queued["queuedMessageId"]) is True
    page.wait_for_function("() => helixApp.queued.length === 0")
    rows = wait_exact(page, session_id, timeout=60)
    assert [r["role"] for r in rows] == ["user", "assistant"]
    assert Run.objects.filter(session_id=session_id).count() == 1
    assert QueuedMessage.objects.get(session_id=session_id).status == "removed"


def test_an_interrupt_stops_the_answer_keeps_its_partial_and_answers_the_new_message(page, app_site):  # noqa: F811
    session_id = answer_streaming(page, app_site)
    page.evaluate("() => { helixApp.interrupt('Stop, answer this instead.'); }")
    rows = wait_exact(page, session_id, timeout=60)
    assert [r["role"] for r in rows] == ["user", "assistant", "user", "assistant"]
    assert 0 < len(rows[1]["text"]) < len(expected_reply(LONG))
    assert rows[3]["text"] == expected_reply("Stop, answer this instead.")
    first = Run.objects.filter(session_id=session_id).order_by("created_at").first()
    assert (first.status, first.cancelled_by) == ("cancelled", "follow_up")
