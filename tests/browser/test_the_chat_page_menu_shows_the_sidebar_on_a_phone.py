"""At 390 px the sidebar (New chat, conversations, Log out) is behind an accessible menu button; at 1280 px it is always shown.

The button names the sidebar it controls (aria-controls) and says whether it is open
(aria-expanded). Opening moves focus into the sidebar; Escape closes it and returns focus
to the button; choosing a conversation or New chat closes it.
"""

from __future__ import annotations

import pytest

from tests.browser.conftest import make_user, sign_in
from tests.browser.pages import send, session_id_of, wait_until_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_at_390_px_the_menu_opens_the_sidebar_and_escape_closes_it(browser, site):
    user, password = make_user()
    page = sign_in(browser, site, user, password, width=390, height=844)
    send(page, "First question")
    wait_until_idle(page)
    first = session_id_of(page)
    menu = page.locator("[data-hx=menu]")
    sidebar = page.locator("#" + menu.get_attribute("aria-controls"))
    assert menu.is_visible() and sidebar.is_hidden()
    assert menu.get_attribute("aria-expanded") == "false"
    assert page.get_by_role("button", name="Open the menu").is_visible()
    assert page.get_by_role("button", name="Log out").is_hidden()

    menu.click()
    assert menu.get_attribute("aria-expanded") == "true"
    assert menu.get_attribute("aria-label") == "Close the menu"
    new_chat = page.get_by_role("button", name="New chat")
    assert new_chat.is_visible()
    assert page.evaluate("document.activeElement.dataset.hx") == "new-chat"  # focus moved into the menu
    assert page.locator(f"[data-hx=sessions] a[data-session-id={first}]").is_visible()
    assert page.get_by_role("button", name="Log out").is_visible()
    box = sidebar.bounding_box()
    assert box and box["x"] == 0 and box["width"] <= 390

    page.keyboard.press("Escape")
    assert sidebar.is_hidden() and menu.get_attribute("aria-expanded") == "false"
    assert page.evaluate("document.activeElement.dataset.hx") == "menu"  # focus back on the button

    menu.click()
    new_chat.click()  # a new conversation: the menu closes, the composer has focus
    page.wait_for_function("first => !location.pathname.includes(first)", arg=first)
    assert sidebar.is_hidden() and menu.get_attribute("aria-expanded") == "false"
    assert page.evaluate("document.activeElement.dataset.hx") == "input"

    menu.click()
    page.locator(f"[data-hx=sessions] a[data-session-id={first}]").click()  # back to the first one
    page.wait_for_url(f"**/c/{first}/")
    assert sidebar.is_hidden() and menu.get_attribute("aria-expanded") == "false"
    page.locator("article[data-role=user]", has_text="First question").wait_for()

    menu.click()
    page.locator("[data-testid=menu-backdrop]").click(position={"x": 370, "y": 400})  # a tap beside the menu
    assert sidebar.is_hidden() and menu.get_attribute("aria-expanded") == "false"
    page.context.close()


def test_at_1280_px_the_sidebar_is_shown_and_there_is_no_menu_button(signed_in):
    page, _, _ = signed_in
    assert page.locator("[data-hx=menu]").is_hidden()
    assert page.get_by_role("button", name="New chat").is_visible()
    assert page.locator("[data-hx=sessions]").is_visible()
    assert page.get_by_role("button", name="Log out").is_visible()
    box = page.locator("[data-hx=sidebar]").bounding_box()
    assert box and box["x"] == 0 and box["width"] == 272
    page.keyboard.press("Escape")  # nothing to close
    assert page.get_by_role("button", name="New chat").is_visible()
