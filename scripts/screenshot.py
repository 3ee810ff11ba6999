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
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
QUESTIONS = [
    "What happens to an answer if I reload the page while it is being written?",
    "And if the server restarts in the middle of an answer?",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
    workdir = Path(tempfile.mkdtemp(prefix="helix-shot-"))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "example_project.settings",
        "HELIX_SQLITE_PATH": str(workdir / "db.sqlite3"),
        "HELIX_DEMO_PACE": "25",
        "PYTHONPATH": str(ROOT),
    }
    env.pop("OPENAI_API_KEY", None)
    env.pop("OPENAI_BASE_URL", None)
    python = sys.executable
    subprocess.run([python, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)  # noqa: S603
    password = "screenshot-" + os.urandom(6).hex()
    create = (  # staff with helix_django's permissions, as manage.py demo_user makes the demo user
        "from django.contrib.auth import get_user_model;"
        "from django.contrib.auth.models import Permission;"
        f"u = get_user_model().objects.create_user('ada', password='{password}', is_staff=True);"
        "u.user_permissions.set(Permission.objects.filter(content_type__app_label='helix_django'))"
    )
    subprocess.run([python, "manage.py", "shell", "-c", create], cwd=ROOT, env=env, check=True)  # noqa: S603
    port = free_port()
    daphne = str(Path(python).with_name("daphne"))
    server = subprocess.Popen(  # noqa: S603
        [daphne, "-b", "127.0.0.1", "-p", str(port), "example_project.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                httpx.get(base + "/accounts/login/", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 800}, device_scale_factor=1)
            page.goto(base + "/accounts/login/")
            page.fill("#id_username", "ada")
            page.fill("#id_password", password)
            page.click("button[type=submit]")
            page.wait_for_selector("[data-hx=connection][data-status=ready]")
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
    finally:
        server.terminate()
        server.wait(10)
    print(f"wrote {args.out} and the admin-*.png next to it")


if __name__ == "__main__":
    main()
