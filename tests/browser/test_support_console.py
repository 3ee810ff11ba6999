"""The support console in Chromium at 1280 px: the list's key columns in view, the run page, the dashboard."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission

from helix_django.models import ChatSession, Run
from tests.browser.conftest import make_user, site_server
from tests.recovery.factories import InFlight

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

#: Where a test run leaves its screenshots when HELIX_SCREENSHOT_DIR is set (for people, not asserted).
SHOTS = os.environ.get("HELIX_SCREENSHOT_DIR", "")


@pytest.fixture
def site(daphne_server_factory):
    """The example site whose periodic relaunch scan (every LEASE_SECONDS) never meets the test.

    The seeded stuck run is one the scan would interrupt; on a loaded machine the pages took
    longer than the example's 10 s between scans, and the list showed it ``interrupted``.
    """
    return site_server(daphne_server_factory, LEASE_SECONDS=600)


def off_loop(fn, *args):
    """Run ``fn`` on a worker thread: Playwright's sync API keeps an event loop on this one."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args).result()


def staff_page(browser, site):
    user, password = make_user(staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="helix_django"))
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    context.set_default_timeout(20_000)
    page = context.new_page()
    page.goto(site.url("/admin/login/"))
    page.fill("#id_username", user.get_username())
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")
    return page


def seed() -> dict[str, str]:
    """Runs a support person meets: interrupted, stuck, failed, live, completed; long titles."""
    ids = {}
    for name, status in [("interrupted", "interrupted"), ("failed", "failed"), ("stuck", "streaming")]:
        flight = InFlight(f"s-{name}")
        flight.stream_text("The first half of an answer that stopped in the middle of a sentence")
        ChatSession.objects.filter(pk=f"s-{name}").update(
            title=f"Customer asks why the {name} invoice export shows every line twice"
        )
        flight.expire()
        if status != "streaming":
            Run.objects.filter(pk=flight.run_id).update(status=status, error_code="provider_error")
        ids[name] = flight.run_id
    ids["live"] = InFlight("s-live").run_id
    return ids


def shoot(page, name: str) -> None:
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, f"{name}.png"), full_page=True)


def test_the_list_keeps_status_and_key_columns_in_view_at_1280_px(browser, site):
    ids = off_loop(seed)
    page = staff_page(browser, site)
    page.goto(site.url("/admin/helix_django/run/"))
    page.wait_for_url("**/run/?view=attention")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 3  # interrupted, failed, stuck; the healthy live run is not listed
    shoot(page, "admin-list")
    width = page.evaluate("window.innerWidth")
    for column in ("status_badge", "short_id", "session_title", "last_event", "partial_output", "tool_count"):
        box = page.locator(f"#result_list thead th.column-{column}").bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, (column, box, width)
    badge = page.locator(f"#result_list tr:has(input[value='{ids['stuck']}']) .helix-badge")
    assert badge.inner_text() == "streaming · stuck"
    colour = badge.evaluate("el => getComputedStyle(el).backgroundColor")
    assert colour == "rgb(253, 236, 234)"  # the attention colour, next to the words

    page.goto(site.url(f"/admin/helix_django/run/{quote(ids['interrupted'])}/change/"))
    unavailable = page.locator("button.helix-action-unavailable[data-action=cancel]")
    assert unavailable.is_disabled()
    assert "nothing left to stop" in page.locator("#helix-reason-cancel").inner_text()
    shoot(page, "admin-run")

    page.goto(site.url("/admin/helix_django/run/dashboard/"))
    assert page.locator("#helix-stuck span").inner_text() == "1"
    assert page.locator(".helix-panel svg").count() == 4
    page.locator("#helix-stuck").click()
    page.wait_for_url("**stuck=yes**")
    assert page.locator("#result_list tbody tr").count() == 1
    page.goto(site.url("/admin/helix_django/run/dashboard/"))
    shoot(page, "admin-dashboard")
    page.context.close()


def test_a_live_run_page_refreshes_itself_until_the_run_ends(browser, site):
    flight = off_loop(InFlight, "s-refresh")
    off_loop(flight.stream_text, "Streaming")
    page = staff_page(browser, site)
    page.goto(site.url(f"/admin/helix_django/run/{quote(flight.run_id)}/change/"))
    assert "(9 characters)" in page.locator("#helix-response h2").inner_text()
    off_loop(lambda: flight.stream_text(" and more text", part_id="t2"))
    page.wait_for_function(
        "() => document.querySelector('#helix-response h2').textContent.includes('(23 characters)')", timeout=10_000
    )
    Run.objects.filter(pk=flight.run_id).update(status="interrupted", partial_chars=23)
    page.wait_for_selector("html[data-helix-ended='1']", timeout=10_000)
    assert page.locator("#helix-live").get_attribute("data-live") == "0"
    page.context.close()
