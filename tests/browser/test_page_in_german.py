"""The chat page in German (Chromium with a German locale): the JS client speaks the page's language.

The browser's Accept-Language picks German (the example site's LocaleMiddleware); the
page embeds the djangojs catalog ({% helix_js_catalog %}) and the client's own texts
(empty state, connection label, avatars, the Regenerate action) come from it.
"""

from __future__ import annotations

import pytest

from tests.browser.conftest import make_user
from tests.browser.pages import assistant_texts, expected_reply, send, wait_until_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_js_client_shows_german_texts_on_a_german_page(browser, site):
    user, password = make_user()
    context = browser.new_context(viewport={"width": 1280, "height": 860}, locale="de-DE")
    context.set_default_timeout(20_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(site.url("/accounts/login/"))
    page.fill("#id_username", user.get_username())
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url("**/c/*/")
    page.wait_for_selector("[data-hx=connection][data-status=ready]")

    assert page.get_attribute("html", "lang") == "de"
    assert page.text_content("[data-hx=connection]") == "Verbunden"  # written by chat-ui.js
    assert page.text_content(".hx-empty h2") == "Eine Unterhaltung beginnen"
    assert page.text_content("[data-hx=send]") == "Senden"  # the template's

    send(page, "Hallo")
    wait_until_idle(page)
    assert assistant_texts(page) == [expected_reply("Hallo")]
    assert page.text_content("article[data-role=user] .hx-avatar") == "Sie"
    assert page.text_content("article[data-role=assistant] .hx-avatar") == "KI"
    assert page.text_content("article[data-role=assistant] [data-action=regenerate]") == "Neu generieren"
    assert page.text_content("article[data-role=assistant] [data-action=copy]") == "Kopieren"
    assert errors == []
    context.close()
