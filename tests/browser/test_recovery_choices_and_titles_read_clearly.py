"""The chat page's words leave no doubt: a confirmation names both its choices, a kept answer is
calm, and a conversation has one name in the header and the sidebar.

000, "Recovery actions should reflect certainty": Regenerate and Discard ask first, and the
question's two answers say what each does ("Yes, regenerate" / "No, go back"), never a bare
"Cancel" that reads as cancelling the run. Keep is the user's choice: the notice becomes a quiet
label, not a warning.
"""

from __future__ import annotations

import uuid

import pytest

from tests.browser.conftest import make_user, sign_in, site_server
from tests.browser.pages import send, wait_until_idle
from tests.browser.test_partial_actions import FIRST, fail_half_way

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

AMBER = "rgb(255, 250, 235)"  # --hx-warn-soft: the notice of an unresolved partial answer


def test_a_confirmation_names_both_choices_and_a_kept_answer_is_calm(browser, daphne_server_factory):
    site = site_server(daphne_server_factory, provider={"TEXT": FIRST, "FAIL_AT_FRACTION": 0.5})
    user, password = make_user()
    page = sign_in(browser, site, user, password)
    fail_half_way(page, "Confirm this one.")
    notice = page.locator("[data-testid=partial-notice]")
    assert notice.evaluate("n => getComputedStyle(n).backgroundColor") == AMBER

    for action, question, yes in (
        ("regenerate", "Replace this answer with a new one?", "Yes, regenerate"),
        ("discard", "Remove the partial answer from the conversation?", "Yes, discard"),
    ):
        notice.locator(f"button[data-action={action}]").click()
        confirm = page.locator(f"[data-testid=confirm][data-action={action}]")
        confirm.wait_for()
        # The row shows the question and its two answers only: no other action beside them.
        buttons = notice.locator(".hx-actions button").all_inner_texts()
        assert buttons == [yes, "No, go back"], buttons
        assert question in confirm.inner_text()
        confirm.locator("[data-confirm=no]").click()
        page.wait_for_selector("[data-testid=confirm]", state="detached")
        notice.get_by_role("button", name="Keep").wait_for()

    notice.get_by_role("button", name="Keep").click()
    page.wait_for_selector("[data-testid=partial-notice].is-kept:has-text('kept as partial')")
    assert notice.evaluate("n => getComputedStyle(n).backgroundColor") != AMBER
    border = page.locator("article[data-role=assistant] .hx-bubble").evaluate(
        "n => getComputedStyle(n).borderLeftColor"
    )
    assert border != "rgb(254, 223, 137)"  # --hx-warn-border
    page.context.close()


def test_a_session_created_through_the_api_has_one_name(signed_in):
    page, _, site = signed_in
    session_id = f"s_{uuid.uuid4().hex[:20]}"
    status = page.evaluate(
        """async ([id]) => {
          const csrf = document.querySelector("[name=csrfmiddlewaretoken]").value;
          const response = await fetch("/helix/api/sessions/", {
            method: "POST",
            headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
            body: JSON.stringify({ id, title: "Planning notes" }),
          });
          return response.status;
        }""",
        [session_id],
    )
    assert status in (200, 201)
    page.goto(site.url(f"/c/{session_id}/"))
    page.wait_for_selector("[data-hx=connection][data-status=ready]")
    send(page, "What should the plan say first?")
    wait_until_idle(page)
    page.wait_for_selector("[data-hx=sessions] .is-current")
    assert page.locator("[data-hx=title]").inner_text() == "Planning notes"
    assert page.locator("[data-hx=sessions] .is-current").inner_text() == "Planning notes"
