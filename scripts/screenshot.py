"""Take the README's screenshots: the chat page mid-answer and the support console, in headless Chromium.

    .venv/bin/python scripts/screenshot.py [--out docs/screenshot.png]

Runs the example site on a throw-away SQLite file (migrate, the demo user, daphne on a free
port), has one finished exchange and a second answer still streaming, and shoots the page
while that answer is being written (``--out``). Then, as support staff would, it marks
that live answer interrupted in the admin and shoots the generations list
(docs/admin-list.png), the run page (docs/admin-run.png) and the dashboard
(docs/admin-dashboard.png), all at 1280 px. Needs Debian's Chromium at /usr/bin/chromium.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from example_site import CHROMIUM_ARGS, ROOT, example_site, signed_in
from playwright.sync_api import sync_playwright

QUESTIONS = [
    "What happens to an answer if I reload the page while it is being written?",
    "And if the server restarts in the middle of an answer?",
]


def shoot_admin(page, base: str, out: Path) -> None:
    """Mark the live answer interrupted from the admin, then shoot the list, the run page and the dashboard."""
    page.goto(base + "/admin/helix_django/run/?view=all")
    page.locator("#result_list tbody tr:has([data-status=streaming]) th a").first.click()
    page.locator("a[data-action=mark_interrupted]").click()
    page.click("input[type=submit]")  # the confirmation page: "Yes, Mark interrupted"
    page.wait_for_selector(".helix-badge[data-status=interrupted]")
    page.screenshot(path=str(out / "admin-run.png"), full_page=True)
    page.goto(base + "/admin/helix_django/run/?view=all")  # the default view lists only what needs attention
    page.wait_for_selector("#result_list")
    page.screenshot(path=str(out / "admin-list.png"))
    page.goto(base + "/admin/helix_django/run/dashboard/")
    page.screenshot(path=str(out / "admin-dashboard.png"), full_page=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshot.png"))
    args = parser.parse_args()
    env = {"DJANGO_SETTINGS_MODULE": "example_project.settings", "HELIX_DEMO_PACE": "25"}
    with example_site(env, staff=True) as (base, password), sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = signed_in(browser, base, password, 1280, 800)
        for index, question in enumerate(QUESTIONS):
            page.fill("[data-hx=input]", question)
            page.click("[data-hx=send]")
            page.wait_for_selector("[data-hx=connection][data-status=streaming]")
            if index < len(QUESTIONS) - 1:
                page.wait_for_selector("[data-hx=connection][data-status=ready]", timeout=60_000)
        # Mid-answer: about 60 % of the second reply is on screen.
        page.wait_for_function(
            "() => [...document.querySelectorAll('article[data-role=assistant]')].at(-1)?.innerText.length > 300"
        )
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=args.out)
        shoot_admin(page, base, Path(args.out).parent)
        browser.close()
    print(f"wrote {args.out} and the admin-*.png next to it")


if __name__ == "__main__":
    main()
