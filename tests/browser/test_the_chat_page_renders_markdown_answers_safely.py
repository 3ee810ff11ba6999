"""The chat page shows an assistant's Markdown as HTML (code blocks, lists, links) with any markup that could run made inert.

The scripted model answers with Markdown and raw HTML payloads (an ``<img onerror>``, a
``<script>``, an ``<iframe>``, a ``javascript:`` link, an ``onclick``): the page renders the
Markdown, no payload runs (no dialog, no global set) and no element of the conversation
carries an ``on*`` attribute. A user's message stays plain text. Reloaded mid-answer, a
streaming Markdown answer is rendered from its text exactly once.
"""

from __future__ import annotations

import pytest

from tests.browser.conftest import make_user, sign_in, site_server
from tests.browser.pages import send, user_texts, wait_for_chars, wait_until_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MARKDOWN = (
    "Here is what to do:\n\n"
    "- install the **app**\n"
    "- run `migrate`\n\n"
    "```python\n"
    'print("hello")\n'
    "```\n\n"
    "See [the docs](https://example.com/docs) for more.\n"
)
PAYLOADS = (
    '\n<img src=x onerror="window.pwned = 1; alert(1)">\n\n'
    "<script>window.pwned = 2; alert(2)</script>\n\n"
    '<iframe src="javascript:alert(3)"></iframe>\n\n'
    '<a href="javascript:alert(4)" onclick="alert(5)">click me</a> '
    "[also](javascript:alert(6))\n"
)


def test_an_answer_in_markdown_renders_as_html_and_its_payloads_stay_inert(browser, daphne_server_factory):
    site = site_server(daphne_server_factory, provider={"TEXT": MARKDOWN + PAYLOADS, "PACE_TPS": 200})
    user, password = make_user()
    page = sign_in(browser, site, user, password)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    question = "**not bold** <b>typed</b>"
    send(page, question)
    wait_until_idle(page)

    answer = page.locator("article[data-role=assistant] .hx-markdown")
    assert answer.locator("ul > li").all_inner_texts() == ["install the app", "run migrate"]
    assert answer.locator("ul strong").inner_text() == "app"
    assert answer.locator("pre > code").text_content() == 'print("hello")\n'
    link = answer.locator("a", has_text="the docs")
    assert link.get_attribute("href") == "https://example.com/docs"
    assert link.get_attribute("target") == "_blank"
    assert link.get_attribute("rel") == "noopener noreferrer"

    # Nothing of the payloads runs, now or when the answer is drawn again.
    assert page.evaluate("window.pwned") is None
    assert dialogs == []
    assert answer.locator("script, iframe").count() == 0
    handlers = page.evaluate(
        """() => [...document.querySelectorAll('[data-hx=conversation] *')]
              .flatMap(n => [...n.attributes].filter(a => a.name.startsWith('on')).map(a => n.tagName + ' ' + a.name))"""
    )
    assert handlers == []
    hrefs = answer.locator("a").evaluate_all("nodes => nodes.map(n => n.getAttribute('href'))")
    assert not [href for href in hrefs if href and href.lower().startswith("javascript:")]
    answer.locator("img").first.wait_for(state="attached")  # the image stays, without its handler
    assert page.evaluate("window.pwned") is None and dialogs == []

    # The user's text is shown as typed: no Markdown, no HTML.
    assert user_texts(page) == [question]
    assert page.locator("article[data-role=user] strong, article[data-role=user] b").count() == 0
    page.context.close()


STREAMED = (
    "Steps:\n\n"
    + "".join(f"{i}. step number {i} of the list\n" for i in range(1, 25))
    + ("\n```js\nconst answer = 42;\nconsole.log(answer);\n```\n\nDone, with **everything** in order.\n")
)


def test_a_streaming_markdown_answer_reloaded_mid_answer_is_rendered_exactly_once(browser, daphne_server_factory):
    site = site_server(daphne_server_factory, provider={"TEXT": STREAMED})
    user, password = make_user()
    page = sign_in(browser, site, user, password)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    send(page, "List the steps")
    page.wait_for_function(
        "() => document.querySelectorAll('article[data-role=assistant] .hx-markdown li').length >= 3"
    )
    assert page.locator("[data-hx=connection]").get_attribute("data-status") == "streaming"
    page.reload()
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.wait_for_selector("[data-hx=connection][data-status=streaming]")
    wait_for_chars(page, 40)
    wait_until_idle(page)

    rendered = page.inner_html("article[data-role=assistant] .hx-markdown")
    expected = page.evaluate(
        "text => import('/static/helix_django/markdown.js').then(m => m.renderMarkdown(text))", STREAMED
    )
    assert rendered == expected
    items = page.locator("article[data-role=assistant] .hx-markdown ol > li").all_inner_texts()
    assert items == [f"step number {i} of the list" for i in range(1, 25)]
    assert (
        page.locator("article[data-role=assistant] pre code").text_content()
        == "const answer = 42;\nconsole.log(answer);\n"
    )
    assert errors == []
    page.context.close()
