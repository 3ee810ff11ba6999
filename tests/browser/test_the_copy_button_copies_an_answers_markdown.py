"""The Copy button of a finished answer copies its raw Markdown and says "Copied".

With the clipboard API (http://localhost is a secure context; the permission is granted
in the browser context) and, where the API refuses, through a selected textarea and
``execCommand("copy")``. Both are read back with ``navigator.clipboard.readText()``.
"""

from __future__ import annotations

import pytest

from tests.browser.conftest import make_user, sign_in, site_server
from tests.browser.pages import send, wait_until_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ANSWER = "Use **two** steps:\n\n1. `pip install helix-django`\n2. add it to `INSTALLED_APPS`\n\n```sh\nmanage.py migrate\n```\n"
# The clipboard API refuses every write (as a browser does without permission or focus).
REFUSING_CLIPBOARD = """
Clipboard.prototype.writeText = function () {
  window.refusedWrites = (window.refusedWrites || 0) + 1;
  return Promise.reject(new DOMException("Write permission denied.", "NotAllowedError"));
};
"""


def copied_text(browser, site, *, init_script: str = "") -> tuple[str, str, object]:
    """Sign in, get ANSWER, press its Copy button; return (clipboard text, button text, refused writes)."""
    user, password = make_user()
    page = sign_in(browser, site, user, password, init_script=init_script)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site.url("/").rstrip("/"))
    send(page, "How do I install it?")
    wait_until_idle(page)
    assert page.locator("article[data-role=user] [data-action=copy]").count() == 0  # answers only
    button = page.locator("article[data-role=assistant] [data-action=copy]")
    assert button.inner_text() == "Copy"
    button.click()
    page.wait_for_selector("article[data-role=assistant] [data-action=copy][data-copied=yes]")
    label = button.inner_text()
    text = page.evaluate("navigator.clipboard.readText()")
    refused = page.evaluate("window.refusedWrites")
    page.wait_for_selector("article[data-role=assistant] [data-action=copy]:not([data-copied])")  # back to Copy
    page.context.close()
    return text, label, refused


def test_copy_writes_the_raw_markdown_through_the_clipboard_api(browser, daphne_server_factory):
    site = site_server(daphne_server_factory, provider={"TEXT": ANSWER, "PACE_TPS": 200})
    assert copied_text(browser, site) == (ANSWER, "Copied", None)


def test_copy_falls_back_to_a_textarea_where_the_clipboard_api_refuses(browser, daphne_server_factory):
    site = site_server(daphne_server_factory, provider={"TEXT": ANSWER, "PACE_TPS": 200})
    assert copied_text(browser, site, init_script=REFUSING_CLIPBOARD) == (ANSWER, "Copied", 1)
