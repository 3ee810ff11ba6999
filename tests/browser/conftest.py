"""Browser fixtures: the example site on daphne (tests/live.py) and Debian's Chromium via Playwright.

``site`` starts ``example_project.asgi:application`` with tests/browser/settings.py on the
live test database; ``browser`` is one headless Chromium per test; ``signed_in``
returns a page of a fresh browser context signed in as a new user.
"""

from __future__ import annotations

import os
import uuid

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.live import LiveServer

CHROMIUM = os.environ.get("HELIX_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: Scripted answers stream at this pace (tokens/s): slow enough to act mid-answer.
PACE_TPS = 30


def site_server(factory, **helix) -> LiveServer:
    """Start the example site with HELIX overrides (merged over the scripted default agent)."""
    overrides = {"AGENTS": {"default": {"PROVIDER": scripted(**helix.pop("provider", {}))}}, **helix}
    return factory(
        asgi_app="example_project.asgi:application",
        settings_module="tests.browser.settings",
        helix=overrides,
    )


def scripted(**options) -> dict:
    """The scripted provider at a test pace, with extra OPTIONS."""
    return {
        "BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider",
        "OPTIONS": {"PACE_TPS": PACE_TPS, **options},
    }


@pytest.fixture(autouse=True)
def _orm_next_to_playwright(monkeypatch):
    """Let this test use the ORM while Playwright's sync API runs its event loop in this thread.

    Playwright's sync API keeps an asyncio loop on the main thread, which Django's async-safety
    check reads as "called from async code". The ORM calls here are plain synchronous calls
    (the documented pytest-playwright + Django setting); the flag is undone after the test.
    """
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture
def site(daphne_server_factory) -> LiveServer:  # noqa: F811
    """The example site (scripted provider at PACE_TPS) on the live test database."""
    return site_server(daphne_server_factory)


@pytest.fixture
def browser() -> Browser:
    """Headless Debian Chromium (no download: the system browser), one per test.

    Per test, so Playwright's event loop is gone before pytest-django flushes the database.
    """
    assert os.path.exists(CHROMIUM), f"{CHROMIUM} is required (apt-get install chromium)"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def make_user(*, staff: bool = False):
    """Create a user with a random password; return ``(user, password)``."""
    from django.contrib.auth import get_user_model

    password = uuid.uuid4().hex
    user = get_user_model().objects.create_user(username=f"u{uuid.uuid4().hex[:10]}", password=password, is_staff=staff)
    return user, password


def sign_in(
    browser: Browser, server, user, password: str, *, init_script: str = "", width: int = 1280, height: int = 860
) -> Page:
    """Open a new context (a ``width`` x ``height`` viewport) and sign in through the login form; return the chat page.

    ``server`` is anything with ``url(path)``: the LiveServer or a proxy in front of it.
    ``init_script`` runs before every page's scripts (e.g. ``window.helixChatOptions``).
    """
    context = browser.new_context(viewport={"width": width, "height": height})
    if init_script:
        context.add_init_script(init_script)
    context.set_default_timeout(20_000)
    page = context.new_page()
    page.goto(server.url("/accounts/login/"))
    page.fill("#id_username", user.get_username())
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url("**/c/*/")
    page.wait_for_selector("[data-hx=connection][data-status=ready]")
    return page


@pytest.fixture
def signed_in(browser, site):
    """``(page, user, site)``: a signed-in chat page on a fresh session."""
    user, password = make_user()
    page = sign_in(browser, site, user, password)
    yield page, user, site
    page.context.close()
